"""The official `openai` Python client against `tlaloc serve`: chat and completions, streamed and
not. Greedy answers must parse, `usage` must add up, the streamed text must equal the whole
answer's, and refused requests must surface as the client's typed errors (AuthenticationError
for a wrong key, BadRequestError naming the parameter or code) with the server's error object.

With n > 1 the choices come back by index, greedy ones equal to the one-choice answer, seeded
ones repeatable and streamed by index.

Without max_tokens (absent or null) a reply runs to the end token or the context, as OpenAI's,
vLLM's and llama-server's do, not to a short fixed budget.

Usage: python serve_openai_client.py BASE_URL API_KEY CONTEXT   (BASE_URL ends in /v1; CONTEXT is
the server's --max-context)
"""

import os
import sys

import openai

# The server is on loopback: a proxy configured for the machine must not see these requests.
os.environ["NO_PROXY"] = ",".join(filter(None, [os.environ.get("NO_PROXY"), "127.0.0.1"]))
os.environ["no_proxy"] = os.environ["NO_PROXY"]


def check_usage(u, what):
    assert u is not None, f"{what}: no usage"
    assert u.prompt_tokens > 0 and u.completion_tokens > 0, f"{what}: usage {u}"
    assert u.total_tokens == u.prompt_tokens + u.completion_tokens, f"{what}: total {u}"


def extra(obj, name):
    """A field the server adds beyond OpenAI's schema (e.g. reasoning_content), or None."""
    return (obj.model_extra or {}).get(name)


def check_unbounded(choice, usage, context, what):
    """No max_tokens: the reply ends at the end token ("stop") or fills the context ("length")."""
    total = usage.prompt_tokens + usage.completion_tokens
    assert choice.finish_reason in ("stop", "length"), (what, choice.finish_reason)
    if choice.finish_reason == "length":
        assert total == context, (f"{what}: stopped for length at {usage.completion_tokens} "
                                  f"tokens, {total} of a {context}-token context", usage)


def check_choices(client, messages, chat):
    """n > 1: greedy choices all equal the one-choice answer; seeded ones repeat; streamed
    chunks carry their choice's index and each choice closes with its own finish."""
    three = client.chat.completions.create(model="tiny", messages=messages, max_tokens=20,
                                           temperature=0, n=3)
    assert [c.index for c in three.choices] == [0, 1, 2], three.choices
    for c in three.choices:
        assert c.message.content == chat.choices[0].message.content, (c, chat.choices[0])
        assert c.finish_reason == chat.choices[0].finish_reason, c
    assert three.usage.prompt_tokens == chat.usage.prompt_tokens, (three.usage, chat.usage)
    assert three.usage.completion_tokens == 3 * chat.usage.completion_tokens, three.usage

    def sampled(**kw):
        return client.completions.create(model="tiny", prompt="The rain", max_tokens=12,
                                         temperature=1, seed=5, **kw)
    first, again = sampled(n=3), sampled(n=3)
    texts = [c.text for c in first.choices]
    assert texts == [c.text for c in again.choices], ("seeded n=3 repeats", texts)
    assert len(set(texts)) > 1, ("seeded choices differ", texts)
    assert texts[0] == sampled().choices[0].text, "choice 0 is the one-choice reply"

    streamed, finishes, usage = ["", ""], {}, None
    for chunk in client.completions.create(model="tiny", prompt="The rain", max_tokens=12,
                                           temperature=1, seed=5, n=2, stream=True,
                                           stream_options={"include_usage": True}):
        if chunk.usage:
            usage = chunk.usage
        for c in chunk.choices:
            streamed[c.index] += c.text
            if c.finish_reason:
                finishes[c.index] = c.finish_reason
    assert streamed == texts[:2], ("streamed choices", streamed, texts[:2])
    assert sorted(finishes) == [0, 1], finishes
    assert usage.prompt_tokens == first.usage.prompt_tokens, (usage, first.usage)
    print("ok: n choices (greedy equal, seeded repeat, streamed by index)")


def main():
    base_url, api_key, context = sys.argv[1], sys.argv[2], int(sys.argv[3])
    client = openai.OpenAI(base_url=base_url, api_key=api_key, timeout=60, max_retries=0)
    messages = [{"role": "user", "content": "Tell me about rain."}]

    chat = client.chat.completions.create(model="tiny", messages=messages, max_tokens=20,
                                          temperature=0)
    assert chat.object == "chat.completion", chat.object
    assert len(chat.choices) == 1, chat.choices
    assert chat.choices[0].finish_reason in ("stop", "length"), chat.choices[0].finish_reason
    assert chat.choices[0].message.role == "assistant", chat.choices[0].message
    check_usage(chat.usage, "chat")
    assert chat.usage.completion_tokens <= 20, chat.usage

    # Greedy, so the streamed pieces must reassemble into exactly the whole answer.
    stream = client.chat.completions.create(model="tiny", messages=messages, max_tokens=20,
                                            temperature=0, stream=True,
                                            stream_options={"include_usage": True})
    content, reasoning, finish, usage, chunks = "", "", None, None, 0
    for chunk in stream:
        chunks += 1
        assert chunk.object == "chat.completion.chunk", chunk.object
        if chunk.usage:
            usage = chunk.usage
        if not chunk.choices:
            continue
        c = chunk.choices[0]
        content += c.delta.content or ""
        reasoning += extra(c.delta, "reasoning_content") or ""
        if c.finish_reason:
            finish = c.finish_reason
    whole = chat.choices[0].message
    assert content == (whole.content or ""), ("streamed content", content, whole.content)
    assert reasoning == (extra(whole, "reasoning_content") or ""), ("streamed reasoning",
                                                                    reasoning, whole)
    assert finish == chat.choices[0].finish_reason, (finish, chat.choices[0].finish_reason)
    check_usage(usage, "streamed chat")
    assert usage == chat.usage, (usage, chat.usage)
    assert chunks >= 3, f"only {chunks} chunks"

    comp = client.completions.create(model="tiny", prompt="The rain", max_tokens=12,
                                     temperature=0, logprobs=2)
    assert comp.object == "text_completion", comp.object
    check_usage(comp.usage, "completion")
    lp = comp.choices[0].logprobs
    assert len(lp.tokens) == comp.usage.completion_tokens, (lp.tokens, comp.usage)
    assert all(x <= 0 for x in lp.token_logprobs), lp.token_logprobs
    text = ""
    for chunk in client.completions.create(model="tiny", prompt="The rain", max_tokens=12,
                                           temperature=0, stream=True):
        text += chunk.choices[0].text if chunk.choices else ""
    assert text == comp.choices[0].text, ("streamed completion", text, comp.choices[0].text)

    check_choices(client, messages, chat)

    # No max_tokens, then an explicit null: both run to the end token or the context.
    free = client.completions.create(model="tiny", prompt="The rain", temperature=0)
    check_unbounded(free.choices[0], free.usage, context, "completion without max_tokens")
    free_chat = client.chat.completions.create(model="tiny", messages=messages, temperature=0,
                                               max_tokens=None)
    check_unbounded(free_chat.choices[0], free_chat.usage, context, "chat with max_tokens null")

    models = client.models.list()
    assert len(models.data) == 1 and models.data[0].id, models.data

    # Refusals: the client's typed error, its status, and the server's error object in it.
    wrong = openai.OpenAI(base_url=base_url, api_key="wrong", timeout=60, max_retries=0)
    cases = [
        (wrong.chat.completions.create, dict(model="tiny", messages=messages),
         openai.AuthenticationError, 401, "code", "invalid_api_key"),
        (client.chat.completions.create, dict(model="tiny", messages=messages, n=9),
         openai.BadRequestError, 400, "param", "n"),
        (client.chat.completions.create, dict(model="tiny", messages=messages,
                                              temperature="hot"),
         openai.BadRequestError, 400, "param", "temperature"),
        (client.chat.completions.create, dict(model="tiny", messages=[]),
         openai.BadRequestError, 400, "param", "messages"),
        (client.completions.create, dict(model="tiny", prompt="x", echo=True),
         openai.BadRequestError, 400, "param", "echo"),
        (client.completions.create, dict(model="tiny", prompt=" ".join(["rain"] * 700)),
         openai.BadRequestError, 400, "code", "context_length_exceeded"),
        (client.completions.create, dict(model="tiny", prompt=" ".join(["rain"] * 700)),
         openai.BadRequestError, 400, "param", "prompt"),
    ]
    for call, args, error_type, status, field, value in cases:
        what = f"{call.__qualname__}({', '.join(k for k in args if k != 'model')})"
        try:
            call(**args)
        except error_type as err:
            assert err.status_code == status, (what, err.status_code)
            assert getattr(err, field) == value, (what, field, getattr(err, field), err.body)
            assert isinstance(err.body, dict) and err.body.get("message"), (what, err.body)
            assert err.type, (what, err.body)
        except openai.APIError as err:
            raise AssertionError(f"{what}: {type(err).__name__}, expected "
                                 f"{error_type.__name__}: {err}") from err
        else:
            raise AssertionError(f"{what}: a refused request was answered")

    print(f"ok: openai client {openai.__version__}: chat {chat.usage.completion_tokens} tokens, "
          f"{chunks} stream chunks reassemble it, completion {comp.usage.completion_tokens} "
          f"tokens, without max_tokens {free.usage.completion_tokens} and "
          f"{free_chat.usage.completion_tokens} ({free.choices[0].finish_reason}, "
          f"{free_chat.choices[0].finish_reason}), {len(cases)} refusals as "
          f"AuthenticationError/BadRequestError")


if __name__ == "__main__":
    main()
