"""Ring 3: the real OpenAI Python SDK meets an upstream that keeps failing.

Run by crates/gateway/tests/retries.rs with OPENAI_BASE_URL pointing at the gateway, whose
upstream answers every request with a 503. The gateway retries (its `max_retries`) and then
answers 503 with `x-should-retry: false`; the SDK, left at its default of two retries of its
own, must give up at once. One line `SDK_RETRIES {json}` reports what the SDK saw; the Rust
test counts the attempts that reached the upstream.
"""

import json
import sys

import openai


def main():
    client = openai.OpenAI(max_retries=2, timeout=30)
    outcome = {}
    try:
        client.responses.create(model="gpt-test", input="Hi")
        outcome["error"] = None
    except openai.APIStatusError as e:
        outcome["status"] = e.status_code
        outcome["should_retry"] = e.response.headers.get("x-should-retry")
        body = e.body if isinstance(e.body, dict) else {}
        outcome["code"] = body.get("code") or (body.get("error") or {}).get("code")
    print("SDK_RETRIES " + json.dumps(outcome))
    sys.stdout.flush()


main()
