"""Ring 3: the real OpenAI Python SDK drives the gateway's stored-conversation API.

Run by crates/gateway/tests/python_sdk_conversation.rs with OPENAI_BASE_URL pointing at a running
toolbridge whose fake upstream answers by the text of the last user message, so the order of the
calls below does not matter to it:

1. Three turns chained with `previous_response_id`: `responses.create`, then `responses.stream`
   (`get_final_response()`), then `responses.create` again, whose input is two messages.
2. `responses.retrieve(id)` of the first and third turns equals what `create` returned; of the
   streamed turn, it equals the response of its `response.completed` event.
3. `responses.input_items.list(id)` of the third turn, in the default (newest first) order and
   with `order="asc"`, and one item per page with `limit=1` to follow the SDK's cursor. Each raw
   item is also validated strictly against the SDK's `ResponseItem` models (the SDK builds them
   without validation); the problems are listed, not raised: the Rust side decides.
4. `responses.delete(id)` of the third turn; `retrieve` and a second `delete` then raise
   `NotFoundError`, while the second turn is still there.
5. `background=True`: `create` answers `queued`, `retrieve` is polled until `completed`.
6. `background=True` on a slow upstream: `responses.cancel(id)` answers `cancelled`, and the run's
   later end does not undo it.

Every warning the SDK (or pydantic) raises fails the run. On success it prints one line:
`SDK_CONVERSATION {json}`, which the Rust test parses and asserts.
"""

import json
import sys
import time
import warnings

import openai
import pydantic
from openai.types.responses import ResponseInputMessageItem, ResponseItem, ResponseOutputMessage

MODEL = "gpt-test"
POLL_LIMIT_S = 20.0


def fail(message):
    print(f"FAIL: {message}", file=sys.stderr)
    sys.exit(1)


def check(condition, message):
    if not condition:
        fail(message)


def without_parsed(value):
    """`value` without the `parsed` keys the stream helper adds to its (parsed) responses."""
    if isinstance(value, dict):
        return {k: without_parsed(v) for k, v in value.items() if k != "parsed"}
    if isinstance(value, list):
        return [without_parsed(v) for v in value]
    return value


def dump(model):
    return without_parsed(model.model_dump(mode="json"))


def strict_item_problems(raw):
    """What the SDK's model for one raw input item would reject (strict validation): the
    `ResponseItem` branch the item's `type` and `role` select, else the whole union."""
    if raw.get("type", "message") == "message":
        model = ResponseOutputMessage if raw.get("role") == "assistant" else ResponseInputMessageItem
        adapter = pydantic.TypeAdapter(model)
    else:
        adapter = pydantic.TypeAdapter(ResponseItem)
    try:
        adapter.validate_python(raw)
    except pydantic.ValidationError as e:
        return [f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in e.errors()][:12]
    return []


def item_text(item):
    """The text of a message item, whether its content is a string or a list of parts."""
    content = item.get("content")
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content or [])


def poll(client, response_id, done):
    deadline = time.monotonic() + POLL_LIMIT_S
    seen = []
    while True:
        got = client.responses.retrieve(response_id)
        if not seen or seen[-1] != got.status:
            seen.append(got.status)
        if done(got):
            return got, seen
        if time.monotonic() > deadline:
            fail(f"response {response_id} stayed {got.status!r}; statuses seen: {seen}")
        time.sleep(0.05)


def conversation(client):
    first = client.responses.create(
        model=MODEL, instructions="Be brief.", input="Capital of France?"
    )
    check(first.status == "completed", f"turn 1 status {first.status!r}")

    deltas = []
    completed_event = None
    with client.responses.stream(
        model=MODEL, input="Its population?", previous_response_id=first.id
    ) as stream:
        for event in stream:
            if event.type == "response.output_text.delta":
                deltas.append(event.delta)
            elif event.type == "response.completed":
                completed_event = event.response
        second = stream.get_final_response()
    check(completed_event is not None, "no response.completed event")
    check(second.output_text == "".join(deltas), "final text differs from the deltas")

    third = client.responses.create(
        model=MODEL,
        previous_response_id=second.id,
        input=[
            {"role": "user", "content": "Thanks."},
            {"role": "user", "content": "Which country again?"},
        ],
    )
    check(third.status == "completed", f"turn 3 status {third.status!r}")

    retrieved = {
        "first": client.responses.retrieve(first.id),
        "second": client.responses.retrieve(second.id),
        "third": client.responses.retrieve(third.id),
    }
    same = {
        "first": dump(retrieved["first"]) == dump(first),
        "second": dump(retrieved["second"]) == dump(completed_event),
        "third": dump(retrieved["third"]) == dump(third),
    }
    for name, equal in same.items():
        if not equal:
            created = {"first": first, "second": completed_event, "third": third}[name]
            print(
                f"DIFF {name}: created {json.dumps(dump(created))}\n"
                f"   retrieved {json.dumps(dump(retrieved[name]))}",
                file=sys.stderr,
            )

    newest_first = client.responses.input_items.list(third.id)
    oldest_first = client.responses.input_items.list(third.id, order="asc")
    # The raw JSON: the SDK's own serialising of a malformed item would warn.
    raw_page = client.responses.input_items.with_raw_response.list(third.id, order="asc")
    raw_items = raw_page.http_response.json()["data"]
    # One item per page: the SDK's auto-pagination follows `last_id` as `after`.
    paged = [item.id for item in client.responses.input_items.list(third.id, order="asc", limit=1)]

    client.responses.delete(third.id)
    try:
        client.responses.retrieve(third.id)
        retrieve_after_delete = "found"
    except openai.NotFoundError as e:
        retrieve_after_delete = f"NotFoundError {e.status_code}"
    try:
        client.responses.delete(third.id)
        delete_again = "deleted"
    except openai.NotFoundError as e:
        delete_again = f"NotFoundError {e.status_code}"
    second_kept = client.responses.retrieve(second.id).id == second.id

    return {
        "ids": [first.id, second.id, third.id],
        "texts": [first.output_text, second.output_text, third.output_text],
        "previous": [first.previous_response_id, second.previous_response_id, third.previous_response_id],
        "deltas": deltas,
        "retrieved_equals_created": same,
        "input_items": {
            "desc_ids": [item.id for item in newest_first.data],
            "asc_ids": [item.id for item in oldest_first.data],
            "asc_texts": [item_text(item) for item in raw_items],
            "asc_roles": [item.get("role") for item in raw_items],
            "asc_raw": raw_items,
            "paged_ids": paged,
            "first_id": oldest_first.first_id,
            "last_id": oldest_first.last_id,
            "has_more": oldest_first.has_more,
            "strict_problems": {item.get("id"): strict_item_problems(item) for item in raw_items},
        },
        "retrieve_after_delete": retrieve_after_delete,
        "delete_again": delete_again,
        "second_kept_after_delete": second_kept,
    }


def background(client):
    queued = client.responses.create(model=MODEL, input="Work in the background.", background=True)
    done, statuses = poll(client, queued.id, lambda r: r.status not in ("queued", "in_progress"))
    return {
        "id": queued.id,
        "initial_status": queued.status,
        "background": queued.background,
        "final_status": done.status,
        "statuses_seen": statuses,
        "output_text": done.output_text,
        "total_tokens": done.usage.total_tokens if done.usage else None,
    }


def cancelled(client):
    queued = client.responses.create(model=MODEL, input="Slow work.", background=True)
    # Let the run reach the upstream, whose answer is delayed.
    running, _ = poll(client, queued.id, lambda r: r.status != "queued")
    cancel = client.responses.cancel(queued.id)
    # Past the upstream's delay: the run's end must not undo the cancel.
    time.sleep(2.0)
    after = client.responses.retrieve(queued.id)
    try:
        client.responses.cancel(queued.id)
        cancel_again = "ok"
    except openai.APIStatusError as e:
        cancel_again = f"{type(e).__name__} {e.status_code}"
    return {
        "id": queued.id,
        "status_before_cancel": running.status,
        "cancel_status": cancel.status,
        "status_after_wait": after.status,
        "output_after_wait": after.output_text,
        "cancel_again": cancel_again,
    }


def main():
    client = openai.OpenAI(max_retries=0, timeout=30.0)
    return {
        "openai_version": openai.__version__,
        "conversation": conversation(client),
        "background": background(client),
        "cancelled": cancelled(client),
    }


if __name__ == "__main__":
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        report = main()
    if caught:
        for w in caught:
            print(f"WARNING: {w.category.__name__}: {w.message}", file=sys.stderr)
        fail(f"{len(caught)} warning(s) raised while talking to the gateway")
    print("SDK_CONVERSATION " + json.dumps(report, sort_keys=True))
