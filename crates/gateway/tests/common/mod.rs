//! Shared setup for the gateway's in-process tests: a fake upstream and a gateway on
//! 127.0.0.1:0 wired to it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code fails loudly
#![allow(dead_code)]

pub mod keyed;
pub mod otlp;

use std::net::SocketAddr;

use serde_json::Value;
use toolbridge_gateway::config::{Config, FileConfig};
use toolbridge_testkit::{FakeUpstream, OpenResponses};

pub struct Harness {
    pub upstream: FakeUpstream,
    pub addr: SocketAddr,
    pub client: reqwest::Client,
    pub schema: Option<OpenResponses>,
    /// The gateway's store (a temporary SQLite file), for tests that read its tables.
    pub store_url: String,
    _gateway: Served,
}

/// A gateway serving on 127.0.0.1:0, in this process; it stops when this is dropped.
pub struct Served {
    pub addr: SocketAddr,
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl Served {
    /// Starts a gateway from a config file's text, with its store at `store_url` (`none` for
    /// none). The environment names the fake upstream's key `FAKE_UPSTREAM_KEY`.
    pub async fn start(config: &str, store_url: &str) -> Self {
        let file: FileConfig = toml::from_str(config).expect("test config parses");
        let store_url = store_url.to_owned();
        let env = move |k: &str| match k {
            "TOOLBRIDGE_STORE_URL" => Some(store_url.clone()),
            "FAKE_UPSTREAM_KEY" => Some("sk-upstream-secret".to_owned()),
            "TOOLBRIDGE_LISTEN" => Some("127.0.0.1:0".to_owned()),
            _ => None,
        };
        let config = Config::from_file(file, &env).expect("test config is valid");
        let listener = tokio::net::TcpListener::bind(config.listen)
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            let served = toolbridge_gateway::serve_on(listener, config, async move {
                let _ = stopped.await;
            })
            .await;
            // A gateway that cannot start drops its listener, and its clients then see
            // "connection reset": say why.
            if let Err(e) = served {
                eprintln!("the test gateway stopped: {e}");
            }
        });
        Self { addr, _stop: stop }
    }

    /// A gateway routing every model to `upstream` (the generic preset), its store at
    /// `store_url`.
    pub async fn routing_to(upstream: &FakeUpstream, store_url: &str) -> Self {
        let text = format!(
            "[providers.up]\nbase_url = \"{}\"\npreset = \"generic\"\n[[routes]]\nmodel = \"*\"\nprovider = \"up\"\n",
            upstream.base_url()
        );
        Self::start(&text, store_url).await
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// POSTs `body` to `/v1/responses`: the status and the JSON answer (within 30 s, a safety
    /// net against a hung test, not a timing assertion).
    pub async fn post_json(&self, body: &Value) -> (u16, Value) {
        let response = tokio::time::timeout(
            std::time::Duration::from_secs(30),
            reqwest::Client::new()
                .post(self.url("/v1/responses"))
                .json(body)
                .send(),
        )
        .await
        .expect("the gateway answers in time")
        .expect("the gateway answers");
        let status = response.status().as_u16();
        (status, response.json().await.expect("a JSON answer"))
    }
}

impl Harness {
    /// A gateway routing every model to the fake upstream with `preset`.
    pub async fn with_preset(preset: &str) -> Self {
        Self::with_toml(|url| {
            format!(
                r#"
[providers.up]
base_url = "{url}"
api_key_env = "FAKE_UPSTREAM_KEY"
preset = "{preset}"

[[routes]]
model = "*"
provider = "up"
"#
            )
        })
        .await
    }

    /// A gateway like [`Self::with_preset`] whose provider has tool-call repair off: calls come
    /// back restored exactly as the model made them.
    pub async fn with_preset_unrepaired(preset: &str) -> Self {
        Self::with_toml(|url| {
            format!(
                r#"
[providers.up]
base_url = "{url}"
api_key_env = "FAKE_UPSTREAM_KEY"
preset = "{preset}"
repair = false

[[routes]]
model = "*"
provider = "up"
"#
            )
        })
        .await
    }

    /// A gateway with a config file whose text is built from the fake upstream's base URL.
    pub async fn with_toml(config: impl FnOnce(&str) -> String) -> Self {
        let upstream = FakeUpstream::start().await;
        let store_url = toolbridge_testkit::temp_store_url();
        let gateway = Served::start(&config(&upstream.base_url()), &store_url).await;
        Self {
            upstream,
            addr: gateway.addr,
            client: reqwest::Client::new(),
            schema: OpenResponses::load(),
            store_url,
            _gateway: gateway,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// POSTs a JSON body to `/v1/responses`.
    pub async fn post(&self, body: &Value) -> reqwest::Response {
        self.client
            .post(self.url("/v1/responses"))
            .json(body)
            .send()
            .await
            .expect("gateway answers")
    }

    /// POSTs and returns status and JSON body.
    pub async fn post_json(&self, body: &Value) -> (u16, Value) {
        self.post_path_json("/v1/responses", body).await
    }

    /// POSTs a JSON body to `path` and returns status and JSON body.
    pub async fn post_path_json(&self, path: &str, body: &Value) -> (u16, Value) {
        let response = self
            .client
            .post(self.url(path))
            .json(body)
            .send()
            .await
            .expect("gateway answers");
        let status = response.status().as_u16();
        let body: Value = response.json().await.expect("JSON body");
        (status, body)
    }

    /// POSTs a streamed request and returns the parsed events, after checking the stream's
    /// invariants (sequence numbers, one terminal event, last; schema when available).
    pub async fn post_stream(&self, body: &Value) -> Vec<toolbridge_testkit::sse::Event> {
        let response = self.post(body).await;
        assert_eq!(response.status().as_u16(), 200, "stream status");
        assert_eq!(
            response.headers()["content-type"].to_str().unwrap(),
            "text/event-stream"
        );
        let text = response.text().await.expect("stream body");
        let events = toolbridge_testkit::sse::parse(&text);
        check_stream(&events, self.schema.as_ref());
        events
    }

    /// Checks a response object against the Open Responses schema when it is available.
    pub fn check_response(&self, value: &Value) {
        if let Some(schema) = &self.schema {
            schema.check_response(value).unwrap_or_else(|e| {
                panic!("response violates the Open Responses schema:\n{e}\n{value:#}")
            });
        }
    }
}

/// The invariants every stream must keep.
pub fn check_stream(events: &[toolbridge_testkit::sse::Event], schema: Option<&OpenResponses>) {
    assert!(!events.is_empty(), "empty stream");
    for (i, e) in events.iter().enumerate() {
        assert_eq!(
            e.data["sequence_number"], i as u64,
            "sequence_number of event {i}"
        );
        assert_eq!(
            e.name.as_deref(),
            e.data["type"].as_str(),
            "event: line matches type"
        );
        if let Some(schema) = schema {
            schema.check_event(&e.data).unwrap_or_else(|err| {
                panic!("event {i} violates the schema:\n{err}\n{:#}", e.data)
            });
        }
    }
    let terminal: Vec<usize> = events
        .iter()
        .enumerate()
        .filter(|(_, e)| {
            matches!(
                e.data["type"].as_str(),
                Some("response.completed" | "response.failed" | "response.incomplete")
            )
        })
        .map(|(i, _)| i)
        .collect();
    assert_eq!(
        terminal,
        vec![events.len() - 1],
        "exactly one terminal event, last"
    );
    assert_eq!(events[0].data["type"], "response.created");
    assert_eq!(events[1].data["type"], "response.in_progress");
    // Every item that is done was added first, with the same id and output_index.
    let final_output = &events[events.len() - 1].data["response"]["output"];
    for e in events {
        if e.data["type"] == "response.output_item.done" {
            let index = e.data["output_index"].as_u64().unwrap() as usize;
            let id = &e.data["item"]["id"];
            let added = events.iter().any(|a| {
                a.data["type"] == "response.output_item.added"
                    && a.data["output_index"] == e.data["output_index"]
                    && &a.data["item"]["id"] == id
            });
            assert!(added, "item {id} done without added");
            assert_eq!(
                &final_output[index], &e.data["item"],
                "final output matches done item"
            );
        }
    }
}
