//! `[gateway_tools.images]` as written.

use serde::Deserialize;

/// `[gateway_tools.images]`: an OpenAI Images API compatible backend.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImagesFile {
    /// The API's base URL (`https://api.openai.com/v1`): `POST {url}/images/generations` and
    /// `{url}/images/edits`. The operator's, so trusted: loopback and private addresses allowed.
    pub url: String,
    /// The environment variable holding the backend's key (sent as a Bearer token).
    pub api_key_env: Option<String>,
    /// The image model (`gpt-image-1`).
    pub model: String,
    /// The most seconds one image may take (its stream included). Default 180.
    pub timeout_secs: Option<u64>,
    /// The most seconds to connect. Default 10.
    pub connect_timeout_secs: Option<u64>,
    /// The largest answer read from the backend, in bytes (a whole answer, or one streamed
    /// event). Default 32 MiB.
    pub max_answer_bytes: Option<usize>,
    /// Retries of a connect error, 429 or 5xx before anything of the image was shown. Default 2.
    pub max_retries: Option<u32>,
    /// Whether the backend streams (`stream: true`), so partial images a client asks for reach
    /// it while the image is made. Default true.
    pub stream: Option<bool>,
}
