"""Ring 3: the real OpenAI Python SDK consumes every recorded stream scenario.

Run by crates/gateway/tests/python_sdk_streams.rs. Standard input is a JSON list of scenarios,
`{"name", "base_url", "request"}`, each served by its own in-process gateway whose fake upstream
replays the fixture `tests/fixtures/streams/NAME.sse` to every request. Each scenario runs twice:

- `stream`: `client.responses.stream(...)`, the SDK's accumulating helper (it checks that item
  ids, output indexes and lifecycle ids stay consistent, and raises otherwise), then
  `get_final_response()`, which exists only after `response.completed`.
- `raw`: `client.responses.create(stream=True, ...)`, iterating the raw events; each event is
  also validated strictly against the SDK's pydantic model for its `type` (the SDK itself builds
  events without validation), and every missing or mistyped field is listed in `invalid` (the
  Rust side decides which are known gaps).

Nothing here fails fast: each mode of each scenario reports whether the SDK parsed every event
without error, the event types, the terminal event's response (status, error code, incomplete
reason, output item types, text, total tokens) and what `get_final_response()` returned or
raised. Every warning the SDK (or pydantic) raises is recorded too. The whole report is one line
on stdout: `SDK_STREAMS {json}`; the Rust test asserts it.
"""

import json
import sys
import traceback
import typing
import warnings

import openai
import pydantic
from openai.types.responses import ResponseStreamEvent

TERMINAL = ("response.completed", "response.failed", "response.incomplete")


def event_models():
    """The SDK's event model for each event `type`."""
    union = typing.get_args(ResponseStreamEvent)[0]
    models = {}
    for model in typing.get_args(union):
        for literal in typing.get_args(model.model_fields["type"].annotation):
            models[literal] = model
    return models


MODELS = event_models()


def short(error):
    text = f"{type(error).__name__}: {error}"
    return text if len(text) <= 800 else text[:800] + "…"


def describe_response(response):
    """What a client acts on in a response object (an SDK model)."""
    if response is None:
        return None
    output = list(getattr(response, "output", None) or [])
    usage = getattr(response, "usage", None)
    error = getattr(response, "error", None)
    incomplete = getattr(response, "incomplete_details", None)
    return {
        "status": getattr(response, "status", None),
        "output_types": [getattr(item, "type", None) for item in output],
        "output_text": response.output_text if hasattr(response, "output_text") else None,
        "total_tokens": usage.total_tokens if usage is not None else None,
        "error_code": getattr(error, "code", None) if error is not None else None,
        "incomplete_reason": getattr(incomplete, "reason", None) if incomplete is not None else None,
        "call_ids": [item.call_id for item in output if hasattr(item, "call_id")],
    }


def strict_check(event):
    """Validates one raw event against its SDK model; returns the problems found, each
    `{"event", "loc", "type", "msg"}`."""
    model = MODELS.get(event.type)
    if model is None:
        return [{"event": event.type, "loc": "type", "type": "unknown_event_type",
                 "msg": f"the SDK has no model for event type {event.type!r}"}]
    try:
        model.model_validate(event.to_dict())
    except pydantic.ValidationError as error:
        return [
            {"event": event.type, "loc": ".".join(str(part) for part in e["loc"]),
             "type": e["type"], "msg": e["msg"]}
            for e in error.errors()
        ]
    return []


def run_stream(client, request):
    report = {"ok": True, "error": None, "event_types": [], "terminal": None, "final": None,
              "final_error": None}
    deltas = []
    try:
        with client.responses.stream(**request) as stream:
            last = None
            for event in stream:
                report["event_types"].append(event.type)
                if event.type == "response.output_text.delta":
                    deltas.append(event.delta)
                last = event
            if last is not None and last.type in TERMINAL:
                report["terminal"] = describe_response(last.response)
            try:
                final = stream.get_final_response()
                report["final"] = describe_response(final)
                if final.output_text != "".join(deltas):
                    report["ok"] = False
                    report["error"] = (
                        f"final text {final.output_text!r} != joined deltas {''.join(deltas)!r}"
                    )
            except Exception as error:  # reported: expected for failed and incomplete streams
                report["final_error"] = short(error)
    except Exception as error:
        report["ok"] = False
        report["error"] = short(error) + "\n" + traceback.format_exc(limit=4)
    return report


def run_raw(client, request):
    report = {"ok": True, "error": None, "event_types": [], "terminal": None, "invalid": []}
    try:
        events = client.responses.create(stream=True, **request)
        last = None
        for event in events:
            report["event_types"].append(event.type)
            report["invalid"].extend(strict_check(event))
            last = event
        if last is not None and last.type in TERMINAL:
            report["terminal"] = describe_response(last.response)
    except Exception as error:
        report["ok"] = False
        report["error"] = short(error) + "\n" + traceback.format_exc(limit=4)
    return report


def run(scenario):
    client = openai.OpenAI(
        base_url=scenario["base_url"], api_key="dummy", max_retries=0, timeout=30.0
    )
    request = {k: v for k, v in scenario["request"].items() if k != "stream"}
    result = {}
    for mode, runner in (("stream", run_stream), ("raw", run_raw)):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            report = runner(client, request)
        report["warnings"] = [f"{w.category.__name__}: {w.message}" for w in caught]
        result[mode] = report
    return result


def main():
    scenarios = json.load(sys.stdin)
    report = {"openai_version": openai.__version__, "scenarios": {}}
    for scenario in scenarios:
        report["scenarios"][scenario["name"]] = run(scenario)
    print("SDK_STREAMS " + json.dumps(report, sort_keys=True, ensure_ascii=False))


if __name__ == "__main__":
    main()
