#!/usr/bin/env bash
# `tlaloc bench` reports prefill's multiply-adds and decode's weight reads beside the machine's
# probed peak and read bandwidth: the FLOPs per prompt follow the counting rule from config.json
# (recomputed here), each share is its rate over the probed median, each median lies inside its
# printed spread, the tiny preset on MoE too, and --no-probes (or its old name --no-bandwidth)
# leaves the machine figures out, the warm-up request is reported apart (--no-warmup: none),
# --kv-dtype bf16 runs an f32 model with a bf16 cache (others refused);
# `tlaloc probe` gives them alone. No speed is asserted: these are the instrument's checks.
# Usage: bench_probes_test.sh TLALOC SOURCE_DIR
set -euo pipefail
tlaloc=$1
source "$2/tests/cli_test_lib.sh"
make_tiny_model "$tlaloc" "$2" 3
fail() { echo "FAIL: $*"; exit 1; }
"$tlaloc" init-model --preset tiny-moe --seed 3 --tokenizer "$2/data/qwen3/tokenizer.json" \
  "$WORK/moe" >/dev/null 2>&1 || fail "init-model tiny-moe"

for model in "$MODEL" "$WORK/moe"; do
  for dtype in f32 bf16; do
    "$tlaloc" bench -m "$model" --dtype "$dtype" --prompt-tokens 24 --new-tokens 3 -t 2 --json \
      >"$WORK/b.json" 2>"$WORK/b.err" || { cat "$WORK/b.err"; fail "bench $model $dtype"; }
    python3 - "$WORK/b.json" "$model/config.json" "$dtype" <<'PY' || fail "bench $model $dtype"
import json, sys
j = json.load(open(sys.argv[1]))
c = json.load(open(sys.argv[2]))
dtype = sys.argv[3]
T, h, L = j["prefill_tokens"], c["hidden_size"], c["num_hidden_layers"]
heads, kv = c["num_attention_heads"], c["num_key_value_heads"]
d = c.get("head_dim", h // heads)
moe = "num_experts" in c
inter = c["moe_intermediate_size"] if moe else c["intermediate_size"]
experts = c.get("num_experts_per_tok", 1) if moe else 1
per_layer = h * heads * d * 2 + h * kv * d * 2 + 3 * h * inter * experts
if moe:
    per_layer += h * c["num_experts"]  # the router
head = c["vocab_size"] * h
want = 2 * per_layer * L * T + 2 * head + 4 * L * heads * d * T * (T + 1) / 2
assert abs(j["prefill_flops"] - want) <= 1e-9 * want, (j["prefill_flops"], want)
assert j["dtype"] == dtype, j["dtype"]
for key, low_high in (("machine_read_bytes_per_s", "machine_read_low_high"),
                      ("machine_peak_flops_per_s", "machine_peak_low_high")):
    lo, hi = j[low_high]
    assert 0 < lo <= j[key] <= hi, (key, lo, j[key], hi)
share = j["prefill_flops_per_s"] / j["machine_peak_flops_per_s"]
assert abs(j["prefill_peak_share"] - share) <= 1e-9 * share, (j["prefill_peak_share"], share)
share = j["decode_weight_read_bytes_per_s"] / j["machine_read_bytes_per_s"]
assert abs(j["decode_bandwidth_share"] - share) <= 1e-9 * share
assert j["machine_read_passes"] >= 3 and j["machine_peak_unit"], j
PY
  done
done
echo "ok: FLOPs counted by the rule, shares over the probed medians (dense and MoE, f32 and bf16)"

"$tlaloc" bench -m "$MODEL" --prompt-tokens 8 --new-tokens 2 -t 2 >"$WORK/t.out" 2>&1 ||
  { cat "$WORK/t.out"; fail "bench text"; }
grep -Eq 'GFLOP/s, [0-9]+% of the [0-9.]+ GFLOP/s peak of .* \(spread [0-9]+%\)' "$WORK/t.out" ||
  { cat "$WORK/t.out"; fail "no prefill share line"; }
grep -Eq '% of the [0-9.]+ GB/s this machine reads \(median of [0-9]+ passes, spread' "$WORK/t.out" ||
  { cat "$WORK/t.out"; fail "no decode share line"; }
for flag in --no-probes --no-bandwidth; do
  "$tlaloc" bench -m "$MODEL" --prompt-tokens 8 --new-tokens 2 -t 2 --json "$flag" >"$WORK/n.json"
  python3 -c "import json,sys; j=json.load(open(sys.argv[1])); assert 'machine_peak_flops_per_s' not in j and 'prefill_flops' in j" "$WORK/n.json" ||
    fail "$flag still probed"
done
echo "ok: text lines name the shares and spreads; --no-probes and --no-bandwidth skip the probes"
# Timed after an untimed warm-up request by default (as llama-bench times), whose prefill is
# reported as the first request's; --no-warmup times the first request itself.
python3 - "$WORK/n.json" <<'PY' || fail "the warm-up's figures"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["warmup"] is True and j["first_prefill_tokens_per_s"] > 0, j
assert j["prefill_tokens"] == 8 and j["decode_tokens"] == 1, j
PY
grep -Eq '^warm-up +8-token prompt in [0-9.]+ s' "$WORK/t.out" || { cat "$WORK/t.out"; fail "no warm-up line"; }
"$tlaloc" bench -m "$MODEL" --prompt-tokens 8 --new-tokens 2 -t 2 --json --no-probes --no-warmup \
  >"$WORK/c.json" || fail "--no-warmup"
python3 -c "import json,sys; j=json.load(open(sys.argv[1])); assert j['warmup'] is False and 'first_prefill_tokens_per_s' not in j and j['prefill_tokens'] == 8, j" "$WORK/c.json" ||
  fail "--no-warmup still warmed up"
echo "ok: a warm-up request first, reported apart; --no-warmup times the first request"
# --kv-dtype: an f32 model keeps a bf16 cache (named in the JSON); a bf16 model cannot widen
# its cache, and an unknown type is a usage error naming the flag.
"$tlaloc" bench -m "$MODEL" --dtype f32 --kv-dtype bf16 --prompt-tokens 8 --new-tokens 2 -t 2 \
  --json --no-probes >"$WORK/k.json" || fail "--kv-dtype bf16"
python3 -c "import json,sys; j=json.load(open(sys.argv[1])); assert j['dtype'] == 'f32' and j['kv_dtype'] == 'bf16' and j['decode_tokens'] == 1, j" "$WORK/k.json" ||
  fail "--kv-dtype bf16 not reported"
for bad in "--dtype bf16 --kv-dtype f32" "--kv-dtype f8"; do
  set +e
  # shellcheck disable=SC2086
  "$tlaloc" bench -m "$MODEL" $bad --prompt-tokens 8 --new-tokens 2 -t 2 --no-probes \
    >/dev/null 2>"$WORK/k.err"
  rc=$?
  set -e
  [ "$rc" -eq 2 ] && grep -q -- "--kv-dtype" "$WORK/k.err" ||
    { cat "$WORK/k.err"; fail "bench $bad exited $rc, expected 2 naming --kv-dtype"; }
done
echo "ok: --kv-dtype bf16 for f32, refused for bf16 and unknown types"
# `tlaloc probe`: the same figures alone, for scripts timing a peer (finetune_vs_torch.sh).
"$tlaloc" probe -t 2 --json >"$WORK/p.json" || fail "probe"
python3 - "$WORK/p.json" <<'PY' || fail "probe's figures"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["threads"] == 2, j
figures = [j["read_bytes_per_s"]] + [j["peak_flops_per_s"][d] for d in ("f32", "bf16", "int8")]
for f in figures:
    assert 0 < f["low"] <= f["median"] <= f["high"] and f["passes"] >= 3 and f["what"], f
PY
"$tlaloc" probe -t 2 | grep -Eq '^peak bf16 +[0-9.]+ GFLOP/s' || fail "probe's text"
set +e
"$tlaloc" probe -t -3 >/dev/null 2>"$WORK/p.err"
rc=$?
set -e
[ "$rc" -eq 2 ] || { cat "$WORK/p.err"; fail "probe -t -3 exited $rc, expected 2"; }
echo "ok: tlaloc probe"
echo PASS
