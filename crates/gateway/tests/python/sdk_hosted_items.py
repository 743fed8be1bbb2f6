"""Ring 3: the real OpenAI Python SDK parses the hosted items of gateway-run tools.

Run by crates/gateway/tests/python_sdk_hosted.rs with OPENAI_BASE_URL pointing at a gateway
that runs the calculator and web search itself. The fake upstream is scripted for:
(a) a non-streamed `responses.create` whose output is an `mcp_call`, a `web_search_call` and a
    message: each must parse as the SDK's own model (McpCall, ResponseFunctionWebSearch, …),
    validated strictly;
(b) the same as a raw stream: every event strictly validated against the SDK's model for its
    type, and the final response's items likewise.
Prints one line: `SDK_SUMMARY {json}`.
"""

import json
import sys
import typing

import openai
import pydantic
from openai.types.responses import Response, ResponseStreamEvent


def fail(message):
    print(f"FAIL: {message}", file=sys.stderr)
    sys.exit(1)


def event_models():
    union = typing.get_args(ResponseStreamEvent)[0]
    models = {}
    for model in typing.get_args(union):
        for literal in typing.get_args(model.model_fields["type"].annotation):
            models[literal] = model
    return models


MODELS = event_models()
REQUEST = {
    "model": "m",
    "input": "What is 6*7, and when was toolbridge released?",
    "tools": [{"type": "web_search"}],
    "store": False,
}


def strict(model, data, what):
    try:
        return model.model_validate(data)
    except pydantic.ValidationError as error:
        fail(f"{what} does not validate as {model.__name__}: {error}")


def item_classes(response):
    return [type(item).__name__ for item in response.output]


def main():
    client = openai.OpenAI(max_retries=0, timeout=30.0)

    whole = client.responses.create(**REQUEST)
    strict(Response, whole.to_dict(), "the whole response")
    whole_classes = item_classes(whole)
    mcp = whole.output[0]
    if mcp.type != "mcp_call" or mcp.server_label != "toolbridge" or "42" not in (mcp.output or ""):
        fail(f"unexpected mcp_call: {mcp}")

    events = client.responses.create(stream=True, **REQUEST)
    types = []
    final = None
    for event in events:
        types.append(event.type)
        model = MODELS.get(event.type)
        if model is None:
            fail(f"the SDK has no model for event type {event.type!r}")
        strict(model, event.to_dict(), f"event {event.type}")
        if event.type in ("response.completed", "response.failed", "response.incomplete"):
            final = event.response
    if final is None:
        fail("no terminal event")
    print("SDK_SUMMARY " + json.dumps({
        "whole_classes": whole_classes,
        "whole_text": whole.output_text,
        "stream_types": types,
        "stream_classes": item_classes(final),
        "stream_status": final.status,
    }))


if __name__ == "__main__":
    main()
