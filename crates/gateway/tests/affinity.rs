//! Ring 3: a session keeps its cache across gateway processes. Two real `toolbridge serve`
//! processes share one PostgreSQL store (a chain continued on the other process works) and one
//! provider with three keys (accounts, each with a cache of its own). Every request of a
//! session — whichever process takes it — goes out with the same key, chosen from the
//! session's `prompt_cache_key`, or for a `previous_response_id` chain without one from its
//! first stored item; sessions spread over the keys. A route's fallback is taken only
//! while its first choice fails, and the response says so (`upstream_fallback`); once the first
//! choice answers again the session is back on it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code fails loudly

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::{Value, json};
use toolbridge_testkit::tempdir::TempDir;
use toolbridge_testkit::{FakeUpstream, GatewayProcess, Recorded, Reply};

const KEYS: [&str; 3] = ["sk-account-a", "sk-account-b", "sk-account-c"];

fn answer() -> Reply {
    Reply::json(
        json!({"id": "chatcmpl-1", "object": "chat.completion", "created": 0,
        "model": "m", "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"},
        "finish_reason": "stop"}], "usage": {"prompt_tokens": 3, "completion_tokens": 1,
        "total_tokens": 4}}),
    )
}

async fn gateway(dir: &TempDir, name: &str, config: &str, store_url: &str) -> GatewayProcess {
    let path = dir.write(&format!("{name}.toml"), config);
    GatewayProcess::start(
        Path::new(env!("CARGO_BIN_EXE_toolbridge")),
        &[
            ("TOOLBRIDGE_CONFIG", path.display().to_string()),
            ("TOOLBRIDGE_STORE_URL", store_url.to_owned()),
            ("KEY_A", KEYS[0].to_owned()),
            ("KEY_B", KEYS[1].to_owned()),
            ("KEY_C", KEYS[2].to_owned()),
            ("BACKUP_KEY", "sk-backup".to_owned()),
        ],
    )
    .await
}

fn config(main: &FakeUpstream, backup: &FakeUpstream) -> String {
    format!(
        r#"
[providers.main]
base_url = "{}"
api_key_env = "KEY_A"
api_key_envs = ["KEY_B", "KEY_C"]
max_retries = 0

[providers.backup]
base_url = "{}"
api_key_env = "BACKUP_KEY"
max_retries = 0

[[routes]]
model = "*"
provider = "main"
fallbacks = [{{ provider = "backup" }}]
"#,
        main.base_url(),
        backup.base_url()
    )
}

fn bearer(r: &Recorded) -> String {
    r.headers["authorization"]
        .to_str()
        .unwrap()
        .trim_start_matches("Bearer ")
        .to_owned()
}

async fn post(client: &reqwest::Client, gateway: &GatewayProcess, body: &Value) -> Value {
    let response = client
        .post(gateway.url("/v1/responses"))
        .json(body)
        .send()
        .await
        .unwrap();
    let status = response.status();
    let body: Value = response.json().await.unwrap();
    assert_eq!(status, 200, "{body:#}");
    body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_keeps_its_key_across_processes_and_falls_back_only_while_its_first_choice_fails()
{
    let Some(db) = toolbridge_testkit::postgres::fresh_database("affinity").await else {
        return;
    };
    let main = FakeUpstream::start().await;
    let backup = FakeUpstream::start().await;
    let down = Arc::new(AtomicBool::new(false));
    let gate_down = down.clone();
    main.set_gate(Arc::new(move |_| {
        Some(if gate_down.load(Ordering::SeqCst) {
            Reply::error(503, json!({"error": {"message": "overloaded"}}))
        } else {
            answer()
        })
    }));
    backup.set_fallback(answer());
    let dir = TempDir::new("affinity");
    let text = config(&main, &backup);
    let gateways = [
        gateway(&dir, "one", &text, &db.url).await,
        gateway(&dir, "two", &text, &db.url).await,
    ];
    let client = reqwest::Client::new();

    // Eight sessions of three turns each, every turn on the other process, chained by
    // `previous_response_id` through the shared store.
    let mut keys_of: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for s in 0..8 {
        let session = format!("thread-{s}");
        let mut previous: Option<String> = None;
        for turn in 0..3 {
            let before = main.requests().len();
            let mut body = json!({"model": "m", "input": format!("turn {turn}"),
                "prompt_cache_key": session, "store": true});
            if let Some(id) = &previous {
                body["previous_response_id"] = json!(id);
            }
            let response = post(&client, &gateways[(s + turn) % 2], &body).await;
            previous = Some(response["id"].as_str().unwrap().to_owned());
            let sent = &main.requests()[before];
            keys_of
                .entry(session.clone())
                .or_default()
                .insert(bearer(sent));
        }
    }
    // Chains without a `prompt_cache_key` (an SDK's `previous_response_id` turns): each is one
    // session, named by its first stored item, from its first turn on.
    for c in 0..4 {
        let session = format!("chain-{c}");
        let mut previous: Option<String> = None;
        for turn in 0..3 {
            let before = main.requests().len();
            let mut body = json!({"model": "m", "input": format!("chain {c} turn {turn}"),
                "store": true});
            if let Some(id) = &previous {
                body["previous_response_id"] = json!(id);
            }
            let response = post(&client, &gateways[(c + turn) % 2], &body).await;
            previous = Some(response["id"].as_str().unwrap().to_owned());
            let sent = &main.requests()[before];
            keys_of
                .entry(session.clone())
                .or_default()
                .insert(bearer(sent));
        }
    }
    for (session, keys) in &keys_of {
        assert_eq!(keys.len(), 1, "{session} used {keys:?}");
    }
    let used: BTreeSet<&String> = keys_of.values().flatten().collect();
    assert!(used.len() >= 2, "twelve sessions all on {used:?}");
    assert!(used.iter().all(|k| KEYS.contains(&k.as_str())), "{used:?}");
    assert!(
        backup.requests().is_empty(),
        "no fallback while the first choice answers"
    );

    // The first choice fails: the fallback answers, and the response says why.
    down.store(true, Ordering::SeqCst);
    let body = json!({"model": "m", "input": "hi", "prompt_cache_key": "thread-0"});
    let response = post(&client, &gateways[0], &body).await;
    let codes: Vec<&str> = response["toolbridge_diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|d| d["code"].as_str())
        .collect();
    assert!(codes.contains(&"upstream_fallback"), "{response:#}");
    assert_eq!(backup.requests().len(), 1);
    // Recovered: the session is back on its first choice, with its own key.
    down.store(false, Ordering::SeqCst);
    let before = main.requests().len();
    let response = post(&client, &gateways[1], &body).await;
    assert!(
        response["toolbridge_diagnostics"]
            .as_array()
            .is_none_or(|d| d.iter().all(|d| d["code"] != "upstream_fallback")),
        "{response:#}"
    );
    assert_eq!(backup.requests().len(), 1);
    let sent = &main.requests()[before];
    assert_eq!(
        BTreeSet::from([bearer(sent)]),
        keys_of["thread-0"],
        "back on its own key"
    );
    for g in gateways {
        g.kill().await;
    }
    db.remove().await;
}
