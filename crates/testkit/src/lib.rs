//! Test kit: a real local fake upstream speaking provider wire formats on 127.0.0.1:0 (with a
//! prompt cache that follows each provider's rules, `cache`), helpers
//! that build real Chat Completions payloads, a fake OpenAI Images API, an SSE reader, Open Responses schema checks, a
//! `toolbridge serve` child process for tests of the real binary, the TCP proxies and balancer
//! of chaos tests (`chaos`), and the fuzz targets' runner and generators (`fuzz`).
//!
//! It is a library for tests of every crate; nothing in it is used by the gateway itself.

// Test code: a failed expectation should stop the test loudly.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

pub mod cache;
pub mod chaos;
pub mod chat;
pub mod codex;
pub mod dialects;
pub mod fuzz;
pub mod images;
pub mod mcp;
pub mod postgres;
pub mod process;
pub mod schema;
pub mod sse;
pub mod tempdir;
pub mod tools;
pub mod upstream;

pub use process::GatewayProcess;
pub use schema::OpenResponses;

/// A fresh SQLite store URL in the temporary directory, unique per call.
pub fn temp_store_url() -> String {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let dir = std::env::temp_dir().join("toolbridge-test-stores");
    let _ = std::fs::create_dir_all(&dir);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let path = dir.join(format!("{}-{n}-{nanos}.db", std::process::id()));
    format!("sqlite://{}", path.display())
}
pub use upstream::{FakeUpstream, Recorded, Reply};
