//! OpenAI's error body: `{"error":{"message","type","param","code"}}`.

use serde::{Deserialize, Serialize};

/// The envelope every error response uses.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorBody {
    pub error: ErrorObject,
}

/// The error object inside [`ErrorBody`]. `param` and `code` are always present (possibly null),
/// as OpenAI sends them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorObject {
    pub message: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub param: Option<String>,
    pub code: Option<String>,
}
