"""Renders Jinja chat templates with jinja2 the way transformers' apply_chat_template does.

The oracle of tests/tokenizer/jinja_test.cc: an ImmutableSandboxedEnvironment with
trim_blocks=True, lstrip_blocks=True and the loopcontrols extension, transformers' tojson filter
(json.dumps with ensure_ascii=False), and the globals raise_exception and strftime_now (the
environment of transformers/utils/chat_template_utils.py, without its generation-tracking tag).

Usage: jinja_render.py CASES.json
CASES.json is a list of {"template": str, "context": object}; prints a JSON list with, per case,
{"text": rendered} or {"error": message}.
"""

import json
import sys
from datetime import datetime

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def strftime_now(fmt):
    return datetime.now().strftime(fmt)


def make_environment():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        cases = json.load(f)
    env = make_environment()
    results = []
    for case in cases:
        try:
            text = env.from_string(case["template"]).render(**case["context"])
            results.append({"text": text})
        except Exception as e:  # every failure is a result the C++ side compares against
            results.append({"error": f"{type(e).__name__}: {e}"})
    json.dump(results, sys.stdout, ensure_ascii=False)


if __name__ == "__main__":
    main()
