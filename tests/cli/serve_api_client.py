"""The official `openai` Python client against `tlaloc serve` started by serve_api_test.sh: what
OpenAI SDK users trip over. Each CHECK names one behaviour:

  late_error   the server fails the 3rd decode step (TLALOC_TEST_FAIL_DECODE_STEP=3): a
               non-streamed request that was admitted must still surface as the client's typed
               error (InternalServerError, HTTP 500, OpenAI's error object), not as a success.

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


def main():
    base, model, checks = sys.argv[1], sys.argv[2], sys.argv[3:]
    client = openai.OpenAI(base_url=base, api_key="none", timeout=60, max_retries=0)
    for check in checks:
        globals()[check](client, model)


if __name__ == "__main__":
    main()
