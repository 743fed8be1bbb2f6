//! Talking HTTP to upstream providers: one pooled client per provider, request sending, error
//! answers mapped before any byte goes to the client, and bounded bodies.

mod affinity;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tracing::Instrument;

use bytes::Bytes;
use futures::{Stream, StreamExt};

use toolbridge_providers::dialect::{Auth, HttpShape};

use crate::config::{Config, Provider};
use crate::error::GatewayError;

pub(crate) use affinity::{Affinity, session_key};

/// The most of an upstream error body we read.
const MAX_ERROR_BODY: usize = 64 * 1024;
/// The most of a non-streamed upstream answer we read.
pub(crate) const MAX_RESPONSE_BODY: usize = 64 * 1024 * 1024;
/// The most bytes one upstream stream may send.
pub(crate) const MAX_STREAM_BYTES: u64 = 256 * 1024 * 1024;

/// Adds a dialect's fixed headers and the key, sent its way, when the provider has one.
fn with_auth(
    mut request: reqwest::RequestBuilder,
    shape: &HttpShape,
    key: Option<&str>,
) -> reqwest::RequestBuilder {
    for (name, value) in shape.headers {
        request = request.header(*name, *value);
    }
    match (shape.auth, key) {
        (Auth::Bearer, Some(key)) => {
            // reqwest's `bearer_auth`, without its `format!`.
            let mut value = String::with_capacity(7 + key.len());
            value.push_str("Bearer ");
            value.push_str(key);
            match reqwest::header::HeaderValue::try_from(value) {
                Ok(mut value) => {
                    value.set_sensitive(true);
                    request.header(reqwest::header::AUTHORIZATION, value)
                }
                // A key that is no header value: reqwest's own error says so.
                Err(_) => request.bearer_auth(key),
            }
        }
        (Auth::Header(name), Some(key)) => request.header(name, key),
        (_, None) => request,
    }
}

/// The HTTP clients of every provider.
#[derive(Debug, Clone)]
pub(crate) struct Upstreams {
    clients: BTreeMap<String, reqwest::Client>,
    urls: Arc<Mutex<Urls>>,
}

/// The upstream URLs parsed so far (a provider's base URL and its dialect's path: a few per
/// provider, one per model for Gemini), so that a request does not parse its URL again. Bounded:
/// past [`MAX_URLS`] entries it starts over.
#[derive(Debug, Default)]
struct Urls(HashMap<String, reqwest::Url>);

/// Parsed URLs kept, at most.
const MAX_URLS: usize = 1024;

impl Urls {
    /// `text` parsed, from the cache or now; `None` when it is not a URL (the send reports it).
    fn get(cache: &Mutex<Urls>, text: String) -> Result<reqwest::Url, String> {
        if let Ok(urls) = cache.lock()
            && let Some(url) = urls.0.get(&text)
        {
            return Ok(url.clone());
        }
        let Ok(url) = reqwest::Url::parse(&text) else {
            return Err(text);
        };
        if let Ok(mut urls) = cache.lock() {
            if urls.0.len() >= MAX_URLS {
                urls.0.clear();
            }
            urls.0.insert(text, url.clone());
        }
        Ok(url)
    }
}

impl Upstreams {
    /// Builds one client per provider (connection pool, timeouts).
    pub(crate) fn new(config: &Config) -> Result<Self, reqwest::Error> {
        let mut clients = BTreeMap::new();
        for (name, p) in &config.providers {
            let client = reqwest::Client::builder()
                .connect_timeout(p.connect_timeout)
                .read_timeout(p.idle_timeout)
                .user_agent(concat!("toolbridge/", env!("CARGO_PKG_VERSION")))
                .build()?;
            clients.insert(name.clone(), client);
        }
        Ok(Self {
            clients,
            urls: Arc::default(),
        })
    }

    /// Sends a request body in the provider's dialect, for the upstream model `model` (Gemini
    /// names it in the URL). Returns the answer once its status is 2xx; any other status is
    /// mapped into an error here, while it can still become an HTTP error for the client.
    ///
    /// Connect errors, timeouts, 5xx and 429 are retried up to the provider's `max_retries`,
    /// waiting `Retry-After` when the upstream gives one and an exponential backoff otherwise,
    /// as long as the waits fit in the provider's retry budget. Nothing is retried here once the
    /// upstream has answered 2xx (a whole answer's body is read by [`Self::read_whole`]). An
    /// error after retries were spent (or refused by the budget) is [`GatewayError::Retried`],
    /// which tells the client's SDK not to retry again.
    pub(crate) async fn send(
        &self,
        provider: &Provider,
        model: &str,
        payload: &Bytes,
        stream: bool,
        affinity: Affinity,
    ) -> Result<reqwest::Response, GatewayError> {
        let client = self.clients.get(&provider.name).ok_or_else(|| {
            GatewayError::UpstreamUnreachable(format!("no client for provider `{}`", provider.name))
        })?;
        crate::platform::ops::observe::capture_upstream(&provider.name, payload);
        let span = crate::platform::ops::telemetry::stage_span!("upstream", provider = %provider.name, model = %model, stream);
        self.send_retrying(client, provider, model, payload, stream, affinity)
            .instrument(span)
            .await
    }

    /// Reads a whole (non-streamed) answer to its end, bounded. Nothing of it has reached the
    /// client yet, so a body cut mid-way (`upstream_body_cut`) is retried like a failure before
    /// the first byte: `payload` is sent again (through [`Self::send`]) up to the provider's
    /// `max_retries`, within its retry budget; spent, the error is [`GatewayError::Retried`].
    pub(crate) async fn read_whole(
        &self,
        response: reqwest::Response,
        provider: &Provider,
        model: &str,
        payload: &Bytes,
        affinity: Affinity,
    ) -> Result<Vec<u8>, GatewayError> {
        let mut first = Some(response);
        retrying(provider, Retry::Read, || {
            let first = first.take();
            async move {
                let response = match first {
                    Some(response) => response,
                    // A failed send is never a body cut, so it ends the loop as it is: `send`
                    // has spent its own retries on it.
                    None => self.send(provider, model, payload, false, affinity).await?,
                };
                read_capped(response, MAX_RESPONSE_BODY).await
            }
        })
        .await
    }

    async fn send_retrying(
        &self,
        client: &reqwest::Client,
        provider: &Provider,
        model: &str,
        payload: &Bytes,
        stream: bool,
        affinity: Affinity,
    ) -> Result<reqwest::Response, GatewayError> {
        retrying(provider, Retry::Send, || {
            self.send_once(client, provider, model, stream, payload.clone(), affinity)
        })
        .await
    }

    async fn send_once(
        &self,
        client: &reqwest::Client,
        provider: &Provider,
        model: &str,
        stream: bool,
        payload: bytes::Bytes,
        affinity: Affinity,
    ) -> Result<reqwest::Response, GatewayError> {
        let dialect = provider.dialect;
        let shape = dialect.http(model, stream);
        let mut url = String::with_capacity(provider.base_url.len() + shape.path.len());
        url.push_str(&provider.base_url);
        url.push_str(&shape.path);
        // An unparsable URL goes as text: reqwest's own error then says what is wrong with it.
        let mut request = match Urls::get(&self.urls, url) {
            Ok(url) => client.post(url),
            Err(text) => client.post(text),
        }
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(payload);
        if stream {
            request = request.header(reqwest::header::ACCEPT, "text/event-stream");
        } else {
            request = request.timeout(provider.request_timeout);
        }
        request = with_auth(request, &shape, provider.key_for(affinity));
        if let Some((parent, state)) = crate::platform::ops::telemetry::outgoing() {
            request = request.header("traceparent", parent);
            if let Some(state) = state {
                request = request.header("tracestate", state);
            }
        }
        let started = std::time::Instant::now();
        let sent = request.send().await;
        // Only the wait on the upstream is not the gateway's overhead: building the request
        // (trace context included) above and the span around it are.
        crate::platform::ops::observe::upstream_waited(started.elapsed());
        crate::platform::ops::metrics::upstream(
            &provider.name,
            sent.as_ref().ok().map(|r| r.status().as_u16()),
            started.elapsed(),
        );
        let response = sent.map_err(send_error)?;
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let retry_after = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let body = read_capped(response, MAX_ERROR_BODY)
            .await
            .unwrap_or_default();
        Err(GatewayError::Upstream(
            toolbridge_providers::Error::Upstream(Box::new(dialect.map_http_error(
                status.as_u16(),
                &body,
                retry_after,
            ))),
        ))
    }
}

/// What one of the two retry loops retries, and how it tells of a retry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Retry {
    /// Sending a request, before any answer: connect errors, timeouts, 5xx and 429 (not an
    /// exhausted quota). A retry counts in the request's journal, and its wait as time spent on
    /// the upstream.
    Send,
    /// Reading a whole answer whose body broke off (`upstream_body_cut`), by sending again.
    Read,
}

impl Retry {
    /// How long to wait before retrying after `error`, or `None` when it must not be retried:
    /// the upstream's `Retry-After` when it gives one, else 250 ms doubling up to 16 s.
    fn wait(self, error: &GatewayError, attempt: u32) -> Option<Duration> {
        let backoff = Duration::from_millis(250u64.saturating_mul(1u64 << attempt.min(6)));
        match (self, error) {
            (_, GatewayError::UpstreamBodyCut(_)) => Some(backoff),
            (Self::Read, _) => None,
            (Self::Send, GatewayError::UpstreamUnreachable(_) | GatewayError::UpstreamTimeout) => {
                Some(backoff)
            }
            (Self::Send, GatewayError::Upstream(toolbridge_providers::Error::Upstream(e))) => {
                match e.status {
                    429 if e.code == "insufficient_quota" => None,
                    429 | 500..=599 => Some(
                        e.retry_after
                            .as_deref()
                            .and_then(|v| v.trim().parse::<u64>().ok())
                            .map(Duration::from_secs)
                            .unwrap_or(backoff),
                    ),
                    _ => None,
                }
            }
            (Self::Send, _) => None,
        }
    }

    /// Logs (and, sending, counts) the retry about to wait `wait` after `error`.
    fn tell(self, provider: &Provider, attempt: u32, wait: Duration, error: &GatewayError) {
        let wait_ms = wait.as_millis() as u64;
        match self {
            Self::Send => {
                crate::platform::ops::observe::note(|entry| entry.retries += 1);
                tracing::info!(
                    provider = provider.name,
                    attempt = attempt + 1,
                    wait_ms,
                    code = error.code(),
                    "retrying the upstream request"
                );
            }
            Self::Read => tracing::info!(
                provider = provider.name,
                attempt = attempt + 1,
                wait_ms,
                "the upstream answer broke off; sending the request again"
            ),
        }
    }
}

/// The one retry policy: runs `attempt` until it succeeds or fails in a way `retry` does not
/// retry, waiting between attempts, for at most the provider's `max_retries` retries whose waits
/// fit in its `retry_budget`.
///
/// (`attempt` is a closure returning a future rather than an async closure: the future of an
/// async closure borrows the closure, which the compiler cannot yet prove `Send` for every
/// lifetime, and the handlers' futures must be `Send`.)
async fn retrying<T, Attempt>(
    provider: &Provider,
    retry: Retry,
    mut attempt: impl FnMut() -> Attempt,
) -> Result<T, GatewayError>
where
    Attempt: Future<Output = Result<T, GatewayError>>,
{
    let mut waited = Duration::ZERO;
    let mut attempts = 0u32;
    loop {
        let error = match attempt().await {
            Ok(done) => return Ok(done),
            Err(error) => error,
        };
        let Some(wait) = retry.wait(&error, attempts) else {
            return Err(error);
        };
        if attempts >= provider.max_retries || waited + wait > provider.retry_budget {
            // The gateway's retry policy has had its say: with retries configured, the
            // client's SDK must not multiply them (`x-should-retry: false`).
            if provider.max_retries == 0 {
                return Err(error);
            }
            return Err(GatewayError::Retried {
                attempts: attempts + 1,
                error: Box::new(error),
            });
        }
        retry.tell(provider, attempts, wait, &error);
        let sleeping = std::time::Instant::now();
        tokio::time::sleep(wait).await;
        if retry == Retry::Send {
            crate::platform::ops::observe::upstream_waited(sleeping.elapsed());
        }
        waited += wait;
        attempts += 1;
    }
}

fn send_error(e: reqwest::Error) -> GatewayError {
    if e.is_timeout() {
        GatewayError::UpstreamTimeout
    } else {
        GatewayError::UpstreamUnreachable(without_url(&e))
    }
}

/// A reqwest error's text without the URL (which could carry a key in its query).
pub(crate) fn without_url(e: &reqwest::Error) -> String {
    let mut text = e.to_string();
    if let Some(url) = e.url() {
        text = text.replace(url.as_str(), "<upstream>");
    }
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// Reads a whole body, up to `limit` bytes.
pub(crate) async fn read_capped(
    response: reqwest::Response,
    limit: usize,
) -> Result<Vec<u8>, GatewayError> {
    let started = std::time::Instant::now();
    let read = read_capped_inner(response, limit).await;
    crate::platform::ops::observe::upstream_waited(started.elapsed());
    read
}

async fn read_capped_inner(
    response: reqwest::Response,
    limit: usize,
) -> Result<Vec<u8>, GatewayError> {
    let mut out = Vec::new();
    let mut stream = response.bytes_stream();
    while let Some(chunk) = stream.next().await {
        // The upstream was reached and answered: a body that breaks off is not "unreachable".
        let chunk = chunk.map_err(|e| {
            if e.is_timeout() {
                GatewayError::UpstreamTimeout
            } else {
                GatewayError::UpstreamBodyCut(without_url(&e))
            }
        })?;
        if out.len() + chunk.len() > limit {
            return Err(GatewayError::Upstream(
                toolbridge_providers::Error::Decode {
                    message: format!("the answer is larger than {limit} bytes"),
                },
            ));
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}

/// Why an upstream byte stream stopped early.
#[derive(Debug, thiserror::Error)]
pub(crate) enum StreamError {
    #[error("{0}")]
    Http(String),
    #[error("the upstream did not send anything for too long")]
    Idle,
    #[error("the upstream stream exceeded {MAX_STREAM_BYTES} bytes")]
    TooLong,
}

/// The upstream body as a byte stream bounded to [`MAX_STREAM_BYTES`]. A blank line is added at
/// the end, so a last event the upstream did not terminate is still dispatched by the SSE parser
/// instead of being dropped (blank lines between events are harmless).
pub(crate) fn bounded_bytes(
    response: reqwest::Response,
) -> impl Stream<Item = Result<Bytes, StreamError>> + Send + 'static {
    let mut seen: u64 = 0;
    let body = response.bytes_stream().map(move |chunk| {
        let chunk = chunk.map_err(|e| {
            if e.is_timeout() {
                StreamError::Idle
            } else {
                StreamError::Http(without_url(&e))
            }
        })?;
        seen += chunk.len() as u64;
        if seen > MAX_STREAM_BYTES {
            return Err(StreamError::TooLong);
        }
        Ok(chunk)
    });
    body.chain(futures::stream::once(async {
        Ok(Bytes::from_static(b"\n\n"))
    }))
}
