"""The official `openai` Python client against `tlaloc serve` started by serve_api_test.sh: what
OpenAI SDK users trip over. Each CHECK names one behaviour:

  late_error   the server fails the 3rd decode step (TLALOC_TEST_FAIL_DECODE_STEP=3): a
               non-streamed request that was admitted must still surface as the client's typed
               error (InternalServerError, HTTP 500, OpenAI's error object), not as a success.
  refused      fields that would change the answer but are not honoured (best_of, n > 1,
               functions, tool_choice "required", function_call, a response_format schema keyword
               outside the supported subset; tools themselves: serve_tools_client.py) are a
               BadRequestError (400) naming the field; neutral values of them and harmless
               fields (user, store, metadata, stream_options...) are accepted.
  model        an unknown model is a NotFoundError (404, code model_not_found) on both
               endpoints and models.retrieve; the served id is found.
  sampling     the sampling controls (issue 39) through the client's own arguments
               (presence_penalty, frequency_penalty, logit_bias, seed) and extra_body
               (repetition_penalty, min_p): a +100 bias makes a greedy reply that token on both
               endpoints; a seeded sampled request with every control repeats itself; values
               out of range are a BadRequestError (400) naming the field.
  token_ids    a completion prompt given as token ids ([ids] or [[ids]]) is answered as the
               same prompt given as text (greedy); several prompts are a 400 naming "prompt".

Usage: python serve_api_client.py BASE_URL MODEL_ID CHECK...   (BASE_URL ends in /v1)
"""

import os
import sys

import openai

# The server is on loopback: a proxy configured for the machine must not see these requests.
os.environ["NO_PROXY"] = ",".join(filter(None, [os.environ.get("NO_PROXY"), "127.0.0.1"]))
os.environ["no_proxy"] = os.environ["NO_PROXY"]

MESSAGES = [{"role": "user", "content": "Tell a long story"}]


def expect_error(kind, call, status, param=None, code=None):
    """Runs call(); it must raise `kind` with HTTP `status` and the error object's param/code."""
    try:
        got = call()
    except kind as e:
        assert e.status_code == status, (e.status_code, e)
        err = e.body if isinstance(e.body, dict) else {}
        err = err.get("error", err)
        assert err.get("message"), e.body
        if param is not None:
            assert err.get("param") == param, (param, e.body)
        if code is not None:
            assert err.get("code") == code, (code, e.body)
        return err
    raise AssertionError(f"expected {kind.__name__} ({status}), got a success: {got!r}")


def late_error(client, model):
    err = expect_error(
        openai.InternalServerError,
        lambda: client.chat.completions.create(model=model, messages=MESSAGES, max_tokens=8,
                                               temperature=0),
        500)
    assert err.get("type") == "server_error", err
    assert "TLALOC_TEST_FAIL_DECODE_STEP" in err["message"], err
    print("ok: an error after admission is HTTP 500 to the openai client:", err["message"])


def refused(client, model):
    chat = client.chat.completions.create
    comp = client.completions.create
    tool = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
    cases = [
        ("best_of", comp, dict(best_of=2)),
        ("n", chat, dict(n=2, tools=[tool])),
        ("tool_choice", chat, dict(tools=[tool], tool_choice="required")),
        ("functions", chat, dict(extra_body={"functions": [tool["function"]]})),
        ("function_call", chat, dict(extra_body={"function_call": "auto"})),
        ("response_format", chat,
         dict(response_format={"type": "json_schema",
                                "json_schema": {"name": "x",
                                                "schema": {"type": "string", "pattern": "a+"}}})),
    ]
    for param, create, kwargs in cases:
        args = dict(model=model, max_tokens=2, **kwargs)
        if create is chat:
            args["messages"] = MESSAGES
        else:
            args["prompt"] = "The rain"
        err = expect_error(openai.BadRequestError, lambda: create(**args), 400, param=param,
                           code="unsupported_parameter")
        assert param in err["message"] and err["type"] == "invalid_request_error", err
    print(f"ok: {len(cases)} result-changing fields refused with a 400 naming the field")
    # Neutral values and fields that change nothing stay accepted.
    ok = chat(model=model, messages=MESSAGES, max_tokens=2, user="u", store=False,
              metadata={"k": "v"}, n=1, logit_bias={}, tool_choice="none",
              response_format={"type": "text"}, service_tier="auto")
    assert ok.choices[0].message is not None, ok
    ok = comp(model=model, prompt="The rain", max_tokens=2, best_of=1, user="u", n=1)
    assert ok.choices[0].text is not None, ok
    print("ok: harmless fields and neutral values accepted")


def sampling(client, model):
    # " rain" is 11174 in Qwen3's tokenizer (the tiny model's): "The rain" is [785, 11174].
    got = client.completions.create(model=model, prompt="The rain", max_tokens=4, temperature=0,
                                    logit_bias={"11174": 100})
    assert got.choices[0].text == " rain" * 4, got
    got = client.chat.completions.create(model=model, messages=MESSAGES, max_tokens=4,
                                         temperature=0, logit_bias={"11174": 100},
                                         extra_body={"chat_template_kwargs":
                                                     {"enable_thinking": False}})
    assert got.choices[0].message.content.count("rain") == 4, got
    print("ok: logit_bias +100 makes the greedy reply that token (completions and chat)")
    controls = dict(presence_penalty=1.5, frequency_penalty=-0.5, seed=11, temperature=0.9,
                    logit_bias={"785": -100, "11": 2.5},
                    extra_body={"repetition_penalty": 1.3, "min_p": 0.05})
    first = client.completions.create(model=model, prompt="The rain", max_tokens=8, **controls)
    again = client.completions.create(model=model, prompt="The rain", max_tokens=8, **controls)
    assert first.choices[0].text == again.choices[0].text, (first, again)
    assert first.usage.completion_tokens >= 1, first
    chat = client.chat.completions.create(model=model, messages=MESSAGES, max_tokens=8, **controls)
    assert chat.choices[0].message is not None, chat
    print("ok: every control accepted on both endpoints; a seeded request repeats itself")
    bad = [
        ("presence_penalty", dict(presence_penalty=2.5)),
        ("frequency_penalty", dict(frequency_penalty=-3)),
        ("logit_bias", dict(logit_bias={"11174": 101})),
        ("logit_bias", dict(logit_bias={"rain": 1})),
        ("logit_bias", dict(logit_bias={"999999999": 1})),  # past the vocabulary
        ("repetition_penalty", dict(extra_body={"repetition_penalty": 0})),
        ("min_p", dict(extra_body={"min_p": 1.5})),
    ]
    for param, kwargs in bad:
        for create, args in ((client.chat.completions.create, dict(messages=MESSAGES)),
                             (client.completions.create, dict(prompt="The rain"))):
            err = expect_error(openai.BadRequestError,
                               lambda: create(model=model, max_tokens=2, **args, **kwargs), 400,
                               param=param)
            assert param in err["message"], err
    print(f"ok: {len(bad)} out-of-range sampling controls refused with a 400 naming the field")


def model(client, served):
    for create, args in ((client.chat.completions.create, dict(messages=MESSAGES)),
                         (client.completions.create, dict(prompt="The rain"))):
        err = expect_error(openai.NotFoundError,
                           lambda: create(model="gpt-4o", max_tokens=2, **args), 404,
                           param="model", code="model_not_found")
        assert "gpt-4o" in err["message"] and served in err["message"], err
    expect_error(openai.NotFoundError, lambda: client.models.retrieve("gpt-4o"), 404,
                 code="model_not_found")
    got = client.models.retrieve(served)
    assert got.id == served, got
    listed = [m.id for m in client.models.list()]
    assert listed == [served], listed
    print("ok: an unknown model is 404 model_not_found; the served one is found")


def token_ids(client, model):
    # The tiny model's tokenizer is Qwen3's, where "The rain" is [785, 11174] (as the tokenizers
    # package encodes it); the server, tokenizing the text itself, must count 2 prompt tokens.
    text = client.completions.create(model=model, prompt="The rain", max_tokens=6, temperature=0)
    ids = text.usage.prompt_tokens
    assert ids == 2, text.usage
    for prompt in ([785, 11174], [[785, 11174]]):
        got = client.completions.create(model=model, prompt=prompt, max_tokens=6, temperature=0)
        assert got.usage.prompt_tokens == 2, got.usage
        assert got.choices[0].text == text.choices[0].text, (prompt, got, text)
    expect_error(openai.BadRequestError,
                 lambda: client.completions.create(model=model, prompt=[[785], [11174]],
                                                   max_tokens=2),
                 400, param="prompt")
    expect_error(openai.BadRequestError,
                 lambda: client.completions.create(model=model, prompt=[10**8], max_tokens=2),
                 400, param="prompt")
    print("ok: a prompt of token ids is answered as its text; several prompts are refused")


def main():
    base, served, checks = sys.argv[1], sys.argv[2], sys.argv[3:]
    client = openai.OpenAI(base_url=base, api_key="none", timeout=60, max_retries=0)
    for check in checks:
        globals()[check](client, served)


if __name__ == "__main__":
    main()
