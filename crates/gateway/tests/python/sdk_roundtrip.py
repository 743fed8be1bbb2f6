"""Ring 3: the real OpenAI Python SDK against a running toolbridge gateway.

Run by crates/gateway/tests/python_sdk.rs with OPENAI_BASE_URL pointing at the gateway and a
fake upstream scripted to answer (1) a non-streamed completion, then (2) a streamed text answer.

(a) `client.responses.create(...)`: checks `output_text`, `status` and `usage.total_tokens`.
(b) `client.responses.stream(...)`: collects the `response.output_text.delta` deltas and checks
    that `get_final_response()` holds the same text.

Every warning the SDK (or pydantic) raises is recorded and fails the run. On success it prints
one line: `SDK_SUMMARY {json}`, which the Rust test parses and checks against what it scripted.
"""

import json
import sys
import warnings

import openai


def fail(message):
    print(f"FAIL: {message}", file=sys.stderr)
    sys.exit(1)


def check(condition, message):
    if not condition:
        fail(message)


def extra_fields(model):
    """Field names the SDK's model did not declare (kept by pydantic as extras)."""
    extra = getattr(model, "model_extra", None) or {}
    return sorted(extra.keys())


def main():
    client = openai.OpenAI(max_retries=0, timeout=30.0)

    # (a) Non-streamed.
    resp = client.responses.create(
        model="gpt-test",
        input="Say hello",
        instructions="Be brief.",
    )
    check(resp.status == "completed", f"status is {resp.status!r}, not 'completed'")
    check(resp.object == "response", f"object is {resp.object!r}")
    check(resp.id.startswith("resp_"), f"id {resp.id!r} does not start with resp_")
    check(isinstance(resp.output_text, str) and resp.output_text, "empty output_text")
    check(resp.usage is not None, "no usage")
    check(
        resp.usage.total_tokens == resp.usage.input_tokens + resp.usage.output_tokens,
        f"usage does not add up: {resp.usage}",
    )
    check(resp.instructions == "Be brief.", f"instructions came back as {resp.instructions!r}")

    # (b) Streamed.
    deltas = []
    event_types = []
    with client.responses.stream(model="gpt-test", input="Say hello again") as stream:
        for event in stream:
            event_types.append(event.type)
            if event.type == "response.output_text.delta":
                deltas.append(event.delta)
        final = stream.get_final_response()
    streamed_text = "".join(deltas)
    check(deltas, "no response.output_text.delta events")
    check(
        final.output_text == streamed_text,
        f"final text {final.output_text!r} != joined deltas {streamed_text!r}",
    )
    check(final.status == "completed", f"final status is {final.status!r}")
    check(event_types[0] == "response.created", f"first event is {event_types[0]!r}")
    check(event_types[-1] == "response.completed", f"last event is {event_types[-1]!r}")
    terminal = [t for t in event_types if t in ("response.completed", "response.failed", "response.incomplete")]
    check(terminal == ["response.completed"], f"terminal events: {terminal}")

    return {
        "openai_version": openai.__version__,
        "sync": {
            "id": resp.id,
            "status": resp.status,
            "output_text": resp.output_text,
            "total_tokens": resp.usage.total_tokens,
            "extra_fields": extra_fields(resp),
        },
        "stream": {
            "deltas": deltas,
            "final_text": final.output_text,
            "final_status": final.status,
            "total_tokens": final.usage.total_tokens if final.usage else None,
            "event_types": event_types,
            "extra_fields": extra_fields(final),
        },
    }


if __name__ == "__main__":
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        summary = main()
    if caught:
        for w in caught:
            print(f"WARNING: {w.category.__name__}: {w.message}", file=sys.stderr)
        fail(f"{len(caught)} warning(s) raised while talking to the gateway")
    print("SDK_SUMMARY " + json.dumps(summary, sort_keys=True))
