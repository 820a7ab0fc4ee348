#!/usr/bin/env bash
# Fails when a C++ file in the tree differs from what .clang-format makes of it (lists them):
# tracked files and new ones git does not ignore (a file not yet added is checked too).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
mapfile -t files < <(git ls-files --cached --others --exclude-standard -- '*.cpp' '*.h' '*.cc' '*.hpp')
if ! out=$(clang-format --dry-run -Werror "${files[@]}" 2>&1); then
  echo "[check-format] these files differ from .clang-format (run: clang-format -i FILE):"
  grep -oE '^[^: ]+\.(cpp|h|cc|hpp):[0-9]+:' <<< "$out" | sed -E 's/:[0-9]+:$//' | sort -u | sed 's/^/  /'
  exit 1
fi
echo "[check-format] ${#files[@]} files match .clang-format"
