"""Checks the Jinja chat template of a checkpoint (tokenizer_config.json, or chat_template.jinja)
for tests/cli/training_export_test.sh.

The template is rendered two ways, both of which must give the expected text of each case:
  - transformers: AutoTokenizer.from_pretrained(CHECKPOINT).apply_chat_template(tokenize=False);
  - plain jinja2 with transformers' conventions (a sandboxed environment with trim_blocks,
    lstrip_blocks and loopcontrols, the raise_exception global and transformers' tojson filter),
    so a template that only works through some transformers extra is caught too.
The cases and expected texts are those of tests/tokenizer/chat_test.cc, which checks Tlaloc's
rendering of Qwen3's template (ChatTemplate, tokenizer/chat.h) against the same strings.

With --tlaloc, Tlaloc's rendering of the checkpoint's template is compared too, through `tlaloc tokenize --chat` (a
system message or none, one user turn, thinking on or off): the ids it prints must be
transformers' ids of the template's text, and decoded back (`tlaloc tokenize --decode`) they
must be that text byte for byte.

    chat_template_cases.py CHECKPOINT_DIR [--tlaloc TLALOC]

Prints one line a case; exits 1 when any case fails.
"""

import argparse
import json
import os
import subprocess
import sys

import jinja2
import jinja2.ext
import jinja2.sandbox
from transformers import AutoTokenizer

SYSTEM = {"role": "system", "content": "Be brief."}
HI = {"role": "user", "content": "Hi!"}
HEAD = "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n"

# (name, messages, add_generation_prompt, enable_thinking or None for absent, expected text)
CASES = [
    ("system and user", [SYSTEM, HI], True, None, HEAD + "<|im_start|>assistant\n"),
    ("enable_thinking=false", [SYSTEM, HI], True, False,
     HEAD + "<|im_start|>assistant\n<think>\n\n</think>\n\n"),
    ("enable_thinking=true", [SYSTEM, HI], True, True, HEAD + "<|im_start|>assistant\n"),
    ("no generation prompt", [{"role": "user", "content": "x"}], False, None,
     "<|im_start|>user\nx<|im_end|>\n"),
    ("earlier turns drop their thinking",
     [{"role": "user", "content": "q1"},
      {"role": "assistant", "content": "<think>\nplan\n</think>\n\nanswer one"},
      {"role": "user", "content": "q2"}], True, None,
     "<|im_start|>user\nq1<|im_end|>\n<|im_start|>assistant\nanswer one<|im_end|>\n"
     "<|im_start|>user\nq2<|im_end|>\n<|im_start|>assistant\n"),
    ("final turn keeps a think block",
     [{"role": "user", "content": "q"}, {"role": "assistant", "content": "plain answer"}],
     False, None,
     "<|im_start|>user\nq<|im_end|>\n"
     "<|im_start|>assistant\n<think>\n\n</think>\n\nplain answer<|im_end|>\n"),
    ("reasoning_content",
     [{"role": "user", "content": "q"},
      {"role": "assistant", "content": "plain answer", "reasoning_content": "\nsteps\n"}],
     False, None,
     "<|im_start|>user\nq<|im_end|>\n"
     "<|im_start|>assistant\n<think>\nsteps\n</think>\n\nplain answer<|im_end|>\n"),
    ("later system message and tool results",
     [{"role": "user", "content": "u"}, {"role": "system", "content": "s2"},
      {"role": "tool", "content": "r1"}, {"role": "tool", "content": "r2"}], False, None,
     "<|im_start|>user\nu<|im_end|>\n<|im_start|>system\ns2<|im_end|>\n<|im_start|>user\n"
     "<tool_response>\nr1\n</tool_response>\n<tool_response>\nr2\n</tool_response><|im_end|>\n"),
]


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    # transformers' tojson: unlike jinja2's own, it keeps non-ASCII text and does not escape HTML.
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def jinja_template(checkpoint):
    """The checkpoint's template compiled the way transformers compiles chat templates."""
    jinja_file = os.path.join(checkpoint, "chat_template.jinja")
    if os.path.exists(jinja_file):
        with open(jinja_file, encoding="utf-8") as f:
            source = f.read()
    else:
        with open(os.path.join(checkpoint, "tokenizer_config.json"), encoding="utf-8") as f:
            source = json.load(f)["chat_template"]
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    return env.from_string(source)


def render_both(tokenizer, template, messages, add_generation_prompt, enable_thinking):
    """The text from transformers and from plain jinja2."""
    extra = {} if enable_thinking is None else {"enable_thinking": enable_thinking}
    by_transformers = tokenizer.apply_chat_template(
        messages, tokenize=False, add_generation_prompt=add_generation_prompt, **extra)
    by_jinja = template.render(messages=messages, add_generation_prompt=add_generation_prompt,
                               eos_token=tokenizer.eos_token, pad_token=tokenizer.pad_token,
                               **extra)
    return by_transformers, by_jinja


def tlaloc_chat(tlaloc, checkpoint, system, user, thinking):
    """Tlaloc's rendering of one user turn: (ids, the text they decode to)."""
    command = [tlaloc, "tokenize", "--tokenizer", checkpoint, "--chat", "--ids"]
    if system:
        command += ["--system", system]
    if not thinking:
        command.append("--no-think")
    ids = subprocess.run(command + [user], check=True, capture_output=True, text=True).stdout
    decoded = subprocess.run([tlaloc, "tokenize", "--tokenizer", checkpoint, "--decode", ids],
                             check=True, capture_output=True).stdout.decode("utf-8")
    if not decoded.endswith("\n"):
        raise RuntimeError(f"tlaloc tokenize --decode printed no final newline: {decoded!r}")
    return [int(i) for i in ids.split()], decoded[:-1]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint")
    parser.add_argument("--tlaloc", help="the tlaloc program, to compare its renderer too")
    args = parser.parse_args()
    tokenizer = AutoTokenizer.from_pretrained(args.checkpoint)
    template = jinja_template(args.checkpoint)

    failed = 0
    for name, messages, prompt, thinking, want in CASES:
        by_transformers, by_jinja = render_both(tokenizer, template, messages, prompt, thinking)
        if by_transformers == want and by_jinja == want:
            print(f"ok: {name}")
        else:
            print(f"FAIL: {name}\n  transformers {by_transformers!r}\n  jinja2       {by_jinja!r}"
                  f"\n  want         {want!r}")
            failed += 1

    if args.tlaloc:
        user = "Hi, who are you?"
        for thinking in (True, False):
            for system in ("", "Be brief."):
                messages = ([{"role": "system", "content": system}] if system else []) + [
                    {"role": "user", "content": user}]
                # thinking on is enable_thinking absent, as `tlaloc tokenize --chat` has it.
                by_transformers, by_jinja = render_both(tokenizer, template, messages, True,
                                                        None if thinking else False)
                want_ids = tokenizer.encode(by_transformers, add_special_tokens=False)
                ids, text = tlaloc_chat(args.tlaloc, args.checkpoint, system, user, thinking)
                where = f"tokenize --chat, system {system!r}, thinking {thinking}"
                if text == by_transformers == by_jinja and ids == want_ids:
                    print(f"ok: {where}: the same text and {len(ids)} ids")
                else:
                    print(f"FAIL: {where}\n  tlaloc       {text!r}\n  transformers "
                          f"{by_transformers!r}\n  jinja2       {by_jinja!r}\n  tlaloc ids       "
                          f"{ids}\n  transformers ids {want_ids}")
                    failed += 1
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
