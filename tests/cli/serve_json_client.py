"""The official `openai` Python client against `tlaloc serve` with response_format (structured
output, issue 39), started by serve_json_test.sh on a tiny random model: whatever such a model
draws, every reply must parse and validate. Each CHECK names one behaviour:

  object     response_format {"type": "json_object"}: 8 sampled replies (temperature 1, seeds
             0..7) finish with "stop" and json.loads gives an object; one streamed reply's deltas
             parse too; an n=2 request's two choices each parse.
  schema     response_format json_schema with 3 schemas (required keys, enums, integers, arrays of
             objects, anyOf with null, $defs/$ref, additionalProperties false): 4 sampled replies
             each finish with "stop" and jsonschema validates every one (100%); /v1/completions
             takes response_format too (extra_body).
  parse      client.chat.completions.parse with a pydantic model (the client turns it into a
             strict json_schema): 4 replies, message.parsed is the model.
  isolation  a greedy unconstrained request gives the same text alone and while a constrained
             sampled request runs beside it in the same batch.
  refused    a schema keyword outside the subset (pattern) is a 400 naming response_format, code
             unsupported_parameter, the keyword in the message.

Usage: python serve_json_client.py BASE_URL MODEL_DIR CHECK...  (BASE_URL ends in /v1)
"""

import json
import os
import sys
import threading
from typing import List, Literal, Optional

# The server is on loopback: a proxy configured for the machine must not see these requests.
os.environ["NO_PROXY"] = ",".join(filter(None, [os.environ.get("NO_PROXY"), "127.0.0.1"]))
os.environ["no_proxy"] = os.environ["NO_PROXY"]

import jsonschema  # noqa: E402
import openai  # noqa: E402
import pydantic  # noqa: E402

ASK = [{"role": "user", "content": "Describe a person as JSON."}]
BUDGET = 160  # reply tokens: the constraint closes the value before it runs out

SCHEMAS = {
    "person": {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "age": {"type": "integer"},
            "role": {"enum": ["admin", "user", "guest"]},
            "tags": {"type": "array", "items": {"type": "string"}},
            "active": {"type": "boolean"},
        },
        "required": ["name", "age", "role"],
        "additionalProperties": False,
    },
    "order": {
        "type": "object",
        "$defs": {
            "item": {
                "type": "object",
                "properties": {"sku": {"type": "string"}, "qty": {"type": "integer"},
                               "price": {"type": "number"}},
                "required": ["sku", "qty"],
                "additionalProperties": False,
            }
        },
        "properties": {
            "items": {"type": "array", "items": {"$ref": "#/$defs/item"}},
            "note": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            "status": {"const": "open"},
        },
        "required": ["items", "note", "status"],
        "additionalProperties": False,
    },
    "point": {
        "type": ["array", "object"],
        "items": {"type": "number"},
        "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
        "required": ["x", "y"],
    },
}


class Address(pydantic.BaseModel):
    city: str
    zip_code: Optional[str]


class Contact(pydantic.BaseModel):
    name: str
    kind: Literal["friend", "work"]
    emails: List[str]
    address: Address


def json_format(name):
    return {"type": "json_schema",
            "json_schema": {"name": name, "schema": SCHEMAS[name], "strict": True}}


def chat(client, model, seed, fmt, **kwargs):
    return client.chat.completions.create(model=model, messages=ASK, temperature=1.0, seed=seed,
                                          max_tokens=BUDGET, response_format=fmt, **kwargs)


def check_object(client, model):
    for seed in range(8):
        r = chat(client, model, seed, {"type": "json_object"})
        text = r.choices[0].message.content
        assert r.choices[0].finish_reason == "stop", (seed, r.choices[0].finish_reason, text)
        value = json.loads(text)
        assert isinstance(value, dict), (seed, text)
        if seed < 2:
            print(f"  json_object: {text}")
    stream = chat(client, model, 100, {"type": "json_object"}, stream=True)
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert isinstance(json.loads(text), dict), text
    print("ok: 8 json_object replies and a streamed one parse as objects (finish_reason stop)")
    # n > 1: each choice follows its own reply through the grammar.
    r = chat(client, model, 200, {"type": "json_object"}, n=2)
    assert len(r.choices) == 2, r
    for c in r.choices:
        assert c.finish_reason == "stop", (c.index, c.finish_reason, c.message.content)
        assert isinstance(json.loads(c.message.content), dict), c.message.content
    print("ok: n=2 constrained choices both parse as objects")


def check_schema(client, model):
    count = 0
    for name, schema in SCHEMAS.items():
        for seed in range(4):
            r = chat(client, model, seed, json_format(name))
            text = r.choices[0].message.content
            assert r.choices[0].finish_reason == "stop", (name, seed, text)
            jsonschema.validate(json.loads(text), schema)
            count += 1
            if seed == 0:
                print(f"  {name}: {text}")
    r = client.completions.create(model=model, prompt="A person:", temperature=1.0, seed=5,
                                  max_tokens=BUDGET,
                                  extra_body={"response_format": json_format("person")})
    assert r.choices[0].finish_reason == "stop", r
    jsonschema.validate(json.loads(r.choices[0].text), SCHEMAS["person"])
    print(f"ok: {count} json_schema chat replies and a completion validate (100%)")


def check_parse(client, model):
    for seed in range(4):
        r = client.chat.completions.parse(model=model, messages=ASK, temperature=1.0, seed=seed,
                                          max_tokens=BUDGET, response_format=Contact)
        parsed = r.choices[0].message.parsed
        assert isinstance(parsed, Contact), (seed, r.choices[0].message.content)
        Contact.model_validate_json(r.choices[0].message.content)
    print("ok: 4 replies of chat.completions.parse come back as the pydantic model")


def check_isolation(client, model):
    def plain():
        return client.chat.completions.create(
            model=model, messages=ASK, temperature=0, max_tokens=24).choices[0].message.content

    alone = plain()
    results = {}

    def constrained():
        results["json"] = chat(client, model, 7, json_format("order"))

    t = threading.Thread(target=constrained)
    t.start()
    beside = plain()
    t.join()
    assert beside == alone, (alone, beside)
    jsonschema.validate(json.loads(results["json"].choices[0].message.content), SCHEMAS["order"])
    print("ok: a greedy reply is the same alone and beside a constrained request")


def check_refused(client, model):
    fmt = {"type": "json_schema",
           "json_schema": {"name": "x", "schema": {"type": "string", "pattern": "a+"}}}
    try:
        chat(client, model, 0, fmt)
    except openai.BadRequestError as e:
        err = e.body if isinstance(e.body, dict) else {}
        err = err.get("error", err)
        assert err.get("param") == "response_format", err
        assert err.get("code") == "unsupported_parameter", err
        assert "'pattern'" in err.get("message", ""), err
        print("ok: an unsupported schema keyword is a 400 naming it:", err["message"])
        return
    raise AssertionError("a schema with 'pattern' was accepted")


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    base_url, model_dir = sys.argv[1], sys.argv[2]
    client = openai.OpenAI(base_url=base_url, api_key="unused", max_retries=0, timeout=600)
    del model_dir  # the served model: "" names it
    model = ""
    checks = {"object": check_object, "schema": check_schema, "parse": check_parse,
              "isolation": check_isolation, "refused": check_refused}
    for name in sys.argv[3:]:
        checks[name](client, model)


if __name__ == "__main__":
    main()
