#!/bin/bash
# scripts/demo.sh's build leaves `import zenith` working and the dashboard built, checked without
# building: the targets demo.sh asks build.sh for (its --dry-run) must produce the `zenith`
# command, the Python module and the dashboard's index.html (ninja's command list for those
# targets in this build tree); then install-python.sh (which build.sh runs after every build),
# pointed at a fresh venv of each of the machine's Python 3 interpreters, must make
# `import zenith, numpy` work there. The venvs stand in for the interpreters' own site-packages,
# which the test leaves alone. $1 is the zenith binary.
set -u
ZENITH=$(realpath "$1")
build=$(dirname "$ZENITH")
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
source "$here/../support/e2e_work.bash"
e2e_work demo_build
fail() {
  echo "FAIL: $*"
  exit 1
}

# --- what demo.sh builds.
plan=$(bash "$root/scripts/demo.sh" --build-only --dry-run) || fail "demo.sh --dry-run: $plan"
echo "$plan"
build_line=$(grep -m1 'scripts/build\.sh' <<< "$plan") || fail "demo.sh runs no scripts/build.sh"
read -r -a words <<< "$build_line"
targets=()
for ((i = 0; i < ${#words[@]}; i++)); do
  [ "${words[i]}" = --target ] && targets+=("${words[@]:i+1}") && break
done
[ ${#targets[@]} -gt 0 ] || fail "demo.sh builds every target, not a lean list: $build_line"
grep -qF 'install-python.sh" "$root/build/$preset"' "$root/scripts/build.sh" ||
  fail "scripts/build.sh no longer runs install-python.sh on the build it made"

# --- what those targets produce here (the command list; nothing is built).
commands=$(ninja -C "$build" -t commands "${targets[@]}" 2>&1) || fail "ninja -t commands ${targets[*]}: $commands"
module=$(ls "$build"/python/zenith/_zenith.*.so 2>/dev/null | head -1)
[ -n "$module" ] || fail "no Python module in $build/python/zenith (target zenith_python; pybind11-dev and python3-dev)"
grep -q -- "-o python/zenith/$(basename "$module")" <<< "$commands" ||
  fail "demo.sh's targets (${targets[*]}) do not build the Python module python/zenith/$(basename "$module")"
grep -q "build\.mjs .*share/zenith/web" <<< "$commands" ||
  fail "demo.sh's targets (${targets[*]}) do not build the dashboard's files (target zenith_web)"
grep -qE -- "-o zenith( |$)" <<< "$commands" || fail "demo.sh's targets (${targets[*]}) do not link zenith"
[ -f "$build/share/zenith/web/index.html" ] || fail "no $build/share/zenith/web/index.html"
echo "ok: demo.sh builds ${targets[*]}: the zenith command, python/zenith/$(basename "$module") and the dashboard"

# --- install-python.sh makes `import zenith` work in each Python 3 of the machine.
suffix=".${module##*/_zenith.}"
seen=" " venvs=()
for candidate in "$(command -v python3 || true)" "$(command -v python || true)" /usr/bin/python3; do
  [ -n "$candidate" ] && [ -x "$candidate" ] || continue
  prefix=$("$candidate" -c 'import sys; print(sys.base_prefix)') || continue
  case "$seen" in *" $prefix "*) continue ;; esac
  seen="$seen$prefix "
  venv="$work/venv${#venvs[@]}"
  "$candidate" -m venv --without-pip "$venv" || fail "$candidate -m venv"
  venvs+=("$venv/bin/python3")
  echo "interpreter: $candidate ($prefix) -> $venv"
done
[ ${#venvs[@]} -gt 0 ] || fail "no python3 on this machine"
out=$(env ZENITH_INSTALL_PYTHONS="${venvs[*]}" bash "$root/scripts/install-python.sh" "$build" 2>&1) ||
  fail "install-python.sh: $out"
echo "$out"
imported=0
for py in "${venvs[@]}"; do
  ext=$("$py" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
  if [ "$ext" != "$suffix" ]; then
    grep -q "is not the module's Python" <<< "$out" || fail "$py ($ext) is not the module's Python ($suffix), and install-python.sh did not say so"
    echo "note: $py is CPython $ext, the module is $suffix: it cannot load it (said so)"
    continue
  fi
  file=$(cd "$work" && env -u PYTHONPATH -u PYTHONHOME "$py" -c 'import zenith, numpy; print(zenith.__file__)' 2>&1) ||
    fail "$py: import zenith after install-python.sh: $file"
  [ "$file" = "$build/python/zenith/__init__.py" ] || [ "$(realpath "$file")" = "$(realpath "$build/python/zenith/__init__.py")" ] ||
    fail "$py imported zenith from $file, not $build/python"
  echo "ok: $py imports zenith from $file"
  imported=$((imported + 1))
done
[ "$imported" -gt 0 ] || fail "no interpreter of this machine can import the module ($suffix)"
echo "demo_build: all checks passed ($imported interpreter(s))"
