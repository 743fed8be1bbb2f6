//! What the session benches share: the Codex-shaped session (the recorded request and a model
//! that calls a tool every turn), the gateway's CPU time or instructions ([`Counter`]), and
//! reading a turn's answer (an SSE body or WebSocket events) down to its completed response and
//! its call.
//!
//! Included by path (`#[path = "common/turns.rs"] mod turns;`, beside `mod codex;`).

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use toolbridge_testkit::chat::{chunk, usage_chunk};
use toolbridge_testkit::{Recorded, Reply};

pub type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// The model: one `exec_command` call per turn, streamed, its id new each turn.
pub fn model(request: &Recorded) -> Option<Reply> {
    let turn = request.body["messages"]
        .as_array()
        .map_or(0, |m| m.iter().filter(|m| m["role"] == "tool").count());
    Some(Reply::sse(vec![
        chunk(
            json!({"role": "assistant", "tool_calls": [{"index": 0, "id": format!("call_turn_{turn}"),
                "type": "function", "function": {"name": "exec_command", "arguments": "{\"cmd\":\"cat src/lib.rs\"}"}}]}),
            None,
        ),
        chunk(json!({}), Some("tool_calls")),
        // Providers report usage (asked for with `stream_options`); without it the gateway
        // counts the tokens itself, over the whole history.
        usage_chunk(1000 + 100 * turn as u64, 20),
    ]))
}

/// The recorded request's fields other than its input, and its input.
pub fn codex_shape(stored: bool) -> (serde_json::Map<String, Value>, Vec<Value>) {
    static CODEX: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    let mut request: serde_json::Map<String, Value> =
        serde_json::from_slice(CODEX.get_or_init(crate::codex::codex_request))
            .expect("the Codex request is JSON");
    // Taken out of its place, not removed: each turn puts its input back where Codex writes it
    // (before `tools` and `prompt_cache_key`).
    let input = match request.get_mut("input").map(Value::take) {
        Some(Value::Array(items)) => items,
        other => panic!("the Codex request's input is not a list: {other:?}"),
    };
    request.remove("previous_response_id");
    request.insert("store".to_owned(), json!(stored));
    request.insert("stream".to_owned(), json!(true));
    (request, input)
}

/// CPU time of process `pid` so far, in nanoseconds: the sum over its threads.
pub fn cpu_nanos(pid: u32) -> u64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .filter_map(Result::ok)
        .filter_map(|task| std::fs::read_to_string(task.path().join("schedstat")).ok())
        .filter_map(|line| line.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

/// How a turn is counted: the gateway process's CPU time (nanoseconds, every thread), or, with
/// `TOOLBRIDGE_BENCH_COUNT=instructions`, its instructions as valgrind's callgrind counts them
/// (every thread; repeatable within about 1 % however busy the machine, unlike a time). Its
/// dumps (`out.cg.N`, one per counted turn, for `callgrind_annotate`) are kept in
/// `TOOLBRIDGE_BENCH_CG_DIR` when that is set.
pub enum Counter {
    Cpu,
    /// Callgrind's files (its dumps, the wrapper script, vgdb's pipes) in `dir`, removed at the
    /// end unless `keep`.
    Instructions {
        dir: PathBuf,
        keep: bool,
        dumps: AtomicUsize,
    },
}

impl Counter {
    pub fn from_env() -> Self {
        match std::env::var("TOOLBRIDGE_BENCH_COUNT").as_deref() {
            Ok("instructions") => {
                let kept = std::env::var_os("TOOLBRIDGE_BENCH_CG_DIR").map(PathBuf::from);
                let keep = kept.is_some();
                let dir = kept.unwrap_or_else(|| {
                    std::env::temp_dir().join(format!("tb-session-cg-{}", std::process::id()))
                });
                std::fs::create_dir_all(&dir).unwrap();
                Self::Instructions {
                    dir,
                    keep,
                    dumps: AtomicUsize::new(0),
                }
            }
            Ok("cpu") | Err(_) => Self::Cpu,
            Ok(other) => panic!("TOOLBRIDGE_BENCH_COUNT={other}: `cpu` or `instructions`"),
        }
    }

    /// The unit of [`Self::per_turn`]'s figures.
    pub fn unit(&self) -> &'static str {
        match self {
            Self::Cpu => "gateway CPU per turn (us)",
            Self::Instructions { .. } => "gateway instructions per turn (thousands, callgrind)",
        }
    }

    /// A summed count in [`Self::unit`].
    pub fn per_turn(&self, sum: u64, sessions: usize) -> f64 {
        sum as f64 / sessions as f64 / 1000.0
    }

    /// Starts `binary serve`, under callgrind when counting instructions (its startup is slow
    /// there, so it gets longer to print its listening line).
    pub async fn start(
        &self,
        binary: &Path,
        envs: &[(&str, String)],
    ) -> toolbridge_testkit::GatewayProcess {
        use toolbridge_testkit::GatewayProcess;
        let Self::Instructions { dir, .. } = self else {
            return GatewayProcess::start(binary, envs).await;
        };
        // The listening address is read from stderr, so valgrind logs to a file of its own.
        let wrapper = dir.join("callgrind.sh");
        std::fs::write(
            &wrapper,
            format!(
                "#!/bin/sh\nexec valgrind --tool=callgrind --log-file={dir}/valgrind.log --vgdb-prefix={dir}/vgdb --compress-strings=no --callgrind-out-file={dir}/out.cg {} \"$@\"\n",
                binary.display(),
                dir = dir.display()
            ),
        )
        .unwrap();
        let made = Command::new("chmod")
            .arg("+x")
            .arg(&wrapper)
            .status()
            .unwrap();
        assert!(made.success(), "chmod {}", wrapper.display());
        GatewayProcess::start_within(&wrapper, envs, Duration::from_secs(300)).await
    }

    /// Before a turn: its CPU so far, or (callgrind) the counters zeroed once the previous
    /// turn's work has settled.
    pub fn before(&self, pid: u32) -> u64 {
        match self {
            Self::Cpu => cpu_nanos(pid),
            Self::Instructions { dir, .. } => {
                std::thread::sleep(Duration::from_millis(200));
                callgrind_control(dir, &["-z".to_owned()], pid);
                0
            }
        }
    }

    /// After a turn: what it cost since [`Self::before`] gave `before`.
    pub fn after(&self, pid: u32, before: u64) -> u64 {
        match self {
            Self::Cpu => cpu_nanos(pid) - before,
            Self::Instructions { dir, dumps, .. } => {
                // What the answer left running (the store's write, the log) counts as the turn's.
                std::thread::sleep(Duration::from_millis(200));
                callgrind_control(dir, &["--dump=turn".to_owned()], pid);
                let n = dumps.fetch_add(1, Ordering::SeqCst) + 1;
                let file = dir.join(format!("out.cg.{n}"));
                for _ in 0..300 {
                    if let Ok(text) = std::fs::read_to_string(&file)
                        && let Some(total) = text.lines().find_map(|l| l.strip_prefix("totals: "))
                    {
                        return total.trim().parse().unwrap();
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
                panic!("callgrind wrote no totals to {}", file.display())
            }
        }
    }
}

impl Drop for Counter {
    fn drop(&mut self) {
        if let Self::Instructions {
            dir, keep: false, ..
        } = self
        {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

fn callgrind_control(dir: &Path, args: &[String], pid: u32) {
    let status = Command::new("callgrind_control")
        .arg(format!("--vgdb-prefix={}/vgdb", dir.display()))
        .args(args)
        .arg(pid.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .expect("callgrind_control (valgrind) is installed");
    assert!(status.success(), "callgrind_control {args:?} {pid}");
}

/// The completed response in an SSE body or a list of events.
pub fn completed(events: impl Iterator<Item = Value>) -> Value {
    events
        .filter(|e| e["type"] == "response.completed")
        .map(|mut e| e["response"].take())
        .last()
        .expect("a response.completed event")
}

pub fn sse_events(body: &str) -> impl Iterator<Item = Value> + '_ {
    body.lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str(d).ok())
}

/// The response's function call.
pub fn the_call(response: &Value) -> Value {
    response["output"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["type"] == "function_call")
        .cloned()
        .unwrap_or_else(|| panic!("no call in {response}"))
}

/// The socket's events up to the response's end: its completed response.
pub async fn events_until_done(socket: &mut Socket) -> Value {
    let mut events = Vec::new();
    loop {
        let message = socket.next().await.expect("open").expect("readable");
        let Message::Text(text) = message else {
            continue;
        };
        let event: Value = serde_json::from_str(&text).unwrap();
        let kind = event["type"].as_str().unwrap_or_default().to_owned();
        events.push(event);
        match kind.as_str() {
            "response.completed" => return completed(events.into_iter()),
            "response.failed" | "error" => panic!("the turn failed: {events:#?}"),
            _ => {}
        }
    }
}
