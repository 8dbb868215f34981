#!/usr/bin/env bash
# Runs a gtest binary on a --gtest_filter for a CTest lane (xla_cpu.*), after checking that
# each positive pattern of the filter selects at least one test: a renamed suite then fails the
# lane, naming the pattern, instead of silently dropping out of it. With --check-only it only
# checks (tsan.selection.*: the TSan lane's tests are discovered one by one with that filter).
# Usage: run_gtest_filter.sh [--check-only] BINARY FILTER [MORE GTEST ARGS...]
# FILTER is gtest's: POSITIVE[:POSITIVE...][-NEGATIVE[:NEGATIVE...]].
set -euo pipefail
check_only=""
if [ "${1:-}" = --check-only ]; then check_only=1; shift; fi
binary=$1
filter=$2
shift 2
positive=${filter%%-*}
negative=""
[ "$positive" = "$filter" ] || negative=-${filter#*-}
[ -n "$positive" ] || positive='*'
IFS=: read -r -a patterns <<<"$positive"
for p in "${patterns[@]}"; do
  [ -n "$p" ] || continue
  # --gtest_list_tests prints each suite unindented and its tests indented.
  if ! "$binary" --gtest_list_tests --gtest_filter="$p$negative" | grep -q '^  '; then
    echo "FAIL: '$p' (of --gtest_filter=$filter) selects no test in $binary:" \
      "a suite renamed or removed? Update the lane's filter."
    exit 1
  fi
done
if [ -n "$check_only" ]; then
  echo "ok: each pattern of --gtest_filter=$filter selects tests in $binary"
  exit 0
fi
exec "$binary" --gtest_filter="$filter" "$@"
