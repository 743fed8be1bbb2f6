//! The Gemini generateContent dialect: translation only (request building, stream and whole
//! answer decoding, error mapping); the HTTP calls live with the gateway.

pub mod errors;
pub mod request;
pub mod response;
pub mod schema;
pub mod stream;
mod tool_result;

#[cfg(test)]
mod tests;
