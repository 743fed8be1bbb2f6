//! The HTTP exchange with an OpenAI Images API compatible backend: one pooled client, the
//! request body from the declared options and the model's arguments, a whole answer
//! (`{"data":[{"b64_json","revised_prompt"}]}`) or a stream (`image_generation.partial_image`
//! events, then `image_generation.completed`; `image_edit.*` for an edit), bounded in time and
//! size, retried only before anything of the image was shown.
//!
//! Not here: what the model and the client see of the outcome (the parent module).

use std::time::Duration;

use base64::Engine;
use bytes::Bytes;
use futures::StreamExt;
use serde_json::{Map, Value, json};

use super::{ImageArgs, ImageOptions, ImageRun, ImagesFile, Partial, fixed};

/// A configured images backend, built once at start.
#[derive(Debug)]
pub(crate) struct ImagesBackend {
    client: reqwest::Client,
    base_url: String,
    api_key: Option<String>,
    pub(crate) model: String,
    pub(crate) timeout: Duration,
    max_answer_bytes: usize,
    max_retries: u32,
    stream: bool,
}

/// What a failed exchange says: OpenAI's error `type`, a stable code and a message.
struct Failure {
    kind: &'static str,
    code: &'static str,
    message: String,
    /// Worth another try (nothing was shown yet).
    retry: bool,
}

impl Failure {
    fn unavailable(message: impl Into<String>, retry: bool) -> Self {
        Self {
            kind: "server_error",
            code: "tool_unavailable",
            message: message.into(),
            retry,
        }
    }
}

/// The image an exchange made.
struct Made {
    b64: String,
    revised_prompt: Option<String>,
    /// The options the backend says it used.
    used: Map<String, Value>,
}

impl ImagesBackend {
    /// Builds the backend `file` names; `env` reads the key variable.
    pub(crate) fn build(
        file: &ImagesFile,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, String> {
        let url = url::Url::parse(&file.url)
            .map_err(|e| format!("gateway_tools.images.url: `{}`: {e}", file.url))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(format!(
                "gateway_tools.images.url: `{}` is not an http(s) URL",
                file.url
            ));
        }
        if file.model.trim().is_empty() {
            return Err("gateway_tools.images.model: must name the image model".to_owned());
        }
        let api_key =
            match &file.api_key_env {
                Some(var) => Some(env(var).filter(|k| !k.is_empty()).ok_or_else(|| {
                    format!("gateway_tools.images.api_key_env: `{var}` is not set")
                })?),
                None => None,
            };
        let secs = |v: Option<u64>, d: u64| Duration::from_secs(v.unwrap_or(d).max(1));
        let timeout = secs(file.timeout_secs, 180);
        let client = reqwest::Client::builder()
            .connect_timeout(secs(file.connect_timeout_secs, 10))
            .read_timeout(timeout)
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("toolbridge/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| format!("gateway_tools.images: the HTTP client cannot be built: {e}"))?;
        Ok(Self {
            client,
            base_url: file.url.trim_end_matches('/').to_owned(),
            api_key,
            model: file.model.clone(),
            timeout,
            max_answer_bytes: file.max_answer_bytes.unwrap_or(32 * 1024 * 1024),
            max_retries: file.max_retries.unwrap_or(2),
            stream: file.stream.unwrap_or(true),
        })
    }

    /// The backend's base URL (the operator's; it carries no key).
    pub(crate) fn base_url(&self) -> &str {
        &self.base_url
    }

    /// Whether a key is sent.
    pub(crate) fn has_key(&self) -> bool {
        self.api_key.is_some()
    }

    /// Makes one image (`id`: the item's id, for the model's text) within `timeout`; each
    /// partial image the backend streams goes to `progress` as it comes. `input` is the image
    /// to edit (base64), when the call asked for one.
    pub(crate) async fn run(
        &self,
        id: &str,
        options: &ImageOptions,
        args: &ImageArgs,
        input: Option<&str>,
        timeout: Duration,
        progress: &(dyn Fn(Partial) + Send + Sync),
    ) -> ImageRun {
        let mut item = options.item(args);
        let exchange = self.exchange(options, args, input, progress);
        let outcome = match tokio::time::timeout(timeout.min(self.timeout), exchange).await {
            Ok(outcome) => outcome,
            Err(_) => Err(Failure::unavailable(
                format!(
                    "the images backend did not finish within {} s",
                    timeout.min(self.timeout).as_secs()
                ),
                false,
            )),
        };
        match outcome {
            Ok(made) => {
                let text = |key: &str| {
                    made.used
                        .get(key)
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                };
                item.size = text("size").or(item.size);
                item.quality = text("quality").or(item.quality);
                item.background = text("background").or(item.background);
                item.output_format = text("output_format").or(item.output_format);
                item.revised_prompt = made.revised_prompt.or_else(|| Some(args.prompt.clone()));
                item.result = Some(made.b64);
                ImageRun::made(id, item)
            }
            Err(f) => ImageRun::failed(item, f.kind, f.code, &f.message),
        }
    }

    /// The request, retried while nothing was shown, and its answer read.
    async fn exchange(
        &self,
        options: &ImageOptions,
        args: &ImageArgs,
        input: Option<&str>,
        progress: &(dyn Fn(Partial) + Send + Sync),
    ) -> Result<Made, Failure> {
        let stream = self.stream && options.partial_images > 0;
        let (path, body) = self.body(options, args, input, stream);
        let body = Bytes::from(body.to_string());
        let mut attempt = 0;
        loop {
            let sent = self.send(path, body.clone(), stream).await;
            let response = match sent {
                Ok(response) => response,
                Err(f) if f.retry && attempt < self.max_retries => {
                    let wait = Duration::from_millis(250u64 << attempt.min(5));
                    tracing::info!(
                        attempt = attempt + 1,
                        code = f.code,
                        "retrying the images backend"
                    );
                    tokio::time::sleep(wait).await;
                    attempt += 1;
                    continue;
                }
                Err(f) => return Err(f),
            };
            // A backend asked for a stream may answer with plain JSON (it does not stream, or
            // not for this model): the final image is then read from it, with no partials.
            let streamed = stream && is_event_stream(&response);
            return if streamed {
                self.read_stream(response, progress).await
            } else {
                self.read_whole(response).await
            };
        }
    }

    /// The endpoint and JSON body of one call.
    fn body(
        &self,
        options: &ImageOptions,
        args: &ImageArgs,
        input: Option<&str>,
        stream: bool,
    ) -> (&'static str, Value) {
        let mut body = Map::new();
        body.insert("model".into(), json!(self.model));
        body.insert("prompt".into(), json!(args.prompt));
        body.insert("n".into(), json!(1));
        let chosen = [
            ("size", fixed(&options.size).or_else(|| args.size.clone())),
            (
                "quality",
                fixed(&options.quality).or_else(|| args.quality.clone()),
            ),
            (
                "background",
                fixed(&options.background).or_else(|| args.background.clone()),
            ),
            ("output_format", options.output_format.clone()),
            ("moderation", options.moderation.clone()),
        ];
        for (key, value) in chosen {
            if let Some(value) = value.filter(|v| v != "auto" || key == "moderation") {
                body.insert(key.into(), json!(value));
            }
        }
        if let Some(c) = options.output_compression {
            body.insert("output_compression".into(), json!(c));
        }
        if stream {
            body.insert("stream".into(), json!(true));
            body.insert("partial_images".into(), json!(options.partial_images));
        }
        let path = match input {
            Some(b64) => {
                body.insert(
                    "images".into(),
                    json!([{"image_url": format!("data:image/png;base64,{b64}")}]),
                );
                if let Some(f) = &options.input_fidelity {
                    body.insert("input_fidelity".into(), json!(f));
                }
                "/images/edits"
            }
            None => "/images/generations",
        };
        (path, Value::Object(body))
    }

    /// One POST; a non-2xx answer is a failure (moderation refusals told apart).
    async fn send(
        &self,
        path: &str,
        body: Bytes,
        stream: bool,
    ) -> Result<reqwest::Response, Failure> {
        let mut request = self
            .client
            .post(format!("{}{path}", self.base_url))
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body);
        if stream {
            request = request.header(reqwest::header::ACCEPT, "text/event-stream");
        }
        if let Some(key) = &self.api_key {
            request = request.bearer_auth(key);
        }
        let response = request.send().await.map_err(|e| {
            Failure::unavailable(
                format!(
                    "the images backend cannot be reached: {}",
                    crate::upstream::without_url(&e)
                ),
                true,
            )
        })?;
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let body = crate::upstream::read_capped(response, 64 * 1024)
            .await
            .unwrap_or_default();
        let error: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        Err(http_failure(status.as_u16(), &error["error"]))
    }

    async fn read_whole(&self, response: reqwest::Response) -> Result<Made, Failure> {
        let body = crate::upstream::read_capped(response, self.max_answer_bytes)
            .await
            .map_err(|e| {
                Failure::unavailable(format!("the images backend's answer: {e}"), false)
            })?;
        let answer: Value = serde_json::from_slice(&body).map_err(|e| {
            Failure::unavailable(
                format!("the images backend's answer is not JSON: {e}"),
                false,
            )
        })?;
        let image = &answer["data"][0];
        let mut used = answer.as_object().cloned().unwrap_or_default();
        used.remove("data");
        made(
            image["b64_json"].as_str(),
            image["revised_prompt"].as_str(),
            used,
        )
    }

    /// A streamed answer: each partial to `progress`, the completed event's image kept.
    async fn read_stream(
        &self,
        response: reqwest::Response,
        progress: &(dyn Fn(Partial) + Send + Sync),
    ) -> Result<Made, Failure> {
        let limit = self.max_answer_bytes as u64;
        let mut seen = 0u64;
        let bytes = crate::upstream::bounded_bytes(response).map(move |chunk| {
            let chunk = chunk?;
            seen += chunk.len() as u64;
            if seen > limit {
                return Err(crate::upstream::StreamError::TooLong);
            }
            Ok(chunk)
        });
        let mut events = sse_stream::SseByteStream::new(Box::pin(bytes));
        while let Some(event) = events.next().await {
            let event = event.map_err(|e| {
                Failure::unavailable(format!("the images backend's stream broke: {e}"), false)
            })?;
            let Some(data) = event.data.filter(|d| !d.trim().is_empty()) else {
                continue;
            };
            let data: Value = serde_json::from_str(&data).map_err(|e| {
                Failure::unavailable(
                    format!("the images backend sent an event that is not JSON: {e}"),
                    false,
                )
            })?;
            let kind = data["type"]
                .as_str()
                .or(event.event.as_deref())
                .unwrap_or_default();
            if data.get("error").is_some_and(|e| !e.is_null()) || kind == "error" {
                let error = data.get("error").unwrap_or(&data);
                return Err(http_failure(400, error));
            }
            if kind.ends_with(".partial_image") {
                if let Some(b64) = data["b64_json"].as_str() {
                    progress(Partial {
                        index: data["partial_image_index"].as_u64().unwrap_or(0) as u32,
                        b64: b64.to_owned(),
                    });
                }
            } else if kind.ends_with(".completed") {
                let mut used = data.as_object().cloned().unwrap_or_default();
                used.remove("b64_json");
                return made(
                    data["b64_json"].as_str(),
                    data["revised_prompt"].as_str(),
                    used,
                );
            }
        }
        Err(Failure::unavailable(
            "the images backend's stream ended before the image was complete",
            false,
        ))
    }
}

/// The image of an answer, checked to be base64.
/// The answer is a server-sent event stream (its content type says so).
fn is_event_stream(response: &reqwest::Response) -> bool {
    response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with("text/event-stream"))
}

fn made(
    b64: Option<&str>,
    revised: Option<&str>,
    used: Map<String, Value>,
) -> Result<Made, Failure> {
    let b64 = b64.filter(|b| !b.is_empty()).ok_or_else(|| {
        Failure::unavailable("the images backend answered without an image", false)
    })?;
    if base64::engine::general_purpose::STANDARD
        .decode(b64)
        .is_err()
    {
        return Err(Failure::unavailable(
            "the images backend's image is not base64",
            false,
        ));
    }
    Ok(Made {
        b64: b64.to_owned(),
        revised_prompt: revised.map(str::to_owned),
        used,
    })
}

/// A backend's error answer: a moderation refusal, or the backend unavailable (retried on
/// 429 and 5xx).
fn http_failure(status: u16, error: &Value) -> Failure {
    let message: String = error["message"]
        .as_str()
        .unwrap_or("no message")
        .chars()
        .take(300)
        .collect();
    let code = error["code"].as_str().unwrap_or_default();
    if code == "moderation_blocked" || code == "content_policy_violation" {
        return Failure {
            kind: "image_generation_user_error",
            code: "moderation_blocked",
            message: format!("the images backend refused the prompt: {message}"),
            retry: false,
        };
    }
    Failure::unavailable(
        format!("the images backend answered {status}: {message}"),
        status == 429 || status >= 500,
    )
}
