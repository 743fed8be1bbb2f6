//! Serde models of the wire protocols toolbridge speaks.
//!
//! This crate owns the shapes of JSON that cross a process boundary: the OpenAI Responses API
//! that clients send and receive ([`responses`]), the Chat Completions dialect that most
//! providers speak ([`chat`]), and OpenAI's error body ([`error`]). [`inbound`] reads the lenient
//! inbound Responses shapes and explains their errors (the path to the leaf field, plain words).
//!
//! It deliberately holds no logic and does no I/O. Every inbound enum has a catch-all variant and
//! every inbound struct keeps unknown fields in an `extra` map, so a new item type or field from a
//! client or provider survives a round trip instead of breaking parsing.

pub mod anthropic;
pub mod chat;
pub mod error;
pub mod gemini;
pub mod inbound;
pub mod lru;
pub mod raw;
pub mod responses;
pub mod search;

pub use raw::RawJson;
