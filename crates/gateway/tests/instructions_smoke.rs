//! The smoke run of the instruction benchmarks (`benches/instructions.rs`): every scenario's
//! library path runs once here, without valgrind, and its answer is checked, so a bench that
//! no longer measures what it says fails in `cargo test`, not only in `cargo bench`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../benches/common/codex.rs"]
mod codex;
#[path = "../benches/instructions/scenarios.rs"]
mod scenarios;

use scenarios::{Fixture, SCENARIOS, TEXT, run};

#[test]
fn every_scenario_answers_as_the_harness_expects() {
    let fixture = Fixture::new(&codex::codex_request());
    for name in SCENARIOS {
        let outcome = run(&fixture, name);
        assert!(outcome.upstream_bytes > 0, "{name}: an upstream body");
        let answer = String::from_utf8(outcome.answer).expect("UTF-8");
        if *name == "SS" {
            assert!(
                answer.contains("event: response.completed"),
                "{name}: {answer}"
            );
            assert!(
                answer.contains("w01") && answer.contains("w47"),
                "{name}: {answer}"
            );
        } else {
            let body: serde_json::Value = serde_json::from_str(&answer).expect("JSON");
            assert_eq!(body["status"], "completed", "{name}: {answer}");
            assert_eq!(body["output"][0]["content"][0]["text"], TEXT, "{name}");
        }
    }
    // The L request is the big one: its upstream body carries the Codex prompt and tools.
    assert!(run(&fixture, "L").upstream_bytes > 20_000);
}

#[test]
fn the_warm_scenario_takes_its_tool_checks_from_the_cache() {
    let fixture = Fixture::new(&codex::codex_request());
    run(&fixture, "L");
    run(&fixture, "L");
    run(&fixture, "L-cold");
    let (hits, misses) = fixture.cache.stats();
    assert_eq!(
        (hits, misses),
        (1, 1),
        "L-cold must not use the shared cache"
    );
}
