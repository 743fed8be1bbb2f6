//! The guarded HTTP client the web tools share: every request and every redirect hop passes
//! [`SsrfPolicy::check_url`], every name goes through the [`GuardedResolver`], and bodies and
//! time are capped.
//!
//! reqwest is built with `Policy::none()` so that redirects come back to this module, which
//! re-checks the next URL exactly like the first one, drops the caller's headers (API keys) when
//! the origin changes, and stops after [`SsrfPolicy::max_redirects`] hops. `.no_proxy()` keeps
//! `HTTP(S)_PROXY` from routing requests around the resolver. Content-type rules belong to the
//! tools, not here.

use std::error::Error as _;
use std::fmt;
use std::sync::Arc;

use reqwest::header::{HeaderMap, LOCATION};
use reqwest::{Method, StatusCode};
use url::Url;

use super::ssrf::{GuardedResolver, Lookup, Reason, Refusal, SsrfPolicy, SystemLookup};
use crate::ToolError;

/// Why a guarded request failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FetchError {
    /// The guard refused the URL, an address, a redirect or the content.
    #[error("refused: {0}")]
    Refused(#[from] Refusal),
    /// The body is larger than allowed.
    #[error("the response is larger than {limit} bytes")]
    TooLarge {
        /// The cap.
        limit: usize,
    },
    /// The request did not finish in time.
    #[error("the request timed out")]
    Timeout,
    /// Connecting, TLS or HTTP failed.
    #[error("the request failed: {0}")]
    Transport(String),
}

impl From<FetchError> for ToolError {
    fn from(err: FetchError) -> Self {
        match err {
            FetchError::Refused(refusal) => ToolError::Refused(refusal.to_string()),
            FetchError::TooLarge { limit } => {
                ToolError::LimitExceeded(format!("the response is larger than {limit} bytes"))
            }
            FetchError::Timeout => ToolError::Timeout,
            FetchError::Transport(message) => ToolError::Failed(message),
        }
    }
}

/// What to do with a body past the cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Oversize {
    /// Keep the first bytes and say so (pages).
    Truncate,
    /// Fail with [`FetchError::TooLarge`] (API answers, which are useless cut).
    Fail,
}

/// One request to send through the guard.
#[derive(Debug, Clone)]
pub struct SafeRequest {
    /// GET or POST.
    pub method: Method,
    /// The first URL.
    pub url: Url,
    /// Headers; all of them are dropped when a redirect leaves the first URL's origin.
    pub headers: HeaderMap,
    /// A body (POST); dropped when a redirect turns the request into a GET.
    pub body: Option<Vec<u8>>,
}

impl SafeRequest {
    /// A GET with no headers.
    pub fn get(url: Url) -> Self {
        Self {
            method: Method::GET,
            url,
            headers: HeaderMap::new(),
            body: None,
        }
    }
}

/// A response read through the guard.
#[derive(Debug, Clone)]
pub struct SafeResponse {
    /// The URL that answered (after redirects).
    pub url: Url,
    /// Its status.
    pub status: StatusCode,
    /// Its `Content-Type`, if any.
    pub content_type: Option<String>,
    /// The body, at most [`SsrfPolicy::max_response_bytes`].
    pub body: Vec<u8>,
    /// True when the body was cut at the cap.
    pub truncated: bool,
    /// The redirect targets followed, in order.
    pub redirects: Vec<Url>,
}

/// The guarded client. Build it once and share it: it holds a connection pool.
#[derive(Clone)]
pub struct SafeClient {
    client: reqwest::Client,
    policy: Arc<SsrfPolicy>,
}

impl fmt::Debug for SafeClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SafeClient")
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

impl SafeClient {
    /// A client that resolves names with the system resolver.
    pub fn new(policy: SsrfPolicy) -> Result<Self, ToolError> {
        Self::with_lookup(policy, Arc::new(SystemLookup))
    }

    /// A client that resolves names with `lookup` (every address is still checked).
    pub fn with_lookup(policy: SsrfPolicy, lookup: Arc<dyn Lookup>) -> Result<Self, ToolError> {
        let client = reqwest::Client::builder()
            .dns_resolver(GuardedResolver::new(lookup))
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .referer(false)
            .connect_timeout(policy.connect_timeout)
            .timeout(policy.timeout)
            .user_agent(concat!("toolbridge-tools/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| {
                ToolError::InvalidConfiguration(format!("cannot build the web client: {e}"))
            })?;
        Ok(Self {
            client,
            policy: Arc::new(policy),
        })
    }

    /// The policy this client enforces.
    pub fn policy(&self) -> &SsrfPolicy {
        &self.policy
    }

    /// The guarded HTTP client itself (names resolve only to allowed addresses, no redirects,
    /// no proxy), for protocols that drive their own requests (MCP's streamable HTTP). A URL
    /// whose host is a literal address is not resolved: check every URL with
    /// [`SsrfPolicy::check_url`] before handing it over.
    pub fn http_client(&self) -> reqwest::Client {
        self.client.clone()
    }

    /// Sends `request`, following redirects through the guard, and reads the body up to the
    /// cap, all within `deadline` and the policy's own timeout.
    pub async fn send(
        &self,
        request: SafeRequest,
        oversize: Oversize,
        deadline: tokio::time::Instant,
    ) -> Result<SafeResponse, FetchError> {
        let deadline = deadline.min(tokio::time::Instant::now() + self.policy.timeout);
        tokio::time::timeout_at(deadline, self.send_inner(request, oversize))
            .await
            .map_err(|_elapsed| FetchError::Timeout)?
    }

    async fn send_inner(
        &self,
        request: SafeRequest,
        oversize: Oversize,
    ) -> Result<SafeResponse, FetchError> {
        let SafeRequest {
            mut method,
            mut url,
            mut headers,
            mut body,
        } = request;
        let origin = url.origin();
        let mut redirects = Vec::new();
        loop {
            self.policy.check_url(&url)?;
            let mut builder = self
                .client
                .request(method.clone(), url.clone())
                .headers(headers.clone());
            if let Some(bytes) = &body {
                builder = builder.body(bytes.clone());
            }
            let response = builder.send().await.map_err(transport)?;
            let status = response.status();
            if is_redirect(status) {
                if redirects.len() >= self.policy.max_redirects {
                    return Err(Refusal::new(
                        Reason::TooManyRedirects,
                        format!(
                            "more than {} redirects (the last from {url})",
                            self.policy.max_redirects
                        ),
                    )
                    .into());
                }
                let next = next_url(&url, response.headers())?;
                // 303, and 301/302 after a POST, turn into a GET without a body (what browsers
                // do); 307 and 308 repeat the request.
                if status == StatusCode::SEE_OTHER
                    || (method == Method::POST
                        && (status == StatusCode::MOVED_PERMANENTLY || status == StatusCode::FOUND))
                {
                    method = Method::GET;
                    body = None;
                    headers.remove(reqwest::header::CONTENT_TYPE);
                }
                // Credentials are for the origin they were configured for.
                if next.origin() != origin {
                    headers.clear();
                }
                redirects.push(next.clone());
                url = next;
                continue;
            }
            let content_type = response
                .headers()
                .get(reqwest::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            let (body, truncated) =
                read_capped(response, self.policy.max_response_bytes, oversize).await?;
            return Ok(SafeResponse {
                url,
                status,
                content_type,
                body,
                truncated,
                redirects,
            });
        }
    }
}

fn is_redirect(status: StatusCode) -> bool {
    matches!(status.as_u16(), 301 | 302 | 303 | 307 | 308)
}

/// The redirect target, resolved against the current URL.
fn next_url(current: &Url, headers: &HeaderMap) -> Result<Url, FetchError> {
    let location = headers
        .get(LOCATION)
        .and_then(|v| v.to_str().ok())
        .ok_or_else(|| {
            Refusal::new(
                Reason::BadRedirect,
                format!("a redirect from {current} has no readable Location"),
            )
        })?;
    current.join(location).map_err(|e| {
        Refusal::new(
            Reason::BadRedirect,
            format!("the redirect target `{location}` is not a URL: {e}"),
        )
        .into()
    })
}

/// Reads a body, stopping at `limit` bytes.
async fn read_capped(
    mut response: reqwest::Response,
    limit: usize,
    oversize: Oversize,
) -> Result<(Vec<u8>, bool), FetchError> {
    let declared = response.content_length();
    if oversize == Oversize::Fail && declared.is_some_and(|n| n > limit as u64) {
        return Err(FetchError::TooLarge { limit });
    }
    let mut body = Vec::with_capacity(declared.map_or(0, |n| n.min(limit as u64) as usize));
    while let Some(chunk) = response.chunk().await.map_err(transport)? {
        let room = limit - body.len();
        if chunk.len() > room {
            if oversize == Oversize::Fail {
                return Err(FetchError::TooLarge { limit });
            }
            body.extend_from_slice(&chunk[..room]);
            return Ok((body, true));
        }
        body.extend_from_slice(&chunk);
    }
    Ok((body, false))
}

/// Maps a reqwest error, finding the guard's refusal in its sources when the resolver refused.
fn transport(err: reqwest::Error) -> FetchError {
    let mut source: Option<&(dyn std::error::Error + 'static)> = err.source();
    while let Some(inner) = source {
        if let Some(refusal) = inner.downcast_ref::<Refusal>() {
            return FetchError::Refused(refusal.clone());
        }
        source = inner.source();
    }
    if err.is_timeout() {
        return FetchError::Timeout;
    }
    let mut message = err.to_string();
    let mut source = err.source();
    while let Some(inner) = source {
        message.push_str(": ");
        message.push_str(&inner.to_string());
        source = inner.source();
    }
    FetchError::Transport(message)
}
