#!/usr/bin/env bash
# Prints the files under src/ that clang-tidy must check for what changed
# since commit BASE (one path per line): the .cpp files that changed, and
# every .cpp that includes a changed header, directly or through other
# headers. Prints "all" when BASE is not in this clone's history (a shallow
# clone) or .clang-tidy itself changed.
#   .ci/tidy_files.sh BASE
set -euo pipefail
cd "$(dirname "$0")/.."
base=$1
if ! git cat-file -e "$base^{commit}" 2>/dev/null; then
  echo all
  exit 0
fi
changed=$(git diff --name-only "$base" -- src include .clang-tidy)
if grep -qx .clang-tidy <<<"$changed"; then
  echo all
  exit 0
fi
declare -A files=()
headers=()
for f in $changed; do
  [ -e "$f" ] || continue
  case $f in
    src/*.cpp) files[$f]=1 ;;
    *.hpp) headers+=("$f") ;;
  esac
done
# Walks the include graph upwards: a header's includers are the files whose
# #include names it (by its path under include/, or by its name for the
# headers that sit beside the sources in src/).
declare -A seen=()
while [ ${#headers[@]} -gt 0 ]; do
  h=${headers[0]}
  headers=("${headers[@]:1}")
  [ -z "${seen[$h]:-}" ] || continue
  seen[$h]=1
  case $h in
    include/*) name=${h#include/} ;;
    *) name=$(basename "$h") ;;
  esac
  while IFS= read -r user; do
    case $user in
      *.cpp) files[$user]=1 ;;
      *.hpp) headers+=("$user") ;;
    esac
  done < <(grep -rlF --include='*.cpp' --include='*.hpp' "#include \"$name\"" src include || true)
done
for f in "${!files[@]}"; do echo "$f"; done | sort
