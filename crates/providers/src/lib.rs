//! Provider dialects and their presets.
//!
//! A dialect turns a [`toolbridge_core::canonical::CanonicalRequest`] into its own request, and
//! its own output (whole or streamed) into [`toolbridge_core::events::UpstreamEvent`]s. Each
//! dialect lives in a folder with the same shape: `request` (translation), `stream` (chunk
//! decoding), `response` (non-streamed decoding) and `errors` (upstream error bodies).
//!
//! Provider differences are data: a [`profile::Profile`] says what a provider accepts, and the
//! presets in [`profile`] are the profiles of the providers we know. This crate does no I/O.

pub mod anthropic;
pub mod chat;
mod degraded;
pub mod error;
pub mod gemini;
pub mod profile;
pub mod responses;

pub use error::{Error, UpstreamError};
