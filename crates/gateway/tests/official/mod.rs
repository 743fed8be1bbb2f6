//! What the official-client tests (openai-node, the Agents SDK) share: one `toolbridge serve`
//! with four routes — a reasoning Chat preset (DeepSeek, which refuses a tool-call turn whose
//! reasoning is not replayed), a plain Chat preset, Anthropic and Gemini — all in front of one
//! fake upstream that answers in the dialect of the path it was called on: a `weather` call with
//! reasoning first, then, once the call's result is in the conversation, text.

#![allow(dead_code)] // each test file uses its own part

use std::path::Path;
use std::sync::Arc;

use serde_json::{Value, json};
use toolbridge_testkit::dialects::{Answer, Call, End, Usage, Wire};
use toolbridge_testkit::tempdir::TempDir;
use toolbridge_testkit::{FakeUpstream, GatewayProcess, Recorded, Reply};

pub const REASONING: &str = "The user wants the weather in Paris; call the weather tool.";
pub const FINAL_TEXT: &str = "It is sunny in Paris.";
pub const REFUSAL: &str =
    "The `reasoning_content` in the thinking mode must be passed back to the API.";

/// The models a client asks for, one per route: (model, what it exercises).
pub const MODELS: &[(&str, &str)] = &[
    ("reasoning", "deepseek preset (Chat, reasoning_content)"),
    ("plain", "generic preset (Chat, no reasoning)"),
    ("claude", "Anthropic Messages"),
    ("gemini", "Gemini generateContent"),
];

pub struct Gateway {
    pub upstream: FakeUpstream,
    pub process: GatewayProcess,
    _dir: TempDir,
}

pub async fn start() -> Gateway {
    let upstream = FakeUpstream::start().await;
    upstream.set_gate(Arc::new(answer));
    let url = upstream.base_url();
    let dir = TempDir::new("official-clients");
    let mut config = String::new();
    for (name, how) in [
        ("reasoning", "preset = \"deepseek\""),
        ("plain", "preset = \"generic\""),
        ("claude", "dialect = \"anthropic\""),
        ("gemini", "dialect = \"gemini\""),
    ] {
        config.push_str(&format!(
            "[providers.{name}]\n{how}\nbase_url = \"{url}\"\napi_key_env = \"FAKE_UPSTREAM_KEY\"\nmax_retries = 0\n\n"
        ));
    }
    for (model, upstream_model) in [
        ("reasoning", "deepseek-reasoner"),
        ("plain", "plain-model"),
        ("claude", "claude-sonnet-4-5"),
        ("gemini", "gemini-2.5-flash"),
    ] {
        config.push_str(&format!(
            "[[routes]]\nmodel = \"{model}\"\nprovider = \"{model}\"\nupstream_model = \"{upstream_model}\"\n\n"
        ));
    }
    let path = dir.write("toolbridge.toml", &config);
    let process = GatewayProcess::start(
        Path::new(env!("CARGO_BIN_EXE_toolbridge")),
        &[
            ("TOOLBRIDGE_CONFIG", path.display().to_string()),
            ("FAKE_UPSTREAM_KEY", "k".to_owned()),
        ],
    )
    .await;
    Gateway {
        upstream,
        process,
        _dir: dir,
    }
}

/// The wire of a request, from its path.
fn wire(request: &Recorded) -> Wire {
    if request.path.ends_with("/messages") {
        Wire::Anthropic
    } else if request.path.contains("enerateContent") {
        Wire::Gemini
    } else {
        Wire::Chat { think_tags: false }
    }
}

fn streamed(request: &Recorded) -> bool {
    request.body["stream"] == true || request.path.contains("streamGenerateContent")
}

/// Whether the conversation holds the weather call's result, in any dialect.
fn has_result(body: &Value) -> bool {
    let text = body.to_string();
    text.contains("\"role\":\"tool\"")
        || text.contains("\"tool_result\"")
        || text.contains("\"functionResponse\"")
}

/// DeepSeek's rule in thinking mode: an assistant tool-call message must carry its reasoning.
fn unreasoned(body: &Value) -> bool {
    body["messages"].as_array().is_some_and(|messages| {
        messages.iter().any(|m| {
            m["tool_calls"].as_array().is_some_and(|c| !c.is_empty())
                && m["reasoning_content"].as_str().is_none_or(str::is_empty)
        })
    })
}

fn answer(request: &Recorded) -> Option<Reply> {
    let wire = wire(request);
    let model = request.body["model"].as_str().unwrap_or("");
    let reasons = model != "plain-model";
    if model == "deepseek-reasoner" && unreasoned(&request.body) {
        return Some(Reply::error(
            400,
            json!({"error": {"message": REFUSAL, "type": "invalid_request_error"}}),
        ));
    }
    let reasoning = if reasons {
        vec![
            "The user wants the weather in Paris; ".to_owned(),
            "call the weather tool.".to_owned(),
        ]
    } else {
        Vec::new()
    };
    let usage = Usage {
        input: 40,
        cached: 0,
        output: 12,
        reasoning: 0,
    };
    let a = if has_result(&request.body) {
        Answer {
            reasoning: Vec::new(),
            text: vec!["It is sunny ".to_owned(), "in Paris.".to_owned()],
            calls: Vec::new(),
            end: End::Stop,
            usage,
        }
    } else {
        Answer {
            reasoning,
            text: Vec::new(),
            calls: vec![Call {
                id: "call_weather_1".to_owned(),
                name: "weather".to_owned(),
                namespace: None,
                custom: false,
                arguments: json!({"city": "Paris"}),
            }],
            end: End::ToolCalls,
            usage,
        }
    };
    Some(if streamed(request) {
        wire.stream(&a)
    } else {
        wire.whole(&a)
    })
}
