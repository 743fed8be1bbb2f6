//! A fake OpenAI Images API on 127.0.0.1:0: `POST /v1/images/generations` and
//! `/v1/images/edits` answer with a real PNG, whole (`{"data":[{"b64_json","revised_prompt"}]}`)
//! or, with `stream: true` and `partial_images`, as OpenAI streams it (one
//! `image_generation.partial_image` event per partial, then `image_generation.completed`;
//! `image_edit.*` for an edit). It can be told to draw a large image, to fail (500) or to refuse the prompt (400
//! `moderation_blocked`), and records every request.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use base64::Engine;
use serde_json::{Value, json};

/// A real 2×2 PNG (RGBA: red, green, blue, white), the image every answer carries.
pub const PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x02, 0x08, 0x06, 0x00, 0x00, 0x00, 0x72, 0xb6, 0x0d,
    0x24, 0x00, 0x00, 0x00, 0x12, 0x49, 0x44, 0x41, 0x54, 0x78, 0xda, 0x63, 0xf8, 0xcf, 0xc0, 0xf0,
    0x1f, 0x0c, 0x81, 0x34, 0x18, 0x00, 0x00, 0x49, 0xc8, 0x09, 0xf7, 0x03, 0xd9, 0x64, 0xf1, 0x00,
    0x00, 0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
];

/// The base64 of [`PNG`].
pub fn png_b64() -> String {
    base64::engine::general_purpose::STANDARD.encode(PNG)
}

/// The base64 of partial image `i`: the PNG with `i` bytes appended after its end (still a
/// PNG to any decoder, and told apart from the final image and the other partials).
pub fn partial_b64(i: u64) -> String {
    let mut bytes = PNG.to_vec();
    bytes.extend(std::iter::repeat_n(0u8, (i + 1) as usize));
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Bytes a large image carries after the PNG's end (still a PNG to any decoder).
pub const LARGE_EXTRA: usize = 64 * 1024;

/// The base64 of the large image [`Behaviour::DrawLarge`] answers with: [`PNG`] and
/// [`LARGE_EXTRA`] zero bytes after its end, the size of a real image's answer.
pub fn large_png_b64() -> String {
    let mut bytes = PNG.to_vec();
    bytes.extend(std::iter::repeat_n(0u8, LARGE_EXTRA));
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// How the fake answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Behaviour {
    /// The image (and its partials when streamed).
    Draw,
    /// The large image ([`large_png_b64`]) in place of the small one.
    DrawLarge,
    /// The image as plain JSON even when a stream was asked for (a backend that does not
    /// stream).
    DrawWhole,
    /// 500 with OpenAI's error body.
    Fail,
    /// 400 `moderation_blocked`.
    Refuse,
}

#[derive(Debug)]
struct Inner {
    behaviour: Behaviour,
    requests: Vec<(String, HeaderMap, Value)>,
}

/// The fake Images API; it stops when dropped.
pub struct FakeImages {
    addr: SocketAddr,
    inner: Arc<Mutex<Inner>>,
    task: tokio::task::JoinHandle<()>,
}

/// The revised prompt the fake says it used for `prompt`.
pub fn revised(prompt: &str) -> String {
    format!("{prompt}, in soft watercolour")
}

impl FakeImages {
    /// Starts the fake on 127.0.0.1:0, drawing.
    pub async fn start() -> Self {
        let inner = Arc::new(Mutex::new(Inner {
            behaviour: Behaviour::Draw,
            requests: Vec::new(),
        }));
        let app = Router::new()
            .route("/v1/images/generations", post(handle))
            .route("/v1/images/edits", post(handle))
            .with_state(inner.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local addr");
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self { addr, inner, task }
    }

    /// The base URL a config names (`http://127.0.0.1:PORT/v1`).
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    pub fn set(&self, behaviour: Behaviour) {
        self.lock().behaviour = behaviour;
    }

    /// Every request so far: path, headers, JSON body.
    pub fn requests(&self) -> Vec<(String, HeaderMap, Value)> {
        self.lock().requests.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for FakeImages {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn handle(
    State(inner): State<Arc<Mutex<Inner>>>,
    uri: Uri,
    headers: HeaderMap,
    body: String,
) -> Response {
    let body: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    let behaviour = {
        let mut inner = inner.lock().unwrap_or_else(|e| e.into_inner());
        inner
            .requests
            .push((uri.path().to_owned(), headers, body.clone()));
        inner.behaviour
    };
    match behaviour {
        Behaviour::Fail => {
            return (
                StatusCode::INTERNAL_SERVER_ERROR,
                axum::Json(json!({"error": {"message": "The server had an error while processing your request.", "type": "server_error", "param": null, "code": null}})),
            )
                .into_response();
        }
        Behaviour::Refuse => {
            return (
                StatusCode::BAD_REQUEST,
                axum::Json(json!({"error": {"message": "Your request was rejected by the safety system.", "type": "image_generation_user_error", "param": null, "code": "moderation_blocked"}})),
            )
                .into_response();
        }
        Behaviour::Draw | Behaviour::DrawLarge | Behaviour::DrawWhole => {}
    }
    let image = if behaviour == Behaviour::DrawLarge {
        large_png_b64()
    } else {
        png_b64()
    };
    let prompt = body["prompt"].as_str().unwrap_or_default();
    let used = |key: &str, default: &str| {
        body[key]
            .as_str()
            .filter(|v| *v != "auto")
            .unwrap_or(default)
            .to_owned()
    };
    let options = json!({
        "size": used("size", "1024x1024"),
        "quality": used("quality", "medium"),
        "background": used("background", "opaque"),
        "output_format": used("output_format", "png"),
    });
    let edit = uri.path().ends_with("/edits");
    let partials = body["partial_images"].as_u64().unwrap_or(0);
    if body["stream"] != true || behaviour == Behaviour::DrawWhole {
        let mut answer = json!({
            "created": 1_700_000_000,
            "data": [{"b64_json": image, "revised_prompt": revised(prompt)}],
            "usage": {"input_tokens": 10, "output_tokens": 100, "total_tokens": 110},
        });
        merge(&mut answer, &options);
        return axum::Json(answer).into_response();
    }
    let prefix = if edit {
        "image_edit"
    } else {
        "image_generation"
    };
    let mut pieces = Vec::new();
    for i in 0..partials {
        let mut data = json!({"type": format!("{prefix}.partial_image"), "b64_json": partial_b64(i), "partial_image_index": i, "created_at": 1_700_000_000});
        merge(&mut data, &options);
        pieces.push(format!("event: {prefix}.partial_image\ndata: {data}\n\n"));
    }
    let mut done = json!({"type": format!("{prefix}.completed"), "b64_json": image, "revised_prompt": revised(prompt), "created_at": 1_700_000_000, "usage": {"input_tokens": 10, "output_tokens": 100, "total_tokens": 110}});
    merge(&mut done, &options);
    pieces.push(format!("event: {prefix}.completed\ndata: {done}\n\n"));
    let stream = futures::stream::iter(
        pieces
            .into_iter()
            .map(|p| Ok::<_, std::convert::Infallible>(axum::body::Bytes::from(p))),
    );
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(Body::from_stream(stream))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

fn merge(into: &mut Value, from: &Value) {
    if let (Some(into), Some(from)) = (into.as_object_mut(), from.as_object()) {
        for (k, v) in from {
            into.insert(k.clone(), v.clone());
        }
    }
}
