//! Ring 3: the real OpenAI Python SDK reads cache reads and writes from `usage`, for every preset
//! whose provider reports them, through the real `toolbridge` binary. The fake provider caches
//! by its documented rules (`toolbridge_testkit::cache`) and reports in its own fields
//! (DeepSeek's `prompt_cache_hit_tokens`, Moonshot's top-level `cached_tokens`, OpenAI's, GLM's
//! and Qwen's `prompt_tokens_details`, Anthropic's `cache_read_input_tokens` /
//! `cache_creation_input_tokens`, Gemini's `cachedContentTokenCount`, a Responses server's
//! `input_tokens_details`); the SDK must read exactly what the provider billed, turn by turn
//! (`tests/python/sdk_cache.py`: three turns, whole and streamed).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::process::Command;
use toolbridge_testkit::cache::{CacheSim, Report, Rules};
use toolbridge_testkit::dialects::{Answer, End, Usage, Wire};
use toolbridge_testkit::tempdir::TempDir;
use toolbridge_testkit::{FakeUpstream, GatewayProcess, Recorded};

const BIN: &str = env!("CARGO_BIN_EXE_toolbridge");

fn answer() -> Answer {
    Answer {
        reasoning: Vec::new(),
        text: vec!["Four.".to_owned()],
        calls: Vec::new(),
        end: End::Stop,
        usage: Usage {
            input: 10,
            output: 2,
            ..Usage::default()
        },
    }
}

/// `(preset, dialect, wire, rules, where the provider reports)`.
fn targets() -> Vec<(&'static str, &'static str, Wire, Rules, Report)> {
    let chat = Wire::Chat { think_tags: false };
    vec![
        (
            "openai",
            "chat",
            chat,
            Rules::automatic(128, 1024),
            Report::OpenAi,
        ),
        (
            "deepseek",
            "chat",
            chat,
            Rules::automatic(64, 64),
            Report::DeepSeek,
        ),
        (
            "kimi",
            "chat",
            chat,
            Rules::automatic(256, 256),
            Report::Moonshot,
        ),
        ("glm", "chat", chat, Rules::automatic(1, 1), Report::OpenAi),
        (
            "qwen",
            "chat",
            chat,
            Rules {
                automatic: Some((1, 256)),
                breakpoints: Some((1024, 20)),
            },
            Report::OpenAi,
        ),
        (
            "anthropic",
            "anthropic",
            Wire::Anthropic,
            Rules::breakpoints(),
            Report::Anthropic,
        ),
        (
            "gemini",
            "gemini",
            Wire::Gemini,
            Rules::automatic(1, 1024),
            Report::Gemini,
        ),
        (
            "deepseek-responses",
            "responses",
            Wire::Responses,
            Rules::automatic(64, 64),
            Report::Responses,
        ),
    ]
}

#[tokio::test]
async fn the_python_sdk_reads_cache_reads_and_writes_for_every_preset_that_reports_them() {
    let Some(python) = toolbridge_testkit::tools::python_with_openai() else {
        eprintln!("SKIPPED: no Python with the openai package; run scripts/test to install it");
        return;
    };
    let dir = TempDir::new("python-sdk-cache");
    for (preset, dialect, wire, rules, report) in targets() {
        let upstream = FakeUpstream::start().await;
        upstream.set_gate(Arc::new(move |r: &Recorded| {
            let streamed = r.body["stream"] == true || r.path.contains("stream");
            Some(if streamed {
                wire.stream(&answer())
            } else {
                wire.whole(&answer())
            })
        }));
        upstream.set_cache(CacheSim::new(wire, rules, report));
        let config = dir.write(
            &format!("{preset}.toml"),
            &format!(
                "[providers.up]\ndialect = \"{dialect}\"\npreset = \"{preset}\"\nbase_url = \"{}\"\napi_key_env = \"UPSTREAM_KEY\"\nmax_retries = 0\n\n[[routes]]\nmodel = \"*\"\nprovider = \"up\"\n",
                upstream.base_url()
            ),
        );
        let gateway = GatewayProcess::start(
            Path::new(BIN),
            &[
                ("TOOLBRIDGE_CONFIG", config.display().to_string()),
                ("UPSTREAM_KEY", "sk-fake".to_owned()),
            ],
        )
        .await;
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/sdk_cache.py");
        let output = tokio::time::timeout(
            Duration::from_secs(60),
            Command::new(&python)
                .arg(&script)
                .env_clear()
                .env("PATH", std::env::var_os("PATH").unwrap_or_default())
                .env("OPENAI_BASE_URL", gateway.url("/v1"))
                .env("OPENAI_API_KEY", "dummy")
                .env("PYTHONDONTWRITEBYTECODE", "1")
                .stdin(Stdio::null())
                .kill_on_drop(true)
                .output(),
        )
        .await
        .expect("the SDK script ran in time")
        .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        assert!(
            output.status.success(),
            "{preset}: {}\n{stdout}\n{stderr}\ngateway:\n{}",
            output.status,
            gateway.stderr()
        );
        let read: Value = stdout
            .lines()
            .find_map(|l| l.strip_prefix("SDK_SUMMARY "))
            .map(|json| serde_json::from_str(json).unwrap())
            .unwrap_or_else(|| panic!("{preset}: no SDK_SUMMARY:\n{stdout}\n{stderr}"));
        let served = upstream.cache().unwrap().served;
        assert_eq!(served.len(), 3, "{preset}");
        for (n, (usage, s)) in read.as_array().unwrap().iter().zip(&served).enumerate() {
            assert_eq!(
                (
                    usage["input_tokens"].as_u64(),
                    usage["cached_tokens"].as_u64(),
                    usage["cache_write_tokens"].as_u64()
                ),
                (Some(s.input), Some(s.read), Some(s.write)),
                "{preset}: turn {n}"
            );
        }
        // The later turns read what the first wrote.
        assert!(
            served[1].read > 0 && served[2].read >= served[1].read,
            "{preset}: {served:?}"
        );
        gateway.kill().await;
    }
}
