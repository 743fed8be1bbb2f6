//! The toolbridge gateway: the axum application, configuration, the upstream HTTP clients and
//! the `toolbridge` command line.
//!
//! The folders follow the architecture (see ARCHITECTURE.md):
//!
//! - `http`: the router, one router per route module, and the `/v1/responses` pipeline;
//! - `catalog`: the Codex model catalog, derived from the routes and their profiles;
//! - `upstream`: the pooled HTTP clients of the providers, retries and the send;
//! - `tools`: the tools the gateway runs itself (built-ins, MCP servers);
//! - `platform`: authentication, limits, observability, sessions, sealing and serving;
//! - `launch`: the layers put together: state, router, accept loop, reload and shutdown;
//! - `config`: the config file and environment, resolved into [`Config`];
//! - `cli`: the `toolbridge` command line; `state`: the application state; `error`: the
//!   crate's error type.
//!
//! Everything is private to the crate except the small face below, which the binary, the
//! integration tests and the benches use: build a [`Config`], an [`AppState`] and the router
//! ([`app`]), or serve a config on a listener ([`serve_on`]); the CLI's entry point; the wire
//! helpers the benches measure; the session event types the side-channel tests read.
#![warn(unreachable_pub)]

mod catalog;
pub mod cli;
pub mod config;
mod error;
mod http;
mod launch;
mod platform;
mod state;
mod tools;
mod upstream;

pub use config::Config;
pub use error::GatewayError;
pub use http::responses::{frame, parse_request};
pub use http::{app, authenticate};
pub use launch::serve_on;
pub use platform::auth::budget::labels as budget_labels;
pub use platform::auth::keys::hash_secret;
pub use platform::ops::metrics::set_enabled as set_metrics_enabled;
pub use platform::ops::spans;
pub use platform::sessions::{EventBus, MediaRef, ResponseInfo, SessionEvent, ToolInfo};
pub use platform::time::now;
pub use state::AppState;

/// The `/v1/responses` handler's admission and charge against the caller's key, for tests that
/// mount them on a minimal route beside the real middleware.
pub mod admission {
    pub use crate::http::responses::admission::{admit, charge};
}
