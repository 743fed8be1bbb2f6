//! The toolbridge gateway: the axum application, configuration, the upstream HTTP clients and
//! the `toolbridge` command line.
//!
//! This crate is the only one that does I/O. It holds no translation logic: requests are
//! normalised by `toolbridge-core`, translated and decoded by `toolbridge-providers`, and
//! reconstructed by the core's assembler; the handlers here only wire those steps to HTTP.

pub mod app;
pub mod auth;
pub mod cli;
pub mod compact;
pub mod config;
pub mod conversations;
pub mod error;
pub mod gateway_tools;
pub mod history;
pub mod ids;
pub mod inflight;
pub mod limits;
pub mod matrix;
pub mod models;
pub mod ops;
pub mod responses;
pub mod seal;
pub mod serve;
pub mod sessions;
pub mod stored;
pub mod time;
pub mod upstream;
pub mod usage;

pub use app::{AppState, app};
pub use config::Config;
