#!/usr/bin/env bash
# The README's CLI section cannot drift from the binary: every command `tlaloc --help` lists (and
# every command those list, as in `tlaloc kernels lock`) is mentioned there as "tlaloc COMMAND",
# and so is every long option its --help shows.
# Usage: readme_help_test.sh TLALOC README.md
set -uo pipefail
tlaloc="$1"
readme="$2"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# The section from "## The CLI" up to the next "## " heading.
awk '/^## The CLI/ { on = 1; print; next } /^## / { on = 0 } on' "$readme" >"$work/section"
[[ -s "$work/section" ]] || { echo "FAIL: no '## The CLI' section in $readme"; exit 1; }

# subcommands HELP_FILE: the names under CLI11's "Subcommands:" heading.
subcommands() {
  awk '/^(SUBCOMMANDS|Subcommands):/ { on = 1; next } on && /^[^ ]/ { on = 0 } on && /^  [a-z]/ { print $1 }' "$1"
}

failures=0
missing() {
  echo "FAIL: the README's CLI section does not mention $*"
  failures=$((failures + 1))
}

check_command() {  # check_command WORD... (the command path after "tlaloc")
  local help="$work/help_$(echo "$*" | tr ' ' '_')"
  "$tlaloc" "$@" --help >"$help" 2>&1 || { echo "FAIL: tlaloc $* --help failed"; failures=$((failures + 1)); return; }
  # "tlaloc kernels lock" may be written "tlaloc kernels lock|download|...".
  local pattern="tlaloc $1"
  grep -qE -- "tlaloc $1([^a-z0-9-]|$)" "$work/section" || missing "'$pattern'"
  if [[ $# -gt 1 ]]; then
    grep -qE -- "(^|[^a-z0-9-])$2([^a-z0-9-]|$)" "$work/section" || missing "'$2' (tlaloc $*)"
  fi
  local option
  for option in $(grep -oE -- '--[a-z0-9][a-z0-9-]*' "$help" | sort -u); do
    grep -qE -- "${option}([^a-z0-9-]|$)" "$work/section" || missing "$option (tlaloc $* --help)"
  done
  local sub
  for sub in $(subcommands "$help"); do
    check_command "$@" "$sub"
  done
}

"$tlaloc" --help >"$work/help_top" 2>&1 || { echo "FAIL: tlaloc --help failed"; exit 1; }
commands="$(subcommands "$work/help_top")"
[[ -n "$commands" ]] || { echo "FAIL: no commands found in tlaloc --help"; cat "$work/help_top"; exit 1; }
for cmd in $commands; do
  check_command "$cmd"
done
for option in $(grep -oE -- '--[a-z0-9][a-z0-9-]*' "$work/help_top" | sort -u); do
  grep -qE -- "${option}([^a-z0-9-]|$)" "$work/section" || missing "$option (tlaloc --help)"
done

if [[ $failures -ne 0 ]]; then
  echo "$failures item(s) missing from the README's CLI section; document them there"
  exit 1
fi
echo "README CLI section: every command and option of --help is documented"
