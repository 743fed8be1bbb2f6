//! The Responses dialect: a native Responses upstream (OpenAI, or any Responses server).
//!
//! Unlike the other dialects nothing is translated: the client's request goes upstream as sent,
//! with only the gateway's own concerns applied (`request`), and the upstream's events come back
//! as they are, with the response object's identity replaced by the gateway's (`relay`, a state
//! machine like the other dialects' decoders, but emitting Responses events, not neutral ones).
//! Unknown fields, item types and event types survive because both directions work on JSON
//! values. `response` decodes a whole answer into neutral events for the gateway's own rounds
//! (compaction). `reasoning` carries an endpoint's plaintext reasoning across turns for a
//! stateless client.

mod history;
pub mod reasoning;
pub mod relay;
pub mod request;
pub mod response;
pub mod restore;

#[cfg(test)]
mod tests;
