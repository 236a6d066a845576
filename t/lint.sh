#!/bin/bash
# lint.sh - the formatting and lint checks of flux-rsa, as .ci/run runs
# them: black and isort (pyproject.toml), flake8 (.flake8) and
# clang-format (.clang-format), over every tracked Python and C file.
# Exits non-zero, naming the files, when one is off.  `t/lint.sh --fix`
# rewrites them in place instead (black, isort, clang-format).
set -uo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/bin:$PATH  # Debian's black, isort, flake8, clang-format

py=()
while IFS= read -r f; do
    case "$f" in
    *.py) py+=("$f") ;;
    *) head -n1 "$f" 2>/dev/null | grep -qE '^#!.*(python|@PYTHON@)' && py+=("$f") ;;
    esac
done < <(git ls-files)
mapfile -t c < <(git ls-files '*.c' '*.h')

if [ "${1-}" = "--fix" ]; then
    isort -q "${py[@]}" && black -q "${py[@]}" && clang-format -i "${c[@]}"
    exit
fi

rc=0
isort --check-only --diff -q "${py[@]}" || { echo "lint: isort: run t/lint.sh --fix" >&2; rc=1; }
black --check -q "${py[@]}" || { echo "lint: black: run t/lint.sh --fix" >&2; rc=1; }
flake8 "${py[@]}" || { echo "lint: flake8 (fix by hand)" >&2; rc=1; }
clang-format --dry-run -Werror "${c[@]}" || { echo "lint: clang-format: run t/lint.sh --fix" >&2; rc=1; }
[ $rc -eq 0 ] && echo "lint: ${#py[@]} Python and ${#c[@]} C files clean"
exit $rc
