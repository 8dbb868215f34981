#!/usr/bin/env bash
# `tlaloc generate` as a user runs it on the tiny preset (151,936 embedding rows, 151,669
# tokenizer ids): sampling over many seeds never produces an id the tokenizer cannot decode
# (it used to end with "id 151879 ... is not in the vocabulary"), greedy runs past the 262
# tokens where it used to die, bad values are refused by name with exit 2, --stop cuts the reply,
# the budget is capped to --ctx-size with a note, a --ctx-size past max_position_embeddings is
# honoured with a warning, the seed is printed, --choices N gives what N seeds give, and the
# process keeps the name tlaloc.
# Usage: generate_requests_test.sh TLALOC SOURCE_DIR
set -euo pipefail
tlaloc=$1
source "$2/tests/cli_test_lib.sh"
make_tiny_model "$tlaloc" "$2" 5
fail() { echo "FAIL: $*"; exit 1; }
json_field() { python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print($2)" "$1"; }

# 1. Sampling: 24 seeds x 48 tokens, every id inside the tokenizer, every run exit 0.
for seed in $(seq 1 24); do
  "$tlaloc" generate -m "$MODEL" --chat Hello --temperature 1 --seed "$seed" -n 48 --json \
    >"$WORK/s.json" 2>"$WORK/s.err" || { cat "$WORK/s.err"; fail "seed $seed exited non-zero"; }
  max_id=$(json_field "$WORK/s.json" "max(j['generated_ids'])")
  [ "$max_id" -lt 151669 ] || fail "seed $seed sampled id $max_id past the tokenizer"
  [ "$(json_field "$WORK/s.json" "j['seed']")" = "$seed" ] || fail "seed $seed not reported"
done
echo "ok: 24 sampled runs stay inside the tokenizer's ids"

# 2. Greedy, 300 tokens (it used to die at 262).
"$tlaloc" generate -m "$MODEL" --chat Hello -n 300 --json >"$WORK/g.json" 2>"$WORK/g.err" ||
  { cat "$WORK/g.err"; fail "greedy 300 tokens exited non-zero"; }
[ "$(json_field "$WORK/g.json" "len(j['generated_ids'])")" -ge 1 ] || fail "no greedy tokens"
[ "$(json_field "$WORK/g.json" "max(j['generated_ids'])")" -lt 151669 ] || fail "greedy id past vocab"
echo "ok: greedy 300 tokens"

# 3. Bad values: exit 2 and the flag named; nothing printed on stdout.
check_refused() {  # check_refused NEEDLE ARGS...
  local needle=$1; shift
  set +e
  "$tlaloc" generate -m "$MODEL" "$@" >"$WORK/r.out" 2>"$WORK/r.err"
  local rc=$?
  set -e
  [ "$rc" -eq 2 ] || { cat "$WORK/r.err"; fail "$* exited $rc, expected 2"; }
  grep -q -- "$needle" "$WORK/r.err" || { cat "$WORK/r.err"; fail "$* did not name $needle"; }
  [ ! -s "$WORK/r.out" ] || fail "$* printed on stdout"
}
check_refused --temperature --chat Hi --temperature nan
check_refused --temperature --chat Hi --temp -1
check_refused --top-p --chat Hi --top-p 0
check_refused --top-k --chat Hi --top-k -3
check_refused --max-new-tokens --chat Hi -n 0
check_refused --no-think --prompt Hi --no-think
check_refused --repeat-penalty --chat Hi --repeat-penalty 0
check_refused --min-p --chat Hi --min-p 1.5
check_refused --presence-penalty --chat Hi --presence-penalty nan
check_refused --logit-bias --chat Hi --logit-bias rain
check_refused --logit-bias --chat Hi --logit-bias 5+x
check_refused logit_bias --chat Hi --logit-bias 999999999+1
echo "ok: bad values refused with exit 2"

# 3b. The sampling controls: a +100 bias on " rain" (11174) makes the greedy reply that token,
# in each of the flag's spellings; the penalties and min-p run.
for bias in 11174+100 11174=100; do
  "$tlaloc" generate -m "$MODEL" -p "The rain" --raw -n 3 --temp 0 --logit-bias "$bias" --json \
    >"$WORK/b.json" 2>"$WORK/b.err" || { cat "$WORK/b.err"; fail "--logit-bias $bias exited non-zero"; }
  [ "$(json_field "$WORK/b.json" "j['generated_ids']")" = "[11174, 11174, 11174]" ] ||
    fail "--logit-bias $bias: $(cat "$WORK/b.json")"
done
"$tlaloc" generate -m "$MODEL" -p "The rain" --raw -n 3 --temp 0 --logit-bias 11174-100 --logit-bias 5=100 \
  --json >"$WORK/b.json" 2>"$WORK/b.err" || { cat "$WORK/b.err"; fail "two --logit-bias exited non-zero"; }
[ "$(json_field "$WORK/b.json" "j['generated_ids']")" = "[5, 5, 5]" ] || fail "two --logit-bias: $(cat "$WORK/b.json")"
"$tlaloc" generate -m "$MODEL" --chat Hello -n 12 --temp 0.8 --seed 3 --repeat-penalty 1.3 \
  --presence-penalty 0.5 --frequency-penalty 0.5 --min-p 0.05 --json >"$WORK/p.json" 2>"$WORK/p.err" ||
  { cat "$WORK/p.err"; fail "the penalties exited non-zero"; }
[ "$(json_field "$WORK/p.json" "len(j['generated_ids'])")" -ge 1 ] || fail "no tokens with the penalties"
echo "ok: --logit-bias forces a token; the penalties and --min-p run"

# 3c. --choices N (OpenAI's n): choice i is what one run with seed + i gives (the choices share
# the prompt's KV blocks, decoded together); a bad count is refused by name.
"$tlaloc" generate -m "$MODEL" --chat Hello -n 10 --temp 1 --seed 40 --choices 3 --json \
  >"$WORK/n3.json" 2>"$WORK/n3.err" || { cat "$WORK/n3.err"; fail "--choices 3 exited non-zero"; }
for i in 0 1 2; do
  "$tlaloc" generate -m "$MODEL" --chat Hello -n 10 --temp 1 --seed $((40 + i)) --json \
    >"$WORK/n1-$i.json" 2>/dev/null || fail "seed $((40 + i)) exited non-zero"
done
python3 - "$WORK/n3.json" "$WORK"/n1-{0,1,2}.json <<'PY' || fail "--choices 3 differs from single runs"
import json, sys
many = json.load(open(sys.argv[1]))["choices"]
singles = [json.load(open(f)) for f in sys.argv[2:]]
assert len(many) == 3, many
for i, (c, s) in enumerate(zip(many, singles)):
    assert c["index"] == i and c["seed"] == s["seed"] == 40 + i, (c, s["seed"])
    assert c["generated_ids"] == s["generated_ids"], (i, c["generated_ids"], s["generated_ids"])
    assert c["text"] == s["text"] and c["finish_reason"] == s["finish_reason"], i
assert len({tuple(c["generated_ids"]) for c in many}) > 1, "every choice drew the same reply"
PY
"$tlaloc" generate -m "$MODEL" --chat Hello -n 4 --temp 1 --seed 40 --choices 2 \
  >"$WORK/n2.out" 2>"$WORK/n2.err" || { cat "$WORK/n2.err"; fail "--choices 2 text exited non-zero"; }
grep -q -- "--- choice 1 (seed 41" "$WORK/n2.out" || { cat "$WORK/n2.out"; fail "no choice 1 header"; }
grep -q "2 choices, seeds 40 to 41" "$WORK/n2.err" || { cat "$WORK/n2.err"; fail "no choices summary"; }
check_refused --choices --chat Hi --choices 0
check_refused --choices --chat Hi --choices 129
echo "ok: --choices 3 equals three single runs with seeds 40, 41, 42"

# 4. --stop: the reply ends before the stop text, finish_reason stop. The stop text is taken
# from a free run's reply, so it is known to occur.
"$tlaloc" generate -m "$MODEL" --prompt "The" -n 24 --temp 1 -s 9 --json >"$WORK/free.json" 2>/dev/null
free=$(json_field "$WORK/free.json" "j['text']")
stop=$(json_field "$WORK/free.json" "j['text'][len(j['text'])//2:len(j['text'])//2+3]")
"$tlaloc" generate -m "$MODEL" --prompt "The" -n 24 --temp 1 -s 9 --stop "$stop" --json \
  >"$WORK/stop.json" 2>/dev/null
python3 - "$WORK/free.json" "$WORK/stop.json" "$stop" <<'PY'
import json, sys
free = json.load(open(sys.argv[1]))["text"]
got = json.load(open(sys.argv[2]))
stop = sys.argv[3]
assert got["finish_reason"] == "stop", got["finish_reason"]
assert got["text"] == free[: free.index(stop)], (got["text"], free, stop)
assert stop not in got["text"]
PY
echo "ok: --stop cuts the reply before '$stop'"

# 5. A budget past --ctx-size is capped with a note; the full context says so.
"$tlaloc" generate -m "$MODEL" --prompt "hi there" -n 5000 -c 24 --json >"$WORK/c.json" 2>"$WORK/c.err"
grep -q "capped to" "$WORK/c.err" || { cat "$WORK/c.err"; fail "no cap warning"; }
grep -q "is full" "$WORK/c.err" || { cat "$WORK/c.err"; fail "no context-full note"; }
[ "$(json_field "$WORK/c.json" "j['finish_reason']")" = length ] || fail "finish_reason not length"
total=$(json_field "$WORK/c.json" "len(j['prompt_ids']) + len(j['generated_ids'])")
[ "$total" -le 24 ] || fail "prompt + reply is $total tokens, past --ctx-size 24"
echo "ok: budget capped to the context"

# 5b. A --ctx-size past max_position_embeddings is honoured (RoPE extends past the trained
# length) with a warning naming both, not lowered to it without a word.
short=$WORK/short-context
cp -r "$MODEL" "$short"
python3 - "$short/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["max_position_embeddings"] = 32
json.dump(c, open(sys.argv[1], "w"))
PY
"$tlaloc" generate -m "$short" --prompt "hi there" -n 40 -c 64 --temp 0 --json \
  >"$WORK/long.json" 2>"$WORK/long.err" || { cat "$WORK/long.err"; fail "-c 64 past 32 positions"; }
grep -q "max_position_embeddings" "$WORK/long.err" && grep -q "quality may drop" "$WORK/long.err" ||
  { cat "$WORK/long.err"; fail "-c 64 past max_position_embeddings 32: no warning"; }
python3 - "$WORK/long.json" <<'PY' || fail "-c 64 was not honoured"
import json, sys
j = json.load(open(sys.argv[1]))
total = len(j["prompt_ids"]) + len(j["generated_ids"])
# Greedy on random weights: the end token is as good as never drawn, so the budget runs out.
assert j["finish_reason"] == "length" and len(j["generated_ids"]) == 40, (j["finish_reason"], total)
assert total > 32, total
PY
echo "ok: -c 64 past max_position_embeddings 32 honoured, with a warning"

# 6. Streaming prints the seed it drew when none was given; JSON carries reasoning_content.
"$tlaloc" generate -m "$MODEL" --chat Hi -n 4 --temp 1 >"$WORK/t.out" 2>"$WORK/t.err"
grep -Eq "seed [0-9]+" "$WORK/t.err" || { cat "$WORK/t.err"; fail "random seed not printed"; }
json_field "$WORK/g.json" "'reasoning_content' in j" | grep -q True || fail "no reasoning_content"

# 7. --raw parses control tokens written in the prompt; without it they stay text.
"$tlaloc" generate -m "$MODEL" --raw --prompt "<|im_start|>user" -n 1 --json >"$WORK/raw.json" 2>/dev/null
"$tlaloc" generate -m "$MODEL" --prompt "<|im_start|>user" -n 1 --json >"$WORK/text.json" 2>/dev/null
[ "$(json_field "$WORK/raw.json" "j['prompt_ids'][0]")" = 151644 ] || fail "--raw did not parse <|im_start|>"
[ "$(json_field "$WORK/text.json" "151644 in j['prompt_ids']")" = False ] || fail "plain prompt parsed <|im_start|>"
echo "ok: --raw"

# 8. --system and --no-think reach the chat template.
"$tlaloc" generate -m "$MODEL" --chat Hi --system "Be brief" --no-think -n 1 --json >"$WORK/sys.json" 2>/dev/null
"$tlaloc" tokenize --tokenizer "$MODEL/tokenizer.json" --chat --system "Be brief" --no-think --ids Hi >"$WORK/sys.ids"
python3 - "$WORK/sys.json" "$WORK/sys.ids" <<'PY'
import json, re, sys
got = json.load(open(sys.argv[1]))["prompt_ids"]
want = [int(x) for x in re.findall(r"-?\d+", open(sys.argv[2]).read())]
assert got == want, (got, want)
PY
echo "ok: --system and --no-think render as tokenize --chat does"

# 9. The process keeps its name (/proc/PID/comm, what top and pgrep show) when it re-executes
# itself for OpenBLAS's kernel set: "tlaloc", never "exe". OPENBLAS_CORETYPE=Prescott (kernels
# older than any AVX2 CPU) forces that re-exec here; a generate waiting on stdin is watched.
mkfifo "$WORK/stdin"
exec 3<>"$WORK/stdin"  # a writer that never writes: generate waits for its prompt
OPENBLAS_CORETYPE=Prescott "$tlaloc" generate -m "$MODEL" -n 1 <"$WORK/stdin" >/dev/null 2>&1 &
pid=$!
reexec=no
for _ in $(seq 1 100); do
  if tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -q '^TLALOC_BLAS_REEXEC=1$'; then
    reexec=yes
    break
  fi
  sleep 0.05
done
sleep 0.2  # past the re-exec'd main's first lines, where the name is set
comm=$(cat "/proc/$pid/comm" 2>/dev/null || echo "(gone)")
pgrep -x tlaloc | grep -qx "$pid" && found=yes || found=no
kill "$pid" 2>/dev/null || true
wait "$pid" 2>/dev/null || true
exec 3>&-
[ "$comm" = tlaloc ] ||
  fail "the process shows as '$comm' (re-executed: $reexec), expected 'tlaloc'"
[ "$found" = yes ] || fail "pgrep -x tlaloc does not find the running generate ($pid)"
if grep -qw avx2 /proc/cpuinfo; then
  [ "$reexec" = yes ] || fail "OPENBLAS_CORETYPE=Prescott on an AVX2 CPU: no re-exec seen"
fi
echo "ok: the process shows as '$comm' (re-executed for OpenBLAS: $reexec), pgrep finds it"
echo "PASS"
