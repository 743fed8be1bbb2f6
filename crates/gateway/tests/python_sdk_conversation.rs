//! Ring 3: the real OpenAI Python SDK (`openai` 3.57.0) drives the stored-conversation API of the
//! real `toolbridge` binary (zero-config, its own temporary SQLite store): three turns chained with
//! `previous_response_id` (one streamed), `retrieve`, `input_items.list`, `delete`, a
//! `background` response polled to completion and one cancelled. The client side is
//! `tests/python/sdk_conversation.py`, which prints a JSON report this test asserts.
//!
//! The fake upstream answers through a gate keyed on the last user message, so the script's order
//! does not matter to it; the slow answer behind the cancelled response is a `Reply::Delayed`.
//! The test also checks that the third turn's upstream request carried the earlier turns.
//!
//! The Python interpreter is `$TOOLBRIDGE_TEST_PYTHON`, else `<workspace>/.venv/bin/python` (made
//! by `scripts/test`); without one the test fails on CI and otherwise says it skipped.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code fails loudly

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::process::Command;
use toolbridge_testkit::chat::{completion, text_stream};
use toolbridge_testkit::{FakeUpstream, GatewayProcess, Recorded, Reply};

const BIN: &str = env!("CARGO_BIN_EXE_toolbridge");
/// What the SDK's strict model says of a message item whose `content` is a string.
/// How long the upstream takes to answer the response that gets cancelled.
const SLOW: Duration = Duration::from_millis(1500);

#[tokio::test]
async fn openai_python_sdk_chains_retrieves_lists_deletes_and_runs_in_the_background() {
    let Some(python) = toolbridge_testkit::tools::python_with_openai() else {
        eprintln!("SKIPPED python SDK conversation test: no Python with the openai package");
        return;
    };
    tokio::time::timeout(Duration::from_secs(150), run(python))
        .await
        .expect("the Python SDK conversation test ran past its time limit");
}

/// The text of the last user message of a Chat request (string or parts).
fn last_user_text(body: &Value) -> String {
    let Some(message) = body["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
    else {
        return String::new();
    };
    match &message["content"] {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect(),
        _ => String::new(),
    }
}

/// The upstream's answer to each user message the script sends.
fn answer(request: &Recorded) -> Option<Reply> {
    let streamed = request.body["stream"] == true;
    let reply = match last_user_text(&request.body).as_str() {
        "Capital of France?" => Reply::json(completion("Paris.", "stop")),
        "Its population?" if streamed => {
            Reply::sse(text_stream(&["About 2.1", " million."], "stop"))
        }
        "Which country again?" => Reply::json(completion("France.", "stop")),
        "Work in the background." => Reply::json(completion("Done in the background.", "stop")),
        "Slow work." => Reply::Delayed {
            pause: SLOW,
            reply: Box::new(Reply::json(completion("Too late.", "stop"))),
        },
        // Anything else is unexpected: a 400 the script will surface.
        other => Reply::error(
            400,
            json!({"error": {"message": format!(
                "fake upstream: unexpected turn {other:?} (stream {streamed})"
            )}}),
        ),
    };
    Some(reply)
}

async fn run(python: PathBuf) {
    let upstream = FakeUpstream::start().await;
    upstream.set_gate(Arc::new(answer));
    let gateway = GatewayProcess::start(
        Path::new(BIN),
        &[("TOOLBRIDGE_UPSTREAM_URL", upstream.base_url())],
    )
    .await;

    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/sdk_conversation.py");
    let output = Command::new(&python)
        .arg(&script)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("OPENAI_BASE_URL", gateway.url("/v1"))
        .env("OPENAI_API_KEY", "dummy")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("PYTHONIOENCODING", "utf-8")
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", python.display()));
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        output.status.success(),
        "{} exited with {}\nstdout:\n{stdout}\nstderr:\n{stderr}\ngateway stderr:\n{}",
        script.display(),
        output.status,
        gateway.stderr()
    );
    let report: Value = stdout
        .lines()
        .find_map(|l| l.strip_prefix("SDK_CONVERSATION "))
        .map(|json| serde_json::from_str(json).expect("the report is JSON"))
        .unwrap_or_else(|| panic!("no SDK_CONVERSATION line:\n{stdout}\nstderr:\n{stderr}"));
    eprintln!("python SDK conversation report: {report:#}");

    check_conversation(&report["conversation"], &stderr);
    check_background(&report["background"]);
    check_cancelled(&report["cancelled"]);
    check_upstream(&upstream.requests());
    gateway.kill().await;
}

fn check_conversation(c: &Value, stderr: &str) {
    assert_eq!(
        c["texts"],
        json!(["Paris.", "About 2.1 million.", "France."])
    );
    assert_eq!(c["deltas"], json!(["About 2.1", " million."]));
    let ids = c["ids"].as_array().unwrap();
    assert_eq!(c["previous"], json!([null, ids[0], ids[1]]), "the chain");
    assert_eq!(
        c["retrieved_equals_created"],
        json!({"first": true, "second": true, "third": true}),
        "retrieve gives back what create (or the stream's response.completed) gave; \
         script stderr:\n{stderr}"
    );

    // Input items: only the third turn's own two messages, each with an id, in order.
    let items = &c["input_items"];
    assert_eq!(
        items["asc_texts"],
        json!(["Thanks.", "Which country again?"])
    );
    assert_eq!(items["asc_roles"], json!(["user", "user"]));
    let asc: Vec<&str> = items["asc_ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i.as_str().unwrap())
        .collect();
    assert_eq!(asc.len(), 2);
    assert!(asc.iter().all(|id| !id.is_empty()), "{items}");
    assert_ne!(asc[0], asc[1]);
    let mut desc = asc.clone();
    desc.reverse();
    assert_eq!(items["desc_ids"], json!(desc), "newest first by default");
    assert_eq!(
        items["paged_ids"],
        json!(asc),
        "the SDK's cursor pages one at a time"
    );
    assert_eq!(items["first_id"], asc[0]);
    assert_eq!(items["last_id"], asc[1]);
    assert_eq!(items["has_more"], false);
    // Each item as the SDK's model for it expects.
    for (id, problems) in items["strict_problems"].as_object().unwrap() {
        assert!(
            problems.as_array().unwrap().is_empty(),
            "input item {id} does not fit the SDK's model: {problems}\n{items:#}"
        );
    }

    assert_eq!(c["retrieve_after_delete"], "NotFoundError 404");
    assert_eq!(c["delete_again"], "NotFoundError 404");
    assert_eq!(c["second_kept_after_delete"], true);
}

fn check_background(b: &Value) {
    assert_eq!(b["initial_status"], "queued", "{b}");
    assert_eq!(b["background"], true);
    assert_eq!(b["final_status"], "completed", "{b}");
    assert_eq!(b["output_text"], "Done in the background.");
    assert_eq!(b["total_tokens"], 18);
}

fn check_cancelled(c: &Value) {
    assert!(
        matches!(c["status_before_cancel"].as_str(), Some("in_progress")),
        "{c}"
    );
    assert_eq!(c["cancel_status"], "cancelled", "{c}");
    assert_eq!(
        c["status_after_wait"], "cancelled",
        "the run's end undid the cancel: {c}"
    );
    assert_eq!(c["output_after_wait"], "", "{c}");
    // Cancelling a cancelled response answers it again, unchanged.
    assert_eq!(c["cancel_again"], "ok", "{c}");
}

fn check_upstream(requests: &[Recorded]) {
    for r in requests {
        assert_eq!(r.path, "/v1/chat/completions");
    }
    let turns: Vec<String> = requests.iter().map(|r| last_user_text(&r.body)).collect();
    let third: Vec<&Recorded> = requests
        .iter()
        .filter(|r| last_user_text(&r.body) == "Which country again?")
        .collect();
    assert_eq!(third.len(), 1, "upstream turns: {turns:?}");
    // The whole conversation, and only this turn's instructions (none).
    assert_eq!(
        third[0].body["messages"],
        json!([
            {"role": "user", "content": "Capital of France?"},
            {"role": "assistant", "content": "Paris."},
            {"role": "user", "content": "Its population?"},
            {"role": "assistant", "content": "About 2.1 million."},
            {"role": "user", "content": "Thanks."},
            {"role": "user", "content": "Which country again?"},
        ]),
        "the third turn's upstream request"
    );
    let first = requests
        .iter()
        .find(|r| last_user_text(&r.body) == "Capital of France?")
        .unwrap();
    assert_eq!(
        first.body["messages"][0],
        json!({"role": "system", "content": "Be brief."})
    );
    // One upstream call per turn: nothing was retried or sent twice.
    let mut sorted = turns.clone();
    sorted.sort();
    assert_eq!(
        sorted,
        [
            "Capital of France?",
            "Its population?",
            "Slow work.",
            "Which country again?",
            "Work in the background.",
        ],
        "upstream turns: {turns:?}"
    );
}
