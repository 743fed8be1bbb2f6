"""Ring 3: the real OpenAI Python SDK reads a session's prompt-cache usage through toolbridge.

Run by crates/gateway/tests/python_sdk_cache.rs with OPENAI_BASE_URL pointing at a gateway in
front of a fake provider that caches by its documented rules. Three turns of one conversation
(long instructions, the same `prompt_cache_key`, each turn resending the history with the
previous answer's items), alternately whole and streamed; for each it reads
`usage.input_tokens`, `usage.input_tokens_details.cached_tokens` and `cache_write_tokens` the way
an application would (the field is the SDK's own where it declares it, else pydantic's extra).

Prints one line: `SDK_SUMMARY {json}`, a list of the three usages, which the Rust test compares
with what the fake cache served.
"""

import json
import sys
import warnings

import openai


def fail(message):
    print(f"FAIL: {message}", file=sys.stderr)
    sys.exit(1)


def details_field(details, name):
    value = getattr(details, name, None)
    if value is None:
        value = (getattr(details, "model_extra", None) or {}).get(name)
    return value


def main():
    client = openai.OpenAI(max_retries=0, timeout=30.0)
    instructions = "You are a careful assistant; answer in one short sentence.\n" * 150
    history = []
    usages = []
    for turn, question in enumerate(["What is 2+2?", "And 3+3?", "And 4+4?"]):
        history.append({"role": "user", "content": question})
        args = dict(
            model="m",
            instructions=instructions,
            input=history,
            prompt_cache_key="sdk-thread",
            store=False,
        )
        if turn % 2 == 0:
            resp = client.responses.create(**args)
        else:
            with client.responses.stream(**args) as stream:
                for _ in stream:
                    pass
                resp = stream.get_final_response()
        if resp.status != "completed":
            fail(f"turn {turn}: status {resp.status!r}")
        usage = resp.usage
        details = usage.input_tokens_details
        usages.append(
            {
                "input_tokens": usage.input_tokens,
                "cached_tokens": details_field(details, "cached_tokens"),
                "cache_write_tokens": details_field(details, "cache_write_tokens"),
            }
        )
        for item in resp.output:
            history.append(item.model_dump(exclude_none=True))
    print("SDK_SUMMARY " + json.dumps(usages))


if __name__ == "__main__":
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        main()
