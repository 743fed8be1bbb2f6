//! Pure planning, translation and stream reconstruction: the heart of toolbridge.
//!
//! Everything here is a function of values. The gateway parses a Responses request into wire
//! types; [`request::normalize`] turns it into a provider-neutral [`canonical::CanonicalRequest`]
//! (validating it and recording every lossy decision as a diagnostic); a provider dialect turns
//! that into its own request. On the way back the provider turns its output into
//! [`events::UpstreamEvent`]s, and one [`assemble::Assembler`] per response turns those into
//! Responses stream events and the final response object, for streamed and non-streamed
//! requests alike.
//!
//! This crate does no I/O, reads no clock and no environment, and knows no HTTP framework: ids
//! and timestamps come in as arguments.

pub mod assemble;
pub mod canonical;
pub mod contract;
pub mod diagnostics;
pub mod error;
pub mod events;
pub mod plan;
pub mod reasoning;
pub mod repair;
pub mod request;
pub mod restore;

pub use error::Error;
