//! Resident memory of the real `toolbridge` binary per open, idle stream.
//!
//! The bench starts a fake Chat Completions upstream in this process whose streamed answer
//! stays silent for a long time (its first piece comes only after [`UPSTREAM_PAUSE`]), and the
//! gateway binary as a child process in zero-config mode pointed at it. After a few warm-up
//! requests it reads the child's `VmRSS` from `/proc/PID/status`, opens [`STREAMS`] concurrent
//! streamed `/v1/responses` requests, waits until each has received its first SSE bytes (the
//! gateway's `response.created`, sent once the upstream has answered with its headers), so that
//! every stream is open and idle, reads `VmRSS` again, and prints the growth per stream against
//! the 64 KB target. Then it drops every stream, waits (at most 5 s) for the gateway's open
//! descriptors to fall back, and reads `VmRSS` once more; a second round of as many streams
//! then shows whether the memory kept after the first is reused (allocator retention) or grows
//! again (a leak). Nothing is asserted on memory.
//!
//! Each stream holds two sockets in this process (the client's and the fake upstream's) and two
//! in the gateway, which inherits this process's open-files limit; when the soft limit in
//! `/proc/self/limits` is too low for that, the stream count is reduced, with a note.
//!
//! Under `cargo bench` (which passes `--bench`) it opens 1,000 streams; under `cargo test` only 20.

// Benches are test code: a broken setup should stop the run loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::json;
use tokio::sync::Semaphore;
use toolbridge_testkit::chat::{chunk, text_stream};
use toolbridge_testkit::{FakeUpstream, GatewayProcess, Reply};

const BIN: &str = env!("CARGO_BIN_EXE_toolbridge");
const STREAMS: usize = 1_000;
const SMOKE_STREAMS: usize = 20;
/// The silence before each piece of the idle answer; far longer than the bench runs.
const UPSTREAM_PAUSE: Duration = Duration::from_secs(300);
/// Streams being opened at once (each is kept open once its first bytes arrived).
const OPENING_AT_ONCE: usize = 64;
/// Warm-up requests answered at once, before the first reading.
const WARMUP: usize = 8;
/// The memory target per open stream, in KB.
const TARGET_KB: f64 = 64.0;
/// Sockets and files this process and the gateway use besides the streams'.
const FD_RESERVE: u64 = 128;
/// The bound on opening every stream.
const OPEN_LIMIT: Duration = Duration::from_secs(20);
/// The bound on waiting for `VmRSS` to settle.
const SETTLE_LIMIT: Duration = Duration::from_secs(10);
/// The bound on waiting for the gateway to release the sockets of closed streams.
const CLOSE_LIMIT: Duration = Duration::from_secs(5);

/// The soft open-files limit of this process, when it can be read.
fn open_files_soft_limit() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    let soft = line
        .trim_start_matches("Max open files")
        .split_whitespace()
        .next()?;
    if soft == "unlimited" {
        Some(u64::MAX)
    } else {
        soft.parse().ok()
    }
}

/// `VmRSS` of process `pid`, in KB.
fn vm_rss_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("read status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("a VmRSS line")
}

/// The number of threads of process `pid`.
fn threads(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("read status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// A reading once `VmRSS` has stopped moving: two readings 200 ms apart within 256 KB of each
/// other (at most [`SETTLE_LIMIT`]). The gateway loads its tokenizer (about 50 MB) in the
/// background at start, which must not count as stream memory.
async fn settled_rss_kb(pid: u32) -> u64 {
    let started = Instant::now();
    let mut last = vm_rss_kb(pid);
    loop {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let now = vm_rss_kb(pid);
        if now.abs_diff(last) <= 256 || started.elapsed() > SETTLE_LIMIT {
            return now;
        }
        last = now;
    }
}

async fn bench(wanted: usize) {
    let limit = open_files_soft_limit();
    let streams = match limit {
        Some(soft) if soft < 2 * wanted as u64 + FD_RESERVE => {
            let fit = (soft.saturating_sub(FD_RESERVE) / 2) as usize;
            println!(
                "note: the soft open-files limit is {soft}; each stream needs 2 descriptors here and 2 in \
                 the gateway, so {fit} streams are opened instead of {wanted}"
            );
            fit
        }
        _ => wanted,
    };
    println!(
        "idle_streams: open-files soft limit {}; {streams} streams",
        limit.map_or_else(|| "unknown".to_owned(), |l| l.to_string())
    );
    assert!(streams > 0, "no stream fits the open-files limit");

    let upstream = FakeUpstream::start().await;
    let role = chunk(json!({"role": "assistant", "content": ""}), None);
    let finish = chunk(json!({"content": "late"}), Some("stop"));
    upstream.set_fallback(Reply::Stream {
        pieces: vec![
            format!("data: {role}\n\n"),
            format!("data: {finish}\n\ndata: [DONE]\n\n"),
        ],
        pause: UPSTREAM_PAUSE,
    });
    let gateway = GatewayProcess::start(
        Path::new(BIN),
        &[
            ("TOOLBRIDGE_UPSTREAM_URL", upstream.base_url()),
            ("TOOLBRIDGE_UPSTREAM_API_KEY", "sk-idle-bench".to_owned()),
        ],
    )
    .await;
    let pid = gateway.pid();
    let at_start = vm_rss_kb(pid);
    let client = reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("reqwest client");
    let url = gateway.url("/v1/responses");
    let body = json!({"model": "fake-model", "stream": true, "input": "Say hello, slowly."});

    // Warm-up: complete answers, several at once, so that lazily built state (connection
    // pools, allocator arenas of the worker threads) exists before the first reading.
    for _ in 0..WARMUP {
        upstream.push(Reply::sse(text_stream(&["Hello", "."], "stop")));
    }
    let warmups = (0..WARMUP).map(|_| async {
        let response = client.post(&url).json(&body).send().await.expect("answers");
        assert_eq!(response.status().as_u16(), 200);
        let text = response.text().await.expect("body");
        assert!(
            text.contains("response.completed"),
            "warm-up stream:\n{text}"
        );
    });
    futures::future::join_all(warmups).await;

    let before = settled_rss_kb(pid).await;
    let (threads_before, fds_before) = (threads(pid), open_fds(pid));

    let started = Instant::now();
    let open = open_streams(&client, &url, &body, streams, &gateway).await;
    let opened_in = started.elapsed();
    let after = settled_rss_kb(pid).await;
    let (threads_after, fds_open) = (threads(pid), open_fds(pid));
    let per_stream = after.saturating_sub(before) as f64 / open.len() as f64;
    println!(
        "opened {} idle streams in {:.2} s; upstream saw {} requests",
        open.len(),
        opened_in.as_secs_f64(),
        upstream.requests().len()
    );
    println!(
        "gateway VmRSS at start {at_start} KB, after warm-up (before) {before} KB, after {after} KB; {per_stream:.1} KB per stream \
         (target {TARGET_KB} KB: {}); gateway threads {threads_before} -> {threads_after}, \
         open descriptors {fds_before} -> {fds_open}",
        if per_stream <= TARGET_KB {
            "within"
        } else {
            "ABOVE"
        }
    );

    // Closing the client side must release the gateway's sockets, upstream ones included,
    // although the upstream is still silent.
    drop(open);
    let closed = Instant::now();
    let fds_closed = loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let fds = open_fds(pid);
        if fds <= fds_before + 4 || closed.elapsed() > CLOSE_LIMIT {
            break fds;
        }
    };
    println!(
        "after closing every stream: gateway VmRSS {} KB, open descriptors {fds_closed} \
         ({:.1} s after closing)",
        settled_rss_kb(pid).await,
        closed.elapsed().as_secs_f64()
    );

    // A second round tells memory kept for reuse from memory lost: it should not grow again.
    let open = open_streams(&client, &url, &body, streams, &gateway).await;
    let again = settled_rss_kb(pid).await;
    println!(
        "second round of {} idle streams: gateway VmRSS {again} KB ({:+.1} KB per stream over the \
         first round)",
        open.len(),
        (again as f64 - after as f64) / open.len() as f64
    );
    drop(open);
    gateway.kill().await;
}

/// Opens `n` streamed requests, at most [`OPENING_AT_ONCE`] at a time, and returns each once
/// its first bytes (`response.created`) arrived.
async fn open_streams(
    client: &reqwest::Client,
    url: &str,
    body: &serde_json::Value,
    n: usize,
    gateway: &GatewayProcess,
) -> Vec<impl futures::Stream<Item = reqwest::Result<bytes::Bytes>> + use<>> {
    let opening = Arc::new(Semaphore::new(OPENING_AT_ONCE));
    let tasks: Vec<_> = (0..n)
        .map(|_| {
            let (client, url, body, opening) = (
                client.clone(),
                url.to_owned(),
                body.clone(),
                opening.clone(),
            );
            tokio::spawn(async move {
                let _permit = opening.acquire_owned().await.expect("semaphore");
                let response = client.post(&url).json(&body).send().await.expect("answers");
                assert_eq!(response.status().as_u16(), 200);
                let mut stream = response.bytes_stream();
                let first = loop {
                    let chunk = stream
                        .next()
                        .await
                        .expect("the stream stays open")
                        .expect("body chunk");
                    if !chunk.is_empty() {
                        break chunk;
                    }
                };
                assert!(
                    first.starts_with(b"event: response.created"),
                    "first bytes: {:?}",
                    String::from_utf8_lossy(&first)
                );
                stream
            })
        })
        .collect();
    let open = tokio::time::timeout(OPEN_LIMIT, futures::future::join_all(tasks)).await;
    if open.is_err() {
        eprintln!("gateway stderr tail:\n{}", tail(&gateway.stderr()));
    }
    open.expect("every stream opens in time")
        .into_iter()
        .map(|r| r.expect("stream task"))
        .collect()
}

/// The number of open file descriptors of process `pid`.
fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, Iterator::count)
}

fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test` does not, and gets only a smoke run.
    let full = std::env::args().any(|a| a == "--bench");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    runtime.block_on(bench(if full { STREAMS } else { SMOKE_STREAMS }));
    // The fake upstream's pauses are still pending; do not wait for them.
    runtime.shutdown_background();
}
