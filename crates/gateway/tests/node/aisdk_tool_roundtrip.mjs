// Ring 3: the Vercel AI SDK's OpenAI Responses provider runs a tool round trip through toolbridge.
//
// Run by crates/gateway/tests/aisdk.rs with:
//   AISDK_DIR         the folder whose node_modules holds `ai`, `@ai-sdk/openai` and `zod`
//                     (scripts/test installs them in .tools/aisdk);
//   TOOLBRIDGE_URL    the gateway's base URL, `http://ADDR/v1`.
//
// `generateText` with one `weather` tool, `stopWhen: stepCountIs(3)` and
// `providerOptions.openai.store: true`: step 1 gets reasoning and a tool call, the SDK runs the tool,
// and step 2 sends the earlier output back. With storage on, this SDK version sends the reasoning
// item as `{"type":"item_reference","id":…}`, which the gateway must resolve from its store (its
// DeepSeek-like upstream refuses a tool-call turn without the reasoning).
//
// The provider is given a `fetch` that records every request body and answer status it sends to
// the gateway, so the report shows the item references. One line on stdout:
// `AISDK_REPORT {json}`; anything thrown is printed and exits 1.

import { createRequire } from "node:module";
import { join } from "node:path";

const dir = process.env.AISDK_DIR;
const baseURL = process.env.TOOLBRIDGE_URL;
if (!dir || !baseURL) {
  console.error("FAIL: AISDK_DIR and TOOLBRIDGE_URL must be set");
  process.exit(1);
}
// The packages live outside this file's tree: load them from AISDK_DIR (their CommonJS builds;
// ESM imports would resolve next to this file only).
const require = createRequire(join(dir, "package.json"));
const { generateText, stepCountIs, tool } = require("ai");
const { createOpenAI } = require("@ai-sdk/openai");
const { z } = require("zod");

const sent = [];
const recordingFetch = async (url, init) => {
  const body = typeof init?.body === "string" ? JSON.parse(init.body) : null;
  const response = await fetch(url, init);
  sent.push({ url: String(url), method: init?.method ?? "GET", status: response.status, body });
  return response;
};

const toolCalls = [];
const openai = createOpenAI({ baseURL, apiKey: "dummy", fetch: recordingFetch });

const result = await generateText({
  model: openai.responses("deepseek-reasoner"),
  prompt: "What is the weather in Paris?",
  tools: {
    weather: tool({
      description: "The current weather in a city.",
      inputSchema: z.object({ city: z.string().describe("The city name.") }),
      execute: async ({ city }) => {
        toolCalls.push(city);
        return { city, forecast: "sunny", celsius: 21 };
      },
    }),
  },
  stopWhen: stepCountIs(3),
  providerOptions: { openai: { store: true } },
  maxRetries: 0,
});

const report = {
  text: result.text,
  finishReason: result.finishReason,
  steps: result.steps.map((step) => ({
    finishReason: step.finishReason,
    text: step.text,
    reasoningText: step.reasoningText ?? null,
    toolCalls: step.toolCalls.map((c) => ({ id: c.toolCallId, name: c.toolName, input: c.input })),
    responseId: step.response?.id ?? null,
    // The raw response's output items, as the gateway sent them.
    output: (step.response?.body?.output ?? []).map((item) => ({
      type: item.type,
      id: item.id ?? null,
      summary: item.summary ?? null,
      hasContent: Array.isArray(item.content) && item.content.length > 0,
    })),
  })),
  toolCalls,
  sent: sent.map((s) => ({
    url: s.url,
    method: s.method,
    status: s.status,
    store: s.body?.store ?? null,
    previous_response_id: s.body?.previous_response_id ?? null,
    input: s.body?.input ?? null,
    tool_schemas: (s.body?.tools ?? []).map((t) => t.parameters ?? null),
  })),
};
console.log("AISDK_REPORT " + JSON.stringify(report));
