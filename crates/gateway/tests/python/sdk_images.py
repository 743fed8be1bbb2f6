"""Ring 3: the OpenAI Python SDK asks for an image through toolbridge (issue 22).

Run by crates/gateway/tests/image_generation_sdks.rs with OPENAI_BASE_URL, OPENAI_API_KEY, MODEL
(one route) and PNG_B64 (the fake Images API's image). For the model: `responses.create` with the
hosted `image_generation` tool (whole), then the same streamed with `partial_images`, reading the
SDK's typed events; then `responses.retrieve` of the streamed response. One line on stdout:
`SDK_IMAGES {json}`; a failed check raises.
"""

import base64
import json
import os

from openai import OpenAI

client = OpenAI()
model = os.environ["MODEL"]
png = base64.b64decode(os.environ["PNG_B64"])
tools = [{"type": "image_generation", "quality": "low", "partial_images": 2}]
prompt = "Draw a kitten with GPT-Image"


def image_of(response):
    items = [i for i in response.output if i.type == "image_generation_call"]
    assert len(items) == 1, [i.type for i in response.output]
    item = items[0]
    assert item.status == "completed", item
    assert base64.b64decode(item.result) == png, "the result is the fake's PNG"
    return item


whole = client.responses.create(model=model, input=prompt, tools=tools)
item = image_of(whole)
report = {
    "whole": {"id": whole.id, "status": whole.status, "text": whole.output_text,
              "revised_prompt": item.revised_prompt},
}

partials = []
kinds = []
final = None
with client.responses.create(model=model, input=prompt, tools=tools, stream=True) as stream:
    for event in stream:
        kinds.append(event.type)
        if event.type == "response.image_generation_call.partial_image":
            partials.append(base64.b64decode(event.partial_image_b64)[: len(png)] == png)
        if event.type == "response.completed":
            final = event.response
assert final is not None, kinds
streamed = image_of(final)
stored = client.responses.retrieve(final.id)
assert base64.b64decode(image_of(stored).result) == png
report["streamed"] = {"id": final.id, "status": final.status, "text": final.output_text,
                      "partials": partials, "kinds": kinds, "item_id": streamed.id}
report["retrieved"] = stored.id
print("SDK_IMAGES " + json.dumps(report))
