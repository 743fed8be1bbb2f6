//! Test kit: a real local fake upstream speaking provider wire formats on 127.0.0.1:0, helpers
//! that build real Chat Completions payloads, an SSE reader, Open Responses schema checks, and a
//! `toolbridge serve` child process for tests of the real binary.
//!
//! It is a library for tests of every crate; nothing in it is used by the gateway itself.

// Test code: a failed expectation should stop the test loudly.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

pub mod chat;
pub mod process;
pub mod schema;
pub mod sse;
pub mod tools;
pub mod upstream;

pub use process::GatewayProcess;
pub use schema::OpenResponses;
pub use upstream::{FakeUpstream, Recorded, Reply};
