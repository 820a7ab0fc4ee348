#!/usr/bin/env bash
# Makes `import zenith` work in every CPython on this machine that can load the built module
# (same version as the interpreter it was built for: Debian's /usr/bin/python3, and e.g.
# pyenv's 3.11 first on PATH): writes zenith.pth, naming <build>/python, into that
# interpreter's site-packages. An interpreter without numpy (not Debian's) also gets
# zenith-debian-packages.pth, which appends Debian's /usr/lib/python3/dist-packages to its path
# (numpy, pytest; its own packages keep precedence). Idempotent; no network.
#   scripts/install-python.sh [build dir, default build/release]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
pydir="$(realpath -m "${1:-$root/build/release}/python")"
module=$(ls "$pydir"/zenith/_zenith.*.so 2>/dev/null | head -1 || true)
if [ -z "$module" ]; then
  echo "[install-python] no built module in $pydir/zenith (target zenith_python); skipped"
  exit 0
fi
suffix=".${module##*/_zenith.}"   # .cpython-311-x86_64-linux-gnu.so
debian_packages=/usr/lib/python3/dist-packages
sudo_cmd=()
[ "$(id -u)" -ne 0 ] && command -v sudo > /dev/null && sudo_cmd=(sudo)

# Writes $2 into the file $1 unless it holds exactly that already.
put() {
  [ -f "$1" ] && [ "$(cat "$1")" = "$2" ] && return 0
  if [ -w "$(dirname "$1")" ]; then printf '%s\n' "$2" > "$1"; else
    printf '%s\n' "$2" | "${sudo_cmd[@]}" tee "$1" > /dev/null; fi
  echo "[install-python] wrote $1"
}

# What the script needs to know of an interpreter: its prefix (to visit each once), the suffix
# of the extension modules it loads, its site-packages, and whether Debian's packages are on its
# path already.
query='import site, sys, sysconfig
print(sys.prefix)
print(sysconfig.get_config_var("EXT_SUFFIX"))
print(site.getsitepackages()[0])
print(int(any(p.rstrip("/") == "/usr/lib/python3/dist-packages" for p in sys.path)))'
seen=" "
# The interpreters to visit: those on PATH and Debian's; ZENITH_INSTALL_PYTHONS (space-separated)
# replaces the list (the tests point it at stand-ins, leaving the machine's interpreters alone).
candidates=("$(command -v python3 || true)" "$(command -v python || true)" /usr/bin/python3)
[ -n "${ZENITH_INSTALL_PYTHONS:-}" ] && read -r -a candidates <<< "$ZENITH_INSTALL_PYTHONS"
for candidate in "${candidates[@]}"; do
  [ -n "$candidate" ] && [ -x "$candidate" ] || continue
  info=$("$candidate" -c "$query" 2>/dev/null) || continue
  mapfile -t f <<< "$info"
  prefix=${f[0]} ext=${f[1]} site_dir=${f[2]} has_debian=${f[3]}
  case "$seen" in *" $prefix "*) continue ;; esac
  seen="$seen$prefix "
  if [ "$ext" != "$suffix" ]; then
    echo "[install-python] $candidate ($prefix) is not the module's Python ($suffix); skipped"
    continue
  fi
  "${sudo_cmd[@]}" mkdir -p "$site_dir"
  put "$site_dir/zenith.pth" "$pydir"
  if [ "$has_debian" = 0 ] && [ -d "$debian_packages" ]; then
    put "$site_dir/zenith-debian-packages.pth" "$debian_packages"
  fi
done
