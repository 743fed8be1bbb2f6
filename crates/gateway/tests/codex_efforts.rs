//! Ring 3: the reasoning efforts of the real Codex CLI 0.171.0 (`model_reasoning_effort`: its
//! catalog offers `max` and `ultra` besides `none`…`xhigh`) reach a GLM and a DeepSeek preset as
//! the preset's effort table says: never a 400 on an effort the provider lacks, and DeepSeek's
//! own top level (`max`) for the efforts above `high`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code fails loudly

use std::path::Path;

use serde_json::json;
use toolbridge_providers::profile::Profile;
use toolbridge_testkit::chat::{chunk, usage_chunk};
use toolbridge_testkit::codex::CodexExec;
use toolbridge_testkit::{FakeUpstream, GatewayProcess, Reply};

fn done() -> Reply {
    Reply::sse(vec![
        chunk(json!({"role": "assistant", "content": "Done."}), None),
        chunk(json!({}), Some("stop")),
        usage_chunk(100, 10),
    ])
}

async fn efforts_reach(preset: &str) {
    let Some(codex) = toolbridge_testkit::tools::codex_0171() else {
        return;
    };
    let scratch = std::env::temp_dir().join(format!(
        "toolbridge-codex-efforts-{preset}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch).unwrap();
    let upstream = FakeUpstream::start().await;
    upstream.set_fallback(done());
    let config = scratch.join("toolbridge.toml");
    std::fs::write(
        &config,
        format!(
            "[providers.up]\nbase_url = \"{}\"\napi_key_env = \"UPSTREAM_KEY\"\npreset = \"{preset}\"\nmax_retries = 0\n\n[[routes]]\nmodel = \"*\"\nprovider = \"up\"\nupstream_model = \"upstream-model\"\n",
            upstream.base_url()
        ),
    )
    .unwrap();
    let gateway = GatewayProcess::start(
        Path::new(env!("CARGO_BIN_EXE_toolbridge")),
        &[
            ("TOOLBRIDGE_CONFIG", config.display().to_string()),
            ("UPSTREAM_KEY", "sk-fake".to_owned()),
        ],
    )
    .await;
    let profile = Profile::preset(preset).unwrap();
    for effort in ["low", "xhigh", "max", "ultra"] {
        let mut exec = CodexExec::new(&codex, &scratch.join(effort), gateway.url("/v1"));
        exec.top = format!("model_reasoning_effort = \"{effort}\"");
        let run = exec.run("Say done.").await;
        assert_eq!(
            run.last_message.trim(),
            "Done.",
            "{preset} {effort}: {}\n{}",
            run.stderr,
            gateway.stderr()
        );
        let sent = upstream.last_body();
        let row = profile.effort(effort).unwrap();
        for (field, value) in &row.fields {
            assert_eq!(
                &sent[field], value,
                "{preset} {effort}: {field} in {sent:#}"
            );
        }
    }
    gateway.kill().await;
    let _ = std::fs::remove_dir_all(&scratch);
}

/// One Codex at a time: each run is a process tree of its own.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[tokio::test]
async fn codex_efforts_reach_glm_as_its_table_says() {
    let _one = ONE_AT_A_TIME.lock().await;
    efforts_reach("glm").await;
}

#[tokio::test]
async fn codex_efforts_reach_deepseek_as_its_table_says() {
    let _one = ONE_AT_A_TIME.lock().await;
    efforts_reach("deepseek").await;
    // DeepSeek's top level for the efforts above `high`.
    let deepseek = Profile::preset("deepseek").unwrap();
    assert_eq!(
        deepseek.effort("ultra").unwrap().fields["reasoning_effort"],
        "max"
    );
}
