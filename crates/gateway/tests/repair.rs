//! Ring 2: robust model output through the whole app against the fake Chat upstream. Broken
//! arguments, coercions, a wrongly named shell tool and a patch without its end marker reach the
//! client repaired, with a diagnostic each; a call still invalid is re-asked once (hidden), passed
//! on, or fails the response, per the provider's policy.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code fails loudly

mod common;

use common::Harness;
use serde_json::{Value, json};
use toolbridge_testkit::Reply;
use toolbridge_testkit::chat::chunk;
use toolbridge_testkit::sse::{Event, types};

const APPLY_PATCH_GRAMMAR: &str = r#"start: begin_patch hunk+ end_patch
begin_patch: "*** Begin Patch" LF
end_patch: "*** End Patch" LF?

hunk: add_hunk | delete_hunk | update_hunk
add_hunk: "*** Add File: " filename LF add_line+
delete_hunk: "*** Delete File: " filename LF
update_hunk: "*** Update File: " filename LF change_move? change?

filename: /(.+)/
add_line: "+" /(.*)/ LF -> line

change_move: "*** Move to: " filename LF
change: (change_context | change_line)+ eof_line?
change_context: ("@@" | "@@ " /(.+)/) LF
change_line: ("+" | "-" | " ") /(.*)/ LF
eof_line: "*** End of File" LF

%import common.LF
"#;

fn tools() -> Value {
    json!([
        {"type": "function", "name": "exec_command", "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}, "yield_time_ms": {"type": "integer"}}, "required": ["cmd"]}},
        {"type": "custom", "name": "apply_patch", "description": "Edit files.", "format": {"type": "grammar", "syntax": "lark", "definition": APPLY_PATCH_GRAMMAR}},
    ])
}

/// A gateway whose provider has `policy` lines (`invalid_calls = "fail"`, `repair = false`).
async fn harness(policy: &str) -> Harness {
    Harness::with_toml(|url| {
        format!(
            r#"
[providers.up]
base_url = "{url}"
api_key_env = "FAKE_UPSTREAM_KEY"
preset = "glm"
{policy}

[[routes]]
model = "*"
provider = "up"
"#
        )
    })
    .await
}

fn request(stream: bool) -> Value {
    json!({"model": "glm-5.1", "input": "list the files", "stream": stream, "tools": tools()})
}

/// A whole answer with one call.
fn whole_call(id: &str, name: &str, arguments: &str) -> Reply {
    Reply::json(json!({
        "id": "chatcmpl-fake", "object": "chat.completion", "created": 1_700_000_000, "model": "glm-5.1",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": null, "tool_calls": [
            {"id": id, "type": "function", "function": {"name": name, "arguments": arguments}}
        ]}}],
        "usage": toolbridge_testkit::chat::usage(10, 5),
    }))
}

/// A streamed answer: some text, then one call whose arguments come in `pieces`.
fn streamed_call(id: &str, name: &str, pieces: &[&str]) -> Reply {
    let mut chunks = vec![chunk(
        json!({"role": "assistant", "content": "Running it."}),
        None,
    )];
    for (i, piece) in pieces.iter().enumerate() {
        let call = if i == 0 {
            json!({"index": 0, "id": id, "type": "function", "function": {"name": name, "arguments": piece}})
        } else {
            json!({"index": 0, "function": {"arguments": piece}})
        };
        chunks.push(chunk(json!({"tool_calls": [call]}), None));
    }
    chunks.push(chunk(json!({}), Some("tool_calls")));
    Reply::sse(chunks)
}

fn codes(response: &Value) -> Vec<String> {
    response["toolbridge_diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["code"].as_str().unwrap().to_owned())
        .collect()
}

fn diagnostic<'a>(response: &'a Value, code: &str) -> &'a Value {
    response["toolbridge_diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["code"] == code)
        .unwrap_or_else(|| panic!("no `{code}` diagnostic in {response:#}"))
}

fn terminal(events: &[Event]) -> &Value {
    &events.last().unwrap().data["response"]
}

fn arguments(item: &Value) -> Value {
    serde_json::from_str(item["arguments"].as_str().unwrap()).unwrap()
}

#[tokio::test]
async fn broken_streamed_arguments_reach_the_client_repaired_and_only_once() {
    let h = harness("").await;
    h.upstream.push(streamed_call(
        "call_1",
        "exec_command",
        &["{\"cmd\": \"ls", " -la\",}"],
    ));
    let events = h.post_stream(&request(true)).await;
    let kinds = types(&events);
    // The text streamed live; the call's arguments were held and sent once, repaired.
    let text = kinds
        .iter()
        .position(|t| t == "response.output_text.delta")
        .unwrap();
    let deltas: Vec<&Event> = events
        .iter()
        .filter(|e| e.data["type"] == "response.function_call_arguments.delta")
        .collect();
    assert_eq!(deltas.len(), 1, "{kinds:?}");
    let delta: Value = serde_json::from_str(deltas[0].data["delta"].as_str().unwrap()).unwrap();
    assert_eq!(delta, json!({"cmd": "ls -la"}));
    let call_added = events
        .iter()
        .position(|e| {
            e.data["type"] == "response.output_item.added"
                && e.data["item"]["type"] == "function_call"
        })
        .unwrap();
    assert!(text < call_added);
    let done = events
        .iter()
        .find(|e| e.data["type"] == "response.function_call_arguments.done")
        .unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(done.data["arguments"].as_str().unwrap()).unwrap(),
        json!({"cmd": "ls -la"})
    );
    let response = terminal(&events);
    let call = &response["output"][1];
    assert_eq!(call["name"], "exec_command");
    assert_eq!(arguments(call), json!({"cmd": "ls -la"}));
    assert!(
        diagnostic(response, "arguments_repaired")["message"]
            .as_str()
            .unwrap()
            .contains("exec_command")
    );
}

#[tokio::test]
async fn broken_whole_arguments_reach_the_client_repaired() {
    let h = harness("").await;
    h.upstream
        .push(whole_call("call_1", "exec_command", "{cmd: 'ls -la'"));
    let (status, body) = h.post_json(&request(false)).await;
    assert_eq!(status, 200, "{body:#}");
    let call = &body["output"][0];
    assert_eq!(call["type"], "function_call");
    assert_eq!(arguments(call), json!({"cmd": "ls -la"}));
    assert!(codes(&body).contains(&"arguments_repaired".to_owned()));
    assert_eq!(h.upstream.requests().len(), 1);
}

#[tokio::test]
async fn a_numeric_string_is_coerced_to_the_declared_integer() {
    let h = harness("").await;
    h.upstream.push(whole_call(
        "call_1",
        "exec_command",
        r#"{"cmd": "sleep 1", "yield_time_ms": "500"}"#,
    ));
    let (_, body) = h.post_json(&request(false)).await;
    assert_eq!(
        arguments(&body["output"][0]),
        json!({"cmd": "sleep 1", "yield_time_ms": 500})
    );
    let coerced = diagnostic(&body, "arguments_coerced");
    assert!(
        coerced["message"]
            .as_str()
            .unwrap()
            .contains("/yield_time_ms"),
        "{coerced}"
    );
}

#[tokio::test]
async fn a_call_to_bash_becomes_the_declared_exec_command() {
    let h = harness("").await;
    h.upstream
        .push(streamed_call("call_1", "bash", &[r#"{"cmd": "ls"}"#]));
    let events = h.post_stream(&request(true)).await;
    // The call is announced under its declared name from its first event.
    let added = events
        .iter()
        .find(|e| {
            e.data["type"] == "response.output_item.added"
                && e.data["item"]["type"] == "function_call"
        })
        .unwrap();
    assert_eq!(added.data["item"]["name"], "exec_command");
    let response = terminal(&events);
    assert_eq!(response["output"][1]["name"], "exec_command");
    assert_eq!(arguments(&response["output"][1]), json!({"cmd": "ls"}));
    let mapped = diagnostic(response, "tool_name_mapped");
    assert!(
        mapped["message"].as_str().unwrap().contains("`bash`"),
        "{mapped}"
    );
    assert_eq!(h.upstream.requests().len(), 1);
}

#[tokio::test]
async fn a_patch_without_its_end_marker_is_completed() {
    let h = harness("").await;
    let patch = "*** Begin Patch\n*** Add File: a.txt\n+hello\n";
    h.upstream.push(whole_call(
        "call_p",
        "apply_patch",
        &json!({"input": patch}).to_string(),
    ));
    let (_, body) = h.post_json(&request(false)).await;
    let call = &body["output"][0];
    assert_eq!(call["type"], "custom_tool_call");
    let input = call["input"].as_str().unwrap();
    assert!(input.starts_with(patch), "{input:?}");
    assert!(input.trim_end().ends_with("*** End Patch"), "{input:?}");
    assert!(
        diagnostic(&body, "custom_input_repaired")["message"]
            .as_str()
            .unwrap()
            .contains("end_patch_added")
    );
}

#[tokio::test]
async fn an_invalid_call_is_reasked_once_unseen_and_the_second_answer_is_shown() {
    let h = harness("").await;
    // `cmd` is required; the first answer leaves it out.
    h.upstream.push(streamed_call(
        "call_bad",
        "exec_command",
        &[r#"{"yield_time_ms": 10}"#],
    ));
    h.upstream.push(streamed_call(
        "call_good",
        "exec_command",
        &[r#"{"cmd": "ls"}"#],
    ));
    let events = h.post_stream(&request(true)).await;
    let requests = h.upstream.requests();
    assert_eq!(requests.len(), 2);
    // The second request carries the invalid call and its validation error as the result.
    let messages = requests[1].body["messages"].as_array().unwrap();
    let asked = messages
        .iter()
        .filter_map(|m| m["tool_calls"].as_array())
        .flatten()
        .find(|c| c["id"] == "call_bad")
        .unwrap_or_else(|| panic!("the invalid call is not in {messages:#?}"));
    assert_eq!(asked["function"]["name"], "exec_command");
    let result = messages
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == "call_bad")
        .unwrap();
    let error = result["content"].as_str().unwrap();
    assert!(
        error.contains("cmd") && error.contains("required"),
        "{error}"
    );
    // The client never saw the invalid call: one call, the good one.
    assert!(
        !events
            .iter()
            .any(|e| e.data.to_string().contains("call_bad"))
    );
    let response = terminal(&events);
    let calls: Vec<&Value> = response["output"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["type"] == "function_call")
        .collect();
    assert_eq!(calls.len(), 1, "{response:#}");
    assert_eq!(calls[0]["call_id"], "call_good");
    assert_eq!(arguments(calls[0]), json!({"cmd": "ls"}));
    assert_eq!(response["status"], "completed");
    assert!(
        diagnostic(response, "tool_call_reasked")["message"]
            .as_str()
            .unwrap()
            .contains("exec_command")
    );
}

#[tokio::test]
async fn a_call_still_invalid_after_the_reask_is_passed_on() {
    let h = harness("").await;
    for id in ["call_bad_1", "call_bad_2"] {
        h.upstream
            .push(whole_call(id, "exec_command", r#"{"yield_time_ms": 10}"#));
    }
    let (status, body) = h.post_json(&request(false)).await;
    assert_eq!(status, 200);
    // One re-ask, no more.
    assert_eq!(h.upstream.requests().len(), 2);
    assert_eq!(body["output"][0]["call_id"], "call_bad_2");
    let codes = codes(&body);
    assert!(codes.contains(&"tool_call_reasked".to_owned()), "{codes:?}");
    assert!(codes.contains(&"arguments_invalid".to_owned()), "{codes:?}");
}

#[tokio::test]
async fn the_pass_policy_hands_on_the_best_effort_with_a_diagnostic() {
    let h = harness(r#"invalid_calls = "pass""#).await;
    h.upstream.push(whole_call(
        "call_1",
        "exec_command",
        r#"{"yield_time_ms": 10}"#,
    ));
    let (status, body) = h.post_json(&request(false)).await;
    assert_eq!(status, 200);
    assert_eq!(h.upstream.requests().len(), 1);
    assert_eq!(arguments(&body["output"][0]), json!({"yield_time_ms": 10}));
    let invalid = diagnostic(&body, "arguments_invalid");
    assert!(
        invalid["message"].as_str().unwrap().contains("cmd"),
        "{invalid}"
    );
}

#[tokio::test]
async fn the_fail_policy_fails_the_response_naming_the_tool_and_pointer() {
    let h = harness(r#"invalid_calls = "fail""#).await;
    h.upstream.push(whole_call(
        "call_1",
        "exec_command",
        r#"{"cmd": "ls", "yield_time_ms": "soon"}"#,
    ));
    let (status, body) = h.post_json(&request(false)).await;
    assert_eq!(status, 502, "{body:#}");
    assert_eq!(body["error"]["code"], "invalid_tool_call");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("exec_command") && message.contains("/yield_time_ms"),
        "{message}"
    );

    // Streamed, the headers are out: the response fails with a documented code, the same
    // code beside it.
    h.upstream.push(streamed_call(
        "call_2",
        "exec_command",
        &[r#"{"cmd": "ls", "yield_time_ms": "soon"}"#],
    ));
    let events = h.post_stream(&request(true)).await;
    let last = events.last().unwrap();
    assert_eq!(last.data["type"], "response.failed");
    assert_eq!(last.data["response"]["error"]["code"], "server_error");
    assert_eq!(
        last.data["response"]["error"]["toolbridge_code"],
        "invalid_tool_call"
    );
    assert!(!events.iter().any(|e| e.data.to_string().contains("call_2")));
}

#[tokio::test]
async fn an_undeclared_tool_with_no_match_follows_the_policy() {
    let h = harness(r#"invalid_calls = "fail""#).await;
    h.upstream
        .push(whole_call("call_1", "launch_rockets", r#"{"count": 3}"#));
    let (status, body) = h.post_json(&request(false)).await;
    assert_eq!(status, 502);
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("launch_rockets") && message.contains("exec_command"),
        "{message}"
    );
}

#[tokio::test]
async fn with_repair_off_arguments_stream_live_and_unchanged() {
    let h = harness("repair = false").await;
    h.upstream.push(streamed_call(
        "call_1",
        "exec_command",
        &["{\"cmd\": \"ls", " -la\",}"],
    ));
    let events = h.post_stream(&request(true)).await;
    let deltas: Vec<&str> = events
        .iter()
        .filter(|e| e.data["type"] == "response.function_call_arguments.delta")
        .map(|e| e.data["delta"].as_str().unwrap())
        .collect();
    assert_eq!(deltas, ["{\"cmd\": \"ls", " -la\",}"]);
    let response = terminal(&events);
    assert_eq!(response["output"][1]["arguments"], "{\"cmd\": \"ls -la\",}");
    assert!(!codes(response).contains(&"arguments_repaired".to_owned()));
}

/// The compiled checks of a tool set are shared: the second request with the same tools is a
/// cache hit and is repaired exactly as the first.
#[tokio::test]
async fn a_repeated_tool_set_reuses_its_compiled_checks() {
    let upstream = toolbridge_testkit::FakeUpstream::start().await;
    let text = format!(
        "[providers.up]\nbase_url = \"{}\"\npreset = \"glm\"\n[[routes]]\nmodel = \"*\"\nprovider = \"up\"\n",
        upstream.base_url()
    );
    let file: toolbridge_gateway::config::FileConfig = toml::from_str(&text).unwrap();
    let env = |k: &str| match k {
        "TOOLBRIDGE_STORE_URL" => Some("none".to_owned()),
        "TOOLBRIDGE_LISTEN" => Some("127.0.0.1:0".to_owned()),
        _ => None,
    };
    let config = toolbridge_gateway::config::Config::from_file(file, &env).unwrap();
    let listener = tokio::net::TcpListener::bind(config.listen).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (state, _force) = toolbridge_gateway::AppState::new(config).await.unwrap();
    let cache = state.schema_cache().clone();
    tokio::spawn(async move { axum::serve(listener, toolbridge_gateway::app(state)).await });
    let patch = "*** Begin Patch\n*** Add File: a.txt\n+hello\n";
    let mut inputs = Vec::new();
    for _ in 0..2 {
        upstream.push(whole_call(
            "call_p",
            "apply_patch",
            &json!({"input": patch}).to_string(),
        ));
        let body: Value = reqwest::Client::new()
            .post(format!("http://{addr}/v1/responses"))
            .json(&request(false))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        inputs.push(body["output"][0]["input"].as_str().unwrap().to_owned());
    }
    assert!(
        inputs[0].trim_end().ends_with("*** End Patch"),
        "{inputs:?}"
    );
    assert_eq!(inputs[0], inputs[1]);
    assert_eq!(cache.stats(), (1, 1), "one compile, one hit");
}
