// Ring 3: the official openai-node SDK asks for an image through toolbridge (issue 22).
//
// Run by crates/gateway/tests/image_generation_sdks.rs with OPENAI_NODE_DIR, TOOLBRIDGE_URL,
// MODEL (one route) and PNG_B64 (the fake Images API's image): `responses.create` with the hosted
// `image_generation` tool (whole), then `responses.stream()` with `partial_images`, whose helper
// accumulates every event into a snapshot (and throws on one it cannot place), then
// `responses.retrieve`. One line on stdout: `OPENAI_NODE_IMAGES {json}`.

import { createRequire } from "node:module";
import { join } from "node:path";

const dir = process.env.OPENAI_NODE_DIR;
const baseURL = process.env.TOOLBRIDGE_URL;
const model = process.env.MODEL;
const png = Buffer.from(process.env.PNG_B64 ?? "", "base64");
const require = createRequire(join(dir, "package.json"));
const OpenAI = require("openai").default ?? require("openai");
const client = new OpenAI({ baseURL, apiKey: "dummy", maxRetries: 0 });
const tools = [{ type: "image_generation", quality: "low", partial_images: 2 }];
const input = "Draw a kitten with GPT-Image";

function imageOf(response) {
  const items = response.output.filter((i) => i.type === "image_generation_call");
  if (items.length !== 1) throw new Error(`image items: ${JSON.stringify(response.output)}`);
  const item = items[0];
  if (item.status !== "completed") throw new Error(`status ${item.status}`);
  if (!Buffer.from(item.result, "base64").equals(png)) throw new Error("result is not the PNG");
  return item;
}

try {
  const whole = await client.responses.create({ model, input, tools });
  imageOf(whole);
  const stream = client.responses.stream({ model, input, tools });
  const kinds = [];
  const partials = [];
  for await (const event of stream) {
    kinds.push(event.type);
    if (event.type === "response.image_generation_call.partial_image") {
      partials.push(Buffer.from(event.partial_image_b64, "base64").subarray(0, png.length).equals(png));
    }
  }
  const final = await stream.finalResponse();
  const item = imageOf(final);
  const stored = await client.responses.retrieve(final.id);
  imageOf(stored);
  const report = {
    whole: { status: whole.status, text: whole.output_text },
    streamed: { status: final.status, text: final.output_text, partials, kinds, item_id: item.id },
  };
  console.log("OPENAI_NODE_IMAGES " + JSON.stringify(report));
} catch (e) {
  console.error("FAIL:", e?.stack ?? e);
  process.exit(1);
}
