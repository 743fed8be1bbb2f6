"""Ring 3: the OpenAI Agents SDK (Python) runs an agent with a function tool through toolbridge.

Run by crates/gateway/tests/agents_sdk.rs with TOOLBRIDGE_URL (the gateway's `http://ADDR/v1`)
and MODEL (the route to ask for). The agent uses the Responses API model
(`OpenAIResponsesModel`) on a client pointed at the gateway, with one `weather` tool; it is run
whole (`Runner.run`) and streamed (`Runner.run_streamed`), each a two-turn tool loop the SDK
drives itself. One line on stdout: `AGENTS_REPORT {json}`; anything raised exits non-zero.
"""

import asyncio
import json
import os

from agents import Agent, OpenAIResponsesModel, Runner, function_tool, set_tracing_disabled
from openai import AsyncOpenAI

calls = []


@function_tool
def weather(city: str) -> str:
    """The weather in a city."""
    calls.append(city)
    return json.dumps({"city": city, "forecast": "sunny"})


async def main() -> None:
    set_tracing_disabled(True)
    client = AsyncOpenAI(base_url=os.environ["TOOLBRIDGE_URL"], api_key="unused", max_retries=0)
    agent = Agent(
        name="weather agent",
        instructions="Answer weather questions with the weather tool.",
        tools=[weather],
        model=OpenAIResponsesModel(model=os.environ["MODEL"], openai_client=client),
    )
    whole = await Runner.run(agent, "What is the weather in Paris?")
    streamed = Runner.run_streamed(agent, "What is the weather in Paris?")
    events = []
    async for event in streamed.stream_events():
        if event.type == "raw_response_event":
            events.append(event.data.type)
        elif event.type == "run_item_stream_event":
            events.append(f"item:{event.name}")
    report = {
        "whole": {"final": whole.final_output, "items": [i.type for i in whole.new_items]},
        "streamed": {"final": streamed.final_output, "items": [i.type for i in streamed.new_items]},
        "events": events,
        "calls": calls,
    }
    print("AGENTS_REPORT " + json.dumps(report))


asyncio.run(main())
