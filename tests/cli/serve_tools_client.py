"""The official `openai` Python client against `tlaloc serve` with tools (issue 39), started by
serve_tools_test.sh. A random tiny model never calls a tool by itself, so the server of the
`calls` and `malformed` checks runs with TLALOC_TEST_REPLY (the generated content of chat replies
with tools is replaced by that text; streamed, it goes out in 4-byte deltas that cut the
markers). Each CHECK names one behaviour:

  calls      REPLY (text, then two <tool_call> blocks) comes back as message.tool_calls (ids
             call_..., JSON-string arguments), content the text before them, finish_reason
             "tool_calls"; streamed, the accumulated deltas give the same calls and text; the
             calls sent back as an assistant turn with tool results are accepted.
  malformed  MALFORMED (a block whose JSON is broken) stays text: no tool_calls, finish "stop".
  prompt     the prompt the server renders with tools, an assistant tool_calls turn (OpenAI
             form: arguments a JSON string) and a tool result has the token count of
             transformers' apply_chat_template(messages, tools=...) for the same messages
             (usage.prompt_tokens); without tools it is shorter; tool_choice "required" and
             malformed tools are a 400 naming the field.

Usage: python serve_tools_client.py reply|malformed-reply      (prints the text to set)
       python serve_tools_client.py BASE_URL MODEL_DIR CHECK...  (BASE_URL ends in /v1)
"""

import json
import os
import sys

# The server is on loopback: a proxy configured for the machine must not see these requests.
os.environ["NO_PROXY"] = ",".join(filter(None, [os.environ.get("NO_PROXY"), "127.0.0.1"]))
os.environ["no_proxy"] = os.environ["NO_PROXY"]

REPLY = ('Let me look that up.\n<tool_call>\n{"name": "get_weather", "arguments": '
         '{"city": "Paris", "unit": "celsius"}}\n</tool_call>\n<tool_call>\n{"name": "get_time", '
         '"arguments": {"zone": "Europe/Paris"}}\n</tool_call>')
EXPECTED = [("get_weather", {"city": "Paris", "unit": "celsius"}),
            ("get_time", {"zone": "Europe/Paris"})]
MALFORMED = 'Sure.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": }\n</tool_call>'

TOOLS = [
    {"type": "function",
     "function": {"name": "get_weather", "description": "The weather in a city.",
                  "parameters": {"type": "object",
                                 "properties": {"city": {"type": "string"},
                                                "unit": {"type": "string",
                                                         "enum": ["celsius", "fahrenheit"]}},
                                 "required": ["city"]}}},
    {"type": "function",
     "function": {"name": "get_time", "description": "The time in a zone.",
                  "parameters": {"type": "object",
                                 "properties": {"zone": {"type": "string"}}}}},
]
ASK = [{"role": "user", "content": "What's the weather and time in Paris?"}]


def check_calls(calls, where):
    got = [(c["name"], json.loads(c["arguments"])) for c in calls]
    assert got == EXPECTED, f"{where}: {got}"
    ids = [c["id"] for c in calls]
    assert all(i.startswith("call_") for i in ids) and len(set(ids)) == len(ids), ids


def calls(client, model_dir):
    r = client.chat.completions.create(model="", messages=ASK, tools=TOOLS, max_tokens=4)
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls", choice
    assert choice.message.content == "Let me look that up.", choice.message
    got = [{"id": c.id, "name": c.function.name, "arguments": c.function.arguments}
           for c in choice.message.tool_calls]
    assert all(c.type == "function" for c in choice.message.tool_calls)
    check_calls(got, "non-streamed")
    print("ok: non-streamed reply parsed into", len(got), "tool_calls, finish tool_calls")

    stream = client.chat.completions.create(model="", messages=ASK, tools=TOOLS, max_tokens=4,
                                            stream=True)
    content, acc, finish = "", {}, None
    for chunk in stream:
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        content += delta.content or ""
        for tc in delta.tool_calls or []:
            call = acc.setdefault(tc.index, {"id": "", "name": "", "arguments": ""})
            call["id"] = tc.id or call["id"]
            if tc.function:
                call["name"] += tc.function.name or ""
                call["arguments"] += tc.function.arguments or ""
        finish = chunk.choices[0].finish_reason or finish
    assert sorted(acc) == [0, 1], acc
    check_calls([acc[i] for i in sorted(acc)], "streamed")
    assert content == "Let me look that up.", repr(content)
    assert finish == "tool_calls", finish
    print("ok: streamed deltas accumulate into the same calls and text")

    # The calls go back as the assistant turn (the SDK's own objects) with the tools' results.
    followup = ASK + [choice.message.model_dump(exclude_none=True)] + [
        {"role": "tool", "tool_call_id": c.id, "content": "sunny" if i == 0 else "12:00"}
        for i, c in enumerate(choice.message.tool_calls)]
    r = client.chat.completions.create(model="", messages=followup, tools=TOOLS,
                                       tool_choice="none", max_tokens=2)
    assert r.choices[0].message.tool_calls is None and r.choices[0].finish_reason != "tool_calls"
    print("ok: the calls and their results sent back are accepted (tool_choice none: text)")


def malformed(client, model_dir):
    for stream in (False, True):
        if not stream:
            r = client.chat.completions.create(model="", messages=ASK, tools=TOOLS,
                                               max_tokens=2)
            content, calls_, finish = (r.choices[0].message.content,
                                       r.choices[0].message.tool_calls, r.choices[0].finish_reason)
        else:
            content, calls_, finish = "", None, None
            for chunk in client.chat.completions.create(model="", messages=ASK, tools=TOOLS,
                                                        max_tokens=2, stream=True):
                if chunk.choices:
                    content += chunk.choices[0].delta.content or ""
                    calls_ = calls_ or chunk.choices[0].delta.tool_calls
                    finish = chunk.choices[0].finish_reason or finish
        assert content == MALFORMED and not calls_ and finish == "stop", (content, finish)
    print("ok: a malformed block stays text (streamed and not), finish", finish)


def prompt(client, model_dir):
    import openai
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(model_dir)
    # content "": Qwen3's template, under transformers, fails on a null or absent content (the
    # server takes both as "", as vLLM does).
    convo = ASK + [
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "call_a", "type": "function",
             "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
        {"role": "tool", "tool_call_id": "call_a", "content": "sunny, 21 C"},
    ]

    def expected(tools):
        text = tok.apply_chat_template(convo, tools=tools, add_generation_prompt=True,
                                       tokenize=False)
        return len(tok(text, add_special_tokens=False)["input_ids"]), text

    for tools, choice in ((TOOLS, "auto"), (TOOLS, "none"), (None, None)):
        args = dict(tools=tools, tool_choice=choice) if tools else {}
        r = client.chat.completions.create(model="", messages=convo, max_tokens=1, **args)
        want, text = expected(tools)
        assert r.usage.prompt_tokens == want, (r.usage.prompt_tokens, want, text)
        if tools:
            assert "<tools>" in text and '{"city": "Paris"}' in text, text
    assert expected(TOOLS)[0] > expected(None)[0] + 50
    print(f"ok: prompt tokens with tools = transformers' ({expected(TOOLS)[0]}; "
          f"{expected(None)[0]} without)")

    for kwargs, param in ((dict(tools=TOOLS, tool_choice="required"), "tool_choice"),
                          (dict(tools=TOOLS, tool_choice={"type": "function",
                                                          "function": {"name": "get_time"}}),
                           "tool_choice"),
                          (dict(tools=[{"type": "function", "function": {"name": ""}}]),
                           "tools[0].function.name")):
        try:
            client.chat.completions.create(model="", messages=ASK, max_tokens=1, **kwargs)
        except openai.BadRequestError as e:
            err = e.body if isinstance(e.body, dict) else {}
            err = err.get("error", err)
            assert e.status_code == 400 and err.get("param") == param, (param, e.body)
        else:
            raise AssertionError(f"{kwargs} was accepted")
    print("ok: tool_choice required / named and malformed tools are 400s naming the field")


def main():
    if sys.argv[1:] == ["reply"]:
        sys.stdout.write(REPLY)
        return
    if sys.argv[1:] == ["malformed-reply"]:
        sys.stdout.write(MALFORMED)
        return
    import openai
    base, model_dir, checks = sys.argv[1], sys.argv[2], sys.argv[3:]
    client = openai.OpenAI(base_url=base, api_key="unused", timeout=60, max_retries=0)
    for check in checks:
        globals()[check](client, model_dir)


if __name__ == "__main__":
    main()
