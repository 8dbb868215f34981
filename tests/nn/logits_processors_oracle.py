"""transformers' logits processors as an oracle for Tlaloc's sampling controls.

Reads a JSON file of rows, each {"logits": [V floats], "prompt": [ids], "generated": [ids],
"logit_bias": {"id": bias}, "repetition_penalty", "presence_penalty", "frequency_penalty",
"temperature", "min_p"}, applies them in vLLM's order with transformers' processors where it has
one (SequenceBiasLogitsProcessor for one-token biases, RepetitionPenaltyLogitsProcessor over the
prompt and generated ids, TemperatureLogitsWarper, MinPLogitsWarper) and OpenAI's presence and
frequency penalties over the generated ids as vLLM applies them (transformers has none), in
float32. Prints one JSON object: {"penalized": [[V floats] per row] (after the penalties, before
temperature), "probs": [[V floats] per row] (the final distribution), "transformers": version}.

  third_party_py/bin/python logits_processors_oracle.py ROWS.json
"""

import json
import sys

import torch
import transformers
from transformers.generation.logits_process import (
    MinPLogitsWarper,
    RepetitionPenaltyLogitsProcessor,
    SequenceBiasLogitsProcessor,
    TemperatureLogitsWarper,
)


def process(row):
    scores = torch.tensor([row["logits"]], dtype=torch.float32)
    ids = torch.tensor([row["prompt"] + row["generated"]], dtype=torch.long)
    bias = {(int(k),): float(v) for k, v in row["logit_bias"].items()}
    if bias:
        scores = SequenceBiasLogitsProcessor(sequence_bias=bias)(ids, scores)
    if row["repetition_penalty"] != 1.0:
        scores = RepetitionPenaltyLogitsProcessor(penalty=row["repetition_penalty"])(ids, scores)
    generated = torch.tensor(row["generated"], dtype=torch.long)
    counts = torch.bincount(generated, minlength=scores.shape[-1]).to(torch.float32)
    scores = scores - row["frequency_penalty"] * counts
    scores = scores - row["presence_penalty"] * (counts > 0).to(torch.float32)
    penalized = scores.clone()
    scores = TemperatureLogitsWarper(row["temperature"])(ids, scores)
    if row["min_p"] > 0:
        scores = MinPLogitsWarper(min_p=row["min_p"])(ids, scores)
    probs = torch.softmax(scores, dim=-1)
    return penalized[0].tolist(), probs[0].tolist()


def main(argv):
    with open(argv[1]) as f:
        rows = json.load(f)
    out = {"penalized": [], "probs": [], "transformers": transformers.__version__}
    for row in rows:
        penalized, probs = process(row)
        out["penalized"].append(penalized)
        out["probs"].append(probs)
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main(sys.argv)
