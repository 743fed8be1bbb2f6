//! Instructions per request of the library paths (`instructions/scenarios.rs`: `S`, `L` with
//! its tool checks cached, `L-cold` with them compiled, `SS`), counted by valgrind's callgrind:
//! repeatable within a fraction of a percent however busy the machine, unlike a time.
//!
//! `cargo bench -p toolbridge-gateway --bench instructions [-- FILTER]`. Each scenario runs this
//! same executable twice under callgrind, once doing `WARM` requests and once `WARM + N`; the
//! difference of the two totals divided by `N` is one request's instructions, with start-up,
//! fixture building and the first-request warm-up cancelled out. Knobs: `TOOLBRIDGE_CG_N`
//! (default 20), `TOOLBRIDGE_CG_WARM` (3). Results go to stdout and to
//! `$CARGO_TARGET_TMPDIR/instructions.jsonl`; the previous run's figures, when that file exists,
//! are shown beside as a ratio (after ÷ before). Without valgrind the bench says so and passes.
//!
//! Why not `gungraun`/`iai-callgrind`: both need a separately installed runner binary of the
//! exact library version, without which `cargo bench` fails; this harness needs valgrind alone.
//! The whole binary's figure (HTTP, logs, store included) is `scripts/bench-instructions`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "common/codex.rs"]
mod codex;
#[path = "instructions/scenarios.rs"]
mod scenarios;

/// Set in the child: `SCENARIO:REQUESTS`.
const CHILD_ENV: &str = "TOOLBRIDGE_CG_RUN";

fn main() {
    if let Ok(spec) = std::env::var(CHILD_ENV) {
        child(&spec);
        return;
    }
    // `cargo bench` passes `--bench`; `cargo test --all-targets` runs this without it, and the
    // smoke run of every scenario is `tests/instructions_smoke.rs` there.
    if !std::env::args().any(|a| a == "--bench") {
        println!("instructions: counted under `cargo bench` only");
        return;
    }
    let filter = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with("--"))
        .unwrap_or_default();
    let valgrind = Command::new("valgrind").arg("--version").output();
    if !valgrind.is_ok_and(|o| o.status.success()) {
        println!("instructions: skipped: valgrind is not installed");
        return;
    }
    let n: u64 = knob("TOOLBRIDGE_CG_N", 20);
    let warm: u64 = knob("TOOLBRIDGE_CG_WARM", 3);
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let results = out.join("instructions.jsonl");
    let before = previous(&results);
    let mut lines = String::new();
    println!("{:<8} {:>14} {:>10}", "scenario", "Ir/request", "÷ before");
    for name in scenarios::SCENARIOS {
        if !name.contains(filter.as_str()) {
            continue;
        }
        let a = count(&out, name, warm);
        let b = count(&out, name, warm + n);
        let per = b.saturating_sub(a) / n;
        let ratio = before.get(*name).map_or("-".to_owned(), |&old| {
            format!("{:.3}", per as f64 / old as f64)
        });
        println!("{name:<8} {per:>14} {ratio:>10}");
        lines.push_str(&format!(
            "{{\"scenario\":\"{name}\",\"n\":{n},\"Ir_per_req\":{per}}}\n"
        ));
    }
    if !lines.is_empty() {
        std::fs::write(&results, lines).expect("the results file is writable");
    }
}

fn knob(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&v| v > 0)
        .unwrap_or(default)
}

/// The figures of the last run, by scenario.
fn previous(path: &Path) -> BTreeMap<String, u64> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| {
            Some((
                v["scenario"].as_str()?.to_owned(),
                v["Ir_per_req"].as_u64()?,
            ))
        })
        .collect()
}

/// The total instructions of this executable running `requests` requests of `name` under
/// callgrind.
fn count(dir: &Path, name: &str, requests: u64) -> u64 {
    let file = dir.join(format!("cg.{name}.{requests}.out"));
    let exe = std::env::current_exe().expect("the bench knows its path");
    let status = Command::new("valgrind")
        .arg("--tool=callgrind")
        .arg(format!("--callgrind-out-file={}", file.display()))
        .arg(&exe)
        .env(CHILD_ENV, format!("{name}:{requests}"))
        .stderr(std::process::Stdio::null())
        .status()
        .expect("valgrind starts");
    assert!(status.success(), "{name} under callgrind: {status}");
    let text = std::fs::read_to_string(&file).expect("callgrind wrote its output");
    let _ = std::fs::remove_file(&file);
    text.lines()
        .find_map(|l| {
            l.strip_prefix("totals:")
                .or_else(|| l.strip_prefix("summary:"))
        })
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .expect("callgrind's output has a total")
}

/// The child: builds the fixture, then runs `requests` requests of one scenario.
fn child(spec: &str) {
    let (name, requests) = spec.split_once(':').expect("SCENARIO:REQUESTS");
    let requests: u64 = requests.parse().expect("a count");
    let fixture = scenarios::Fixture::new(&codex::codex_request());
    for _ in 0..requests {
        black_box(scenarios::run(&fixture, name));
    }
}
