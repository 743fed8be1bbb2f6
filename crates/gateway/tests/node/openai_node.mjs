// Ring 3: the official openai-node SDK against toolbridge, for one model (one route).
//
// Run by crates/gateway/tests/openai_node.rs with:
//   OPENAI_NODE_DIR   the folder whose node_modules holds `openai` (scripts/test installs it in
//                     .tools/openai-node);
//   TOOLBRIDGE_URL    the gateway's base URL, `http://ADDR/v1`;
//   MODEL             the model to ask for (the test routes it to one provider).
//
// Three steps, each as a user of the SDK writes them:
//   1. `responses.create` (whole) with a `weather` function tool: the answer is a function call;
//   2. the function-call round trip: the call's output sent back with the earlier output items
//      (`store: false`, the stateless path), answered with text;
//   3. the same two turns through `responses.stream()`, whose helper accumulates every event into
//      a snapshot (and throws on an event it cannot place, such as a reasoning delta with no
//      content part before it), then `finalResponse()`.
// One line on stdout: `OPENAI_NODE_REPORT {json}`; anything thrown is printed and exits 1.

import { createRequire } from "node:module";
import { join } from "node:path";

const dir = process.env.OPENAI_NODE_DIR;
const baseURL = process.env.TOOLBRIDGE_URL;
const model = process.env.MODEL;
if (!dir || !baseURL || !model) {
  console.error("FAIL: OPENAI_NODE_DIR, TOOLBRIDGE_URL and MODEL must be set");
  process.exit(1);
}
const require = createRequire(join(dir, "package.json"));
const OpenAI = require("openai").default ?? require("openai");

const client = new OpenAI({ apiKey: "unused", baseURL, maxRetries: 0 });
const tools = [
  {
    type: "function",
    name: "weather",
    description: "The weather in a city",
    strict: false,
    parameters: {
      type: "object",
      properties: { city: { type: "string" } },
      required: ["city"],
    },
  },
];
const question = [{ role: "user", content: "What is the weather in Paris?" }];

function weather(call) {
  const { city } = JSON.parse(call.arguments);
  return JSON.stringify({ city, forecast: "sunny" });
}

/// The second turn's input: the question, every output item of the first turn, the call's output.
function followUp(first) {
  const call = first.output.find((i) => i.type === "function_call");
  if (!call) throw new Error(`no function_call in ${JSON.stringify(first.output)}`);
  return [
    ...question,
    ...first.output,
    { type: "function_call_output", call_id: call.call_id, output: weather(call) },
  ];
}

function summary(response) {
  return {
    status: response.status,
    kinds: response.output.map((i) => i.type),
    reasoning: response.output
      .filter((i) => i.type === "reasoning")
      .map((i) => (i.content ?? []).map((c) => c.text).join("")),
    call: response.output.find((i) => i.type === "function_call")?.arguments ?? null,
    text: response.output_text,
    usage: response.usage,
  };
}

async function streamed(input) {
  const stream = client.responses.stream({ model, input, tools, store: false });
  const seen = [];
  for await (const event of stream) seen.push(event.type);
  const response = await stream.finalResponse();
  return { response, seen };
}

try {
  const first = await client.responses.create({ model, input: question, tools, store: false });
  const second = await client.responses.create({
    model,
    input: followUp(first),
    tools,
    store: false,
  });
  const s1 = await streamed(question);
  const s2 = await streamed(followUp(s1.response));
  const report = {
    whole: [summary(first), summary(second)],
    streamed: [summary(s1.response), summary(s2.response)],
    events: [s1.seen, s2.seen],
  };
  console.log(`OPENAI_NODE_REPORT ${JSON.stringify(report)}`);
} catch (e) {
  console.error(`FAIL: ${e?.stack ?? e}`);
  process.exit(1);
}
