"""Checks through the official openai client that `tlaloc serve` drops the oldest turns of a
conversation that does not fit its context (docs/SERVING.md): the answer is a 200 with the
header X-Tlaloc-Dropped-Turns and a prompt that fits, a conversation that fits gets no header,
and a last user message that alone does not fit is still a 400 context_length_exceeded.

Usage: serve_context_client.py BASE_URL CONTEXT   (BASE_URL ends in /v1; CONTEXT: --max-context)
"""

import sys

import openai


def conversation(turns, filler):
    """A system message, `turns` user/assistant pairs padded with `filler`, and a last question."""
    messages = [{"role": "system", "content": "You are terse."}]
    for i in range(turns):
        messages.append({"role": "user", "content": f"question {i} {filler}"})
        messages.append({"role": "assistant", "content": f"answer {i} {filler}"})
    messages.append({"role": "user", "content": "last question"})
    return messages


def main():
    base_url, context = sys.argv[1], int(sys.argv[2])
    client = openai.OpenAI(base_url=base_url, api_key="unused", timeout=120, max_retries=0)

    def ask(messages):
        return client.chat.completions.with_raw_response.create(
            model="tiny", messages=messages, max_tokens=2, temperature=0)

    # Fits: answered as it is, no header.
    raw = ask(conversation(0, ""))
    small = raw.parse()
    assert raw.headers.get("x-tlaloc-dropped-turns") is None, dict(raw.headers)
    assert small.usage.prompt_tokens < context, small.usage
    print(f"ok: a conversation that fits ({small.usage.prompt_tokens} tokens) keeps every turn")

    # Six padded pairs cannot fit: the oldest go, the header says how many, the prompt fits.
    raw = ask(conversation(6, "word " * 8))
    dropped = raw.headers.get("x-tlaloc-dropped-turns")
    reply = raw.parse()
    assert dropped is not None and 1 <= int(dropped) <= 6, dict(raw.headers)
    assert reply.usage.prompt_tokens < context, reply.usage
    assert reply.choices[0].finish_reason in ("stop", "length"), reply
    print(f"ok: {dropped} oldest turns dropped, prompt of {reply.usage.prompt_tokens} tokens "
          f"in a context of {context}")

    # Streamed answers carry the header too (it goes out before the first event).
    raw = client.chat.completions.with_raw_response.create(
        model="tiny", messages=conversation(6, "word " * 8), max_tokens=2, temperature=0,
        stream=True)
    assert raw.headers.get("x-tlaloc-dropped-turns") == dropped, dict(raw.headers)
    chunks = list(raw.parse())
    assert chunks and chunks[-1].choices[0].finish_reason in ("stop", "length"), chunks[-1]
    print(f"ok: the streamed answer says {dropped} dropped turns too")

    # The last user message alone does not fit: still refused.
    too_long = [{"role": "user", "content": "word " * (2 * context)}]
    try:
        ask(too_long)
    except openai.BadRequestError as e:
        assert e.status_code == 400
        assert e.code == "context_length_exceeded", e.body
        print("ok: a last user message that alone does not fit is a 400 context_length_exceeded")
    else:
        raise AssertionError("a prompt longer than the context was answered")


if __name__ == "__main__":
    main()
