#!/usr/bin/env bash
# The CLI's shared behaviour, end to end and in seconds (no model is loaded): unknown commands
# and options get a suggestion, a missing required option names all its spellings, every parse
# error exits 2 and --help 0, a flag given twice keeps its last value, defaults show in --help,
# GGUF files and Hugging Face cache references given as --model are recognised.
# Usage: framework_test.sh TLALOC
set -uo pipefail
tlaloc="$1"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
failures=0

# run ARGS...: runs tlaloc, leaving the exit code in $rc and the output in $work/out, $work/err.
run() {
  "$tlaloc" "$@" >"$work/out" 2>"$work/err"
  rc=$?
}
fail() {
  echo "FAIL: $*"
  echo "--- stdout"; head -20 "$work/out"; echo "--- stderr"; head -20 "$work/err"
  failures=$((failures + 1))
}
expect_rc() {  # expect_rc WANT DESCRIPTION
  [[ $rc -eq $1 ]] || fail "$2: exit code $rc, expected $1"
}
expect_in() {  # expect_in FILE TEXT DESCRIPTION (fixed string)
  grep -qF -- "$2" "$work/$1" || fail "$3: no '$2' in $1"
}

# Unknown commands: a suggestion from the registered names, the list, exit 2.
run generat --model x
expect_rc 2 "unknown command"
expect_in err "unknown command 'generat' (did you mean generate?)" "unknown command"
expect_in err "bench" "unknown command lists the commands"
run kernels lok x
expect_rc 2 "unknown kernels command"
expect_in err "unknown command 'lok' (did you mean lock?)" "unknown kernels command"

# No command: the usage, with every command, and exit 2 (nothing was asked for).
run
expect_rc 2 "no command"
expect_in out "inspect" "no command prints the help"
expect_in out "doctor" "no command prints the help"

# A missing required option names its long and short spellings and what it is for.
run bench
expect_rc 2 "missing --model"
expect_in err "--model (-m) is required: the model" "missing --model"

run bench -m
expect_rc 2 "-m without its value"
expect_in err "--model (-m) needs a value" "-m without its value"

# An unknown option: a suggestion from the subcommand's own options, reported before the
# missing --model.
run bench --prompt-token 5
expect_rc 2 "unknown option"
expect_in err "unknown option '--prompt-token' (did you mean --prompt-tokens?)" "unknown option"
run inspect --jsn x
expect_in err "(did you mean --json?)" "unknown inspect option"

# Values CLI11 refuses (not a number, out of range) and values the command refuses: exit 2.
run bench -m "$work" --prompt-tokens abc
expect_rc 2 "a non-number value"
run inspect "$work" --max-listed 0
expect_rc 2 "a value out of range"
run bench -m "$work" --threads -3
expect_rc 2 "a negative thread count"
run bench -m "$work" --dtype f64
expect_rc 2 "an unknown --dtype"
expect_in err "--dtype" "an unknown --dtype names the flag"

# --help and --version exit 0; defaults show in a subcommand's help.
run --help
expect_rc 0 "--help"
run --version
expect_rc 0 "--version"
run bench --help
expect_rc 0 "bench --help"
expect_in out "-m,--model" "bench --help shows -m"
expect_in out "-t,--threads" "bench --help shows -t"
expect_in out "=512" "bench --help shows the --prompt-tokens default"
run run --help
expect_in out "=64" "run --help shows the --max-elements default"
! grep -qF "=[]" "$work/out" || fail "run --help shows an empty list as a default"

# A flag given twice keeps its last value: bench checks --dtype and --prompt-tokens before it
# looks at the model, so the last value decides which error comes first.
run bench -m "$work/absent" --dtype f32 --dtype f64
expect_rc 2 "--dtype twice, last one bad"
expect_in err "f64" "--dtype twice: the last value is checked"
run bench -m "$work/absent" --dtype f64 --dtype f32
expect_rc 1 "--dtype twice, last one good"
expect_in err "does not exist" "--dtype twice, last one good: reaches the model"
run bench -m "$work/absent" --prompt-tokens 0 --prompt-tokens 8
expect_in err "does not exist" "--prompt-tokens twice: the last value counts"

# A GGUF file where a checkpoint folder is expected: by its magic, and by its name.
printf 'GGUF\003\000\000\000' >"$work/weights.bin"
run bench -m "$work/weights.bin"
expect_rc 2 "bench -m GGUF"
expect_in err "weights.bin" "bench -m a truncated GGUF names the file"
expect_in err "GGUF" "bench -m a truncated GGUF says what it read"
cp "$work/weights.bin" "$work/model.gguf"
run inspect "$work/model.gguf"
expect_rc 1 "inspect of a truncated GGUF"
expect_in err "run llama / qwen3 / qwen3moe GGUF files with -m" "inspect GGUF"
echo "not a model" >"$work/notes.txt"
run bench -m "$work/notes.txt"
expect_rc 2 "bench -m a text file"
expect_in err "is not a folder: expected a Hugging Face checkpoint folder" "bench -m a file"

# ORG/NAME through a fake Hugging Face cache, offline.
hub="$work/hub"
mkdir -p "$hub/models--org--tiny/refs" "$hub/models--org--tiny/snapshots/0123abcd"
printf '0123abcd' >"$hub/models--org--tiny/refs/main"
HF_HUB_CACHE="$hub" run bench -m org/tiny --new-tokens 1 --prompt-tokens 1
expect_rc 1 "bench -m ORG/NAME with an empty snapshot"
expect_in err "snapshots/0123abcd" "ORG/NAME resolves to its snapshot"
# Offline, so that the missing reference is not fetched from the Hub (tests/io/hub_download_test.sh
# covers downloads).
HF_HUB_OFFLINE=1 HF_HUB_CACHE="$hub" run bench -m org/absent
expect_rc 1 "bench -m ORG/NAME not in the cache"
expect_in err "nothing is downloaded" "ORG/NAME not in the cache"
expect_in err "$hub/models--org--absent" "ORG/NAME not in the cache names the path"

# -t/--threads on run: a small program runs with two threads.
cat >"$work/add.mlir" <<'EOF'
func.func public @main() -> tensor<2xf32> {
  %a = stablehlo.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %b = stablehlo.add %a, %a : tensor<2xf32>
  return %b : tensor<2xf32>
}
EOF
run run "$work/add.mlir" -t 2
expect_rc 0 "run -t 2"
expect_in out "result 0" "run -t 2 prints its result"
run run "$work/add.mlir" --input arg0
expect_rc 2 "run --input of the wrong form"
# Scalars given twice: the last value counts; list options keep every value.
run run "$work/add.mlir" --max-elements 5 --max-elements 1 -t 1 -t 2
expect_rc 0 "run with flags given twice"
expect_in out "[2, ...]" "--max-elements twice: the last value (1) counts"
run run "$work/add.mlir" --input bad1 --input arg0=x.npy
expect_in err "--input bad1" "--input twice: the first value is kept too"

# A self-checking program on a PJRT target: the checks run on the host after the run, so a
# plugin needs no check targets; a failing check exits 1 and names the mismatch.
cat >"$work/checked.mlir" <<'EOF'
func.func public @main() -> tensor<2xf32> {
  %a = stablehlo.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %b = stablehlo.add %a, %a : tensor<2xf32>
  %want = stablehlo.constant dense<[2.0, 4.0]> : tensor<2xf32>
  stablehlo.custom_call @check.expect_eq(%b, %want) {has_side_effect = true} : (tensor<2xf32>, tensor<2xf32>) -> ()
  return %b : tensor<2xf32>
}
EOF
sed 's/dense<\[2.0, 4.0\]>/dense<[2.0, 5.0]>/' "$work/checked.mlir" >"$work/failing.mlir"
for target in interp cpu; do
  run run "$work/checked.mlir" --target "$target"
  expect_rc 0 "run --target $target of a passing self-checking program"
  expect_in out "PASS @check.expect_eq" "run --target $target reports the check"
  run run "$work/failing.mlir" --target "$target"
  expect_rc 1 "run --target $target of a failing self-checking program"
  expect_in out "FAIL @check.expect_eq" "run --target $target reports the failed check"
  expect_in out "got 4.0, expected 5.0" "run --target $target names the mismatch"
done

# doctor: the report of every target exits 0 (a missing accelerator is normal there); one target
# asked for by name that resolves to no plugin, or whose plugin does not open, exits 1.
run doctor
expect_rc 0 "doctor"
expect_in out "target interp:" "doctor lists the interpreter"
run doctor --target "$work/absent-plugin.so"
expect_rc 1 "doctor --target a missing plugin"
expect_in err "resolves to no plugin" "doctor --target a missing plugin says so"
run doctor --target "$work/notes.txt" --load
expect_rc 1 "doctor --target a file that is no plugin --load"
# finetune takes -m for --model, as generate, chat and bench do.
run finetune -m "$work/absent" --data "$work/absent.jsonl" --out "$work/ft"
expect_rc 1 "finetune -m of a missing folder"
expect_in err "absent/config.json" "finetune -m reaches the model's files"

if [[ $failures -ne 0 ]]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "cli framework: all checks passed"
