//! The Responses dialect: a native Responses upstream (OpenAI, or any Responses server).
//!
//! The request is the client's own, with only the gateway's own concerns applied (`request`,
//! `history`); the answer is decoded into neutral events like every dialect's (`stream`), most
//! of it carried as it came ([`toolbridge_core::events::UpstreamEvent::Relayed`]) so that
//! unknown fields, item types and event types survive, and the calls the gateway acts on
//! decoded. `reasoning` carries an endpoint's plaintext reasoning across turns for a stateless
//! client.

mod history;
pub mod reasoning;
pub mod request;
pub mod stream;

#[cfg(test)]
mod tests;
