//! The console's routes through a real gateway: what one tenant's requests and sessions are,
//! another tenant's key cannot see on any console page or JSON endpoint (the same 404 a
//! never-existing id gets), an admin key sees every tenant's; a page without a key goes to the
//! login form, a JSON endpoint answers 401; the login cookie works like the key; the request
//! page shows the plan's decision for each tool, the diagnostics and both bodies; the console
//! is not served unless enabled.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code fails loudly

mod common;

use std::time::Duration;

use common::Served;
use common::keyed::{self, secret};
use serde_json::{Value, json};
use toolbridge_testkit::chat::completion;
use toolbridge_testkit::{FakeUpstream, Reply};

struct Gateway {
    served: Served,
    client: reqwest::Client,
    _dir: Scratch,
}

struct Scratch(std::path::PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl Gateway {
    async fn start(upstream: &FakeUpstream, console: &str) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "toolbridge-console-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let tables = format!(
            "{console}\n[capture]\nenabled = true\n[providers.up]\nbase_url = \"{}\"\n[[routes]]\nmodel = \"*\"\nprovider = \"up\"\nupstream_model = \"up-model\"\n",
            upstream.base_url()
        );
        let store_url = format!("sqlite://{}", dir.join("store.db").display());
        Self {
            served: keyed::start("", &tables, &store_url).await,
            client: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .timeout(Duration::from_secs(30))
                .build()
                .unwrap(),
            _dir: Scratch(dir),
        }
    }

    fn url(&self, path: &str) -> String {
        self.served.url(path)
    }

    /// `GET path` as `key` (none: no key): status, body text.
    async fn get(&self, key: Option<&str>, path: &str) -> (u16, String) {
        let mut request = self.client.get(self.url(path));
        if let Some(key) = key {
            request = request.bearer_auth(secret(key));
        }
        let response = request.send().await.unwrap();
        (response.status().as_u16(), response.text().await.unwrap())
    }

    async fn get_json(&self, key: &str, path: &str) -> (u16, Value) {
        let (status, text) = self.get(Some(key), path).await;
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    /// A request by `key` in session `session`, declaring a freeform tool a Chat provider
    /// cannot take as such (the plan degrades it); the request id.
    async fn respond(&self, upstream: &FakeUpstream, key: &str, session: &str) -> String {
        let mut answer = completion(&format!("answer for {key}"), "stop");
        answer["usage"] = json!({"prompt_tokens": 1200, "completion_tokens": 40,
            "total_tokens": 1240, "prompt_tokens_details": {"cached_tokens": 1024}});
        upstream.push(Reply::json(answer));
        let response = self
            .client
            .post(self.url("/v1/responses"))
            .bearer_auth(secret(key))
            .json(&json!({
                "model": "m",
                "input": format!("question from {key}"),
                "prompt_cache_key": session,
                "tools": [{"type": "custom", "name": "apply_patch",
                           "description": "Apply a patch",
                           "format": {"type": "grammar", "syntax": "lark",
                                      "definition": "start: /.+/"}}]
            }))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 200);
        let id = response.headers()["x-request-id"]
            .to_str()
            .unwrap()
            .to_owned();
        let _ = response.text().await.unwrap();
        id
    }
}

/// The ids of the requests `key` is listed.
async fn listed(gateway: &Gateway, key: &str) -> Vec<String> {
    let (status, body) = gateway.get_json(key, "/console/api/requests").await;
    assert_eq!(status, 200, "{body}");
    body.as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap().to_owned())
        .collect()
}

/// Waits until the journal holds `ids` (an entry lands once its answer is over).
async fn journaled(gateway: &Gateway, ids: &[&String]) {
    for _ in 0..100 {
        let all = listed(gateway, "ops").await;
        if ids.iter().all(|id| all.contains(id)) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the journal never held {ids:?}");
}

/// Waits until the ledger lists `session` to `key`.
async fn ledgered(gateway: &Gateway, session: &str) {
    for _ in 0..100 {
        let (_, body) = gateway.get_json("ops", "/console/api/sessions").await;
        let found = body["sessions"]
            .as_array()
            .is_some_and(|s| s.iter().any(|s| s["session"] == session));
        if found {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the ledger never listed {session}");
}

#[tokio::test]
async fn a_tenant_sees_only_its_own_requests_and_sessions_on_every_console_route() {
    let upstream = FakeUpstream::start().await;
    let gateway = Gateway::start(
        &upstream,
        "[console]\nenabled = true\n[console.prices.\"*\"]\ninput = 2.0\ncached = 0.5\noutput = 8.0\n",
    )
    .await;
    let a1 = gateway.respond(&upstream, "a1", "thread-a").await;
    let a2 = gateway.respond(&upstream, "a2", "thread-a").await;
    let b = gateway.respond(&upstream, "b", "thread-b").await;
    journaled(&gateway, &[&a1, &a2, &b]).await;
    ledgered(&gateway, "thread-b").await;
    ledgered(&gateway, "thread-a").await;

    // Lists: a tenant's keys share its requests; another tenant's are absent; the admin's
    // list holds all.
    let team_a = listed(&gateway, "a1").await;
    assert!(team_a.contains(&a1) && team_a.contains(&a2), "{team_a:?}");
    assert!(!team_a.contains(&b));
    assert_eq!(listed(&gateway, "b").await, vec![b.clone()]);
    assert_eq!(listed(&gateway, "ops").await.len(), 3);

    // One request, as JSON and as a page: another tenant's is the same 404 as none at all.
    for path in [
        format!("/console/api/requests/{b}"),
        "/console/api/requests/req_never".to_owned(),
    ] {
        let (status, body) = gateway.get_json("a1", &path).await;
        assert_eq!(status, 404, "{path}: {body}");
        assert_eq!(body["error"]["code"], "request_not_found", "{body}");
    }
    let (status, page) = gateway
        .get(Some("a1"), &format!("/console/requests/{b}"))
        .await;
    assert_eq!(status, 404);
    assert!(!page.contains("question from b"), "{page}");
    let (status, page) = gateway.get(Some("a1"), "/console").await;
    assert_eq!(status, 200);
    assert!(page.contains(&a1) && !page.contains(&b), "{page}");

    // The admin reads b's request whole: the plan's decision, the bodies, the tokens.
    let (status, detail) = gateway
        .get_json("ops", &format!("/console/api/requests/{b}"))
        .await;
    assert_eq!(status, 200, "{detail}");
    assert_eq!(detail["tenant"], "b");
    assert_eq!(detail["provider"], "up");
    assert_eq!(detail["upstream_model"], "up-model");
    let plan = &detail["plan"][0];
    assert_eq!(plan["name"], "apply_patch");
    assert_eq!(plan["decision"], "degraded", "{detail}");
    assert!(!plan["reason"].as_str().unwrap().is_empty());
    assert_eq!(detail["tokens"]["cached"], 1024);
    assert_eq!(detail["upstream_body"]["model"], "up-model");
    assert_eq!(detail["client_request"]["input"], "question from b");
    let (_, page) = gateway
        .get(Some("ops"), &format!("/console/requests/{b}"))
        .await;
    assert!(page.contains("degraded") && page.contains(plan["reason"].as_str().unwrap()));

    // Sessions: the same rule, in the list, the page and the JSON.
    let (_, sessions) = gateway.get_json("a2", "/console/api/sessions").await;
    let names: Vec<&str> = sessions["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["session"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["thread-a"]);
    let (status, _) = gateway
        .get_json("a1", "/console/api/sessions/thread-b")
        .await;
    assert_eq!(status, 404);
    let (status, page) = gateway.get(Some("a1"), "/console/sessions/thread-b").await;
    assert_eq!(status, 404);
    assert!(!page.contains("thread-b</td>"));
    let (status, page) = gateway.get(Some("a1"), "/console/sessions").await;
    assert_eq!(status, 200);
    assert!(
        page.contains("thread-a") && !page.contains("thread-b"),
        "{page}"
    );
    let (status, report) = gateway
        .get_json("a1", "/console/api/sessions/thread-a")
        .await;
    assert_eq!(status, 200, "{report}");
    assert_eq!(report["total"]["turns"], 2);
    // 176 plain at 2.0, 1024 cached at 0.5, 40 out at 8.0, per million.
    let cost = report["turns"][0]["cost"].as_f64().unwrap();
    assert!((cost - (176.0 * 2.0 + 1024.0 * 0.5 + 40.0 * 8.0) / 1e6).abs() < 1e-12);

    // Providers: health counts only what the viewer may see.
    let (_, providers) = gateway.get_json("b", "/console/api/providers").await;
    assert_eq!(providers["providers"][0]["health"]["requests"], 1);
    assert!(
        providers["providers"][0]["matrix"]
            .as_str()
            .unwrap()
            .contains("tools:")
    );
}

#[tokio::test]
async fn without_a_key_a_page_goes_to_the_login_form_and_the_cookie_works_like_the_key() {
    let upstream = FakeUpstream::start().await;
    let gateway = Gateway::start(&upstream, "[console]\nenabled = true\n").await;
    let mine = gateway.respond(&upstream, "a1", "thread-a").await;
    journaled(&gateway, &[&mine]).await;

    let response = gateway
        .client
        .get(gateway.url("/console"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 303);
    assert_eq!(response.headers()["location"], "/console/login");
    let (status, body) = gateway.get(None, "/console/api/requests").await;
    assert_eq!(status, 401);
    assert!(body.contains("invalid_api_key"), "{body}");

    // A wrong key is refused; the right one sets a cookie that then opens the pages.
    let refused = gateway
        .client
        .post(gateway.url("/console/login"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body("key=not-a-key")
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status().as_u16(), 401);
    assert!(refused.headers().get("set-cookie").is_none());
    let login = gateway
        .client
        .post(gateway.url("/console/login"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("key={}", secret("a1")))
        .send()
        .await
        .unwrap();
    assert_eq!(login.status().as_u16(), 303);
    let cookie = login.headers()["set-cookie"].to_str().unwrap().to_owned();
    assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"));
    assert!(
        !cookie.contains(&secret("a1")),
        "the key is not in the cookie as is"
    );
    let pair = cookie.split(';').next().unwrap().to_owned();
    let page = gateway
        .client
        .get(gateway.url("/console"))
        .header("cookie", &pair)
        .send()
        .await
        .unwrap();
    assert_eq!(page.status().as_u16(), 200);
    let csp = page.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(csp.contains("default-src 'none'"));
    assert!(page.text().await.unwrap().contains(&mine));
}

#[tokio::test]
async fn the_console_is_not_served_unless_enabled() {
    let upstream = FakeUpstream::start().await;
    let gateway = Gateway::start(&upstream, "").await;
    for path in ["/console", "/console/login", "/console/api/requests"] {
        let (status, _) = gateway.get(Some("ops"), path).await;
        assert_eq!(status, 404, "{path}");
    }
}
