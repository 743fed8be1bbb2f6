//! The event vocabulary of the session side channel: [`SessionEvent`] and what each kind says
//! (a response's progress, a tool call's, a reference to the media a call made), and the
//! clipping of every string to its bound before an event is published.
//!
//! Not here: the bus that carries the events, and session ids (the parent).

use serde::{Deserialize, Serialize};

use super::{MAX_DETAIL_LEN, MAX_MEDIA_B64, MAX_NAME_LEN};

/// One event of a session's side channel. On the wire: `{"type": "tool.started", …fields}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum SessionEvent {
    #[serde(rename = "response.started")]
    ResponseStarted(ResponseInfo),
    #[serde(rename = "response.completed")]
    ResponseCompleted(ResponseInfo),
    #[serde(rename = "tool.started")]
    ToolStarted(ToolInfo),
    #[serde(rename = "tool.progress")]
    ToolProgress(ToolInfo),
    #[serde(rename = "tool.completed")]
    ToolCompleted(ToolInfo),
    #[serde(rename = "tool.failed")]
    ToolFailed(ToolInfo),
    /// The last event a lagging subscriber receives before it is disconnected: `dropped`
    /// events (at least) were lost. Never published; made by the subscription itself.
    #[serde(rename = "stream.lagged")]
    StreamLagged { dropped: u64 },
    /// The subscription's connection to the bus (Redis) dropped and was made again: events
    /// published in between were missed. Never published; made by the subscription itself.
    #[serde(rename = "stream.reconnected")]
    StreamReconnected {},
}

/// A reference to media a gateway call made: where the item is (`url`, `item_id`) and, when
/// small enough to travel in an event, the bytes themselves (base64, [`MAX_MEDIA_B64`] at most;
/// larger media are fetched by reference).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MediaRef {
    /// `image`.
    pub kind: String,
    /// The output item holding it (`ig_…`).
    pub item_id: String,
    /// Where the stored response holding the item is read (`/v1/responses/{id}`).
    pub url: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// The partial image's index, for a partial.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partial_image_index: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub b64: Option<String>,
}

/// What a `response.*` event says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResponseInfo {
    /// Set by [`EventBus::publish`](super::EventBus::publish).
    #[serde(default)]
    pub session_id: String,
    pub response_id: String,
    /// The final status (`completed`, `failed`, `incomplete`, `cancelled`) of a
    /// `response.completed` event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// Milliseconds since the Unix epoch, from the publisher's clock.
    pub timestamp_ms: u64,
}

/// What a `tool.*` event says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolInfo {
    /// Set by [`EventBus::publish`](super::EventBus::publish).
    #[serde(default)]
    pub session_id: String,
    pub response_id: String,
    pub call_id: String,
    /// The tool's name as the client declared it (or the built-in's name).
    pub tool: String,
    /// The MCP server label (`toolbridge` for built-ins), when the tool is shown as `mcp_call`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_label: Option<String>,
    /// The loop step the call belongs to, from 1.
    pub step: u32,
    /// Milliseconds since the call started (progress, completion, failure).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elapsed_ms: Option<u64>,
    /// A short, human-readable note: progress, or a summary of the result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// A short error (a stable code, then a message) of a failed call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// What the call made, for a client to show: an image (`tool.completed`), a partial image
    /// (`tool.progress`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media: Option<MediaRef>,
    /// Milliseconds since the Unix epoch, from the publisher's clock.
    pub timestamp_ms: u64,
}

impl ResponseInfo {
    pub fn new(response_id: impl Into<String>, timestamp_ms: u64) -> Self {
        Self {
            session_id: String::new(),
            response_id: response_id.into(),
            status: None,
            timestamp_ms,
        }
    }

    /// With the final status.
    pub fn status(mut self, status: impl Into<String>) -> Self {
        self.status = Some(status.into());
        self
    }
}

impl ToolInfo {
    pub fn new(
        response_id: impl Into<String>,
        call_id: impl Into<String>,
        tool: impl Into<String>,
        step: u32,
        timestamp_ms: u64,
    ) -> Self {
        Self {
            session_id: String::new(),
            response_id: response_id.into(),
            call_id: call_id.into(),
            tool: tool.into(),
            server_label: None,
            step,
            elapsed_ms: None,
            detail: None,
            error: None,
            media: None,
            timestamp_ms,
        }
    }

    pub fn server_label(mut self, label: impl Into<String>) -> Self {
        self.server_label = Some(label.into());
        self
    }

    /// The same call at a later time, `elapsed_ms` after it started.
    pub fn at(mut self, timestamp_ms: u64, elapsed_ms: u64) -> Self {
        self.timestamp_ms = timestamp_ms;
        self.elapsed_ms = Some(elapsed_ms);
        self
    }

    pub fn detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = Some(detail.into());
        self
    }

    pub fn error(mut self, error: impl Into<String>) -> Self {
        self.error = Some(error.into());
        self
    }

    pub fn media(mut self, media: Option<MediaRef>) -> Self {
        self.media = media;
        self
    }
}

impl SessionEvent {
    /// The `type` on the wire, also the SSE `event:` name.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::ResponseStarted(_) => "response.started",
            Self::ResponseCompleted(_) => "response.completed",
            Self::ToolStarted(_) => "tool.started",
            Self::ToolProgress(_) => "tool.progress",
            Self::ToolCompleted(_) => "tool.completed",
            Self::ToolFailed(_) => "tool.failed",
            Self::StreamLagged { .. } => "stream.lagged",
            Self::StreamReconnected {} => "stream.reconnected",
        }
    }

    /// The session the event belongs to (empty for the lag and reconnect markers).
    pub fn session_id(&self) -> &str {
        match self {
            Self::ResponseStarted(r) | Self::ResponseCompleted(r) => &r.session_id,
            Self::ToolStarted(t)
            | Self::ToolProgress(t)
            | Self::ToolCompleted(t)
            | Self::ToolFailed(t) => &t.session_id,
            Self::StreamLagged { .. } | Self::StreamReconnected {} => "",
        }
    }

    /// Stamps the session and clips every string to its bound.
    pub(super) fn prepare(&mut self, session_id: &str) {
        match self {
            Self::ResponseStarted(r) | Self::ResponseCompleted(r) => {
                r.session_id = session_id.to_owned();
                clip(&mut r.response_id, MAX_NAME_LEN);
                if let Some(s) = &mut r.status {
                    clip(s, MAX_NAME_LEN);
                }
            }
            Self::ToolStarted(t)
            | Self::ToolProgress(t)
            | Self::ToolCompleted(t)
            | Self::ToolFailed(t) => {
                t.session_id = session_id.to_owned();
                for s in [&mut t.response_id, &mut t.call_id, &mut t.tool] {
                    clip(s, MAX_NAME_LEN);
                }
                if let Some(s) = &mut t.server_label {
                    clip(s, MAX_NAME_LEN);
                }
                for s in [&mut t.detail, &mut t.error].into_iter().flatten() {
                    clip(s, MAX_DETAIL_LEN);
                }
                if let Some(m) = &mut t.media {
                    for s in [&mut m.kind, &mut m.item_id, &mut m.url] {
                        clip(s, MAX_DETAIL_LEN);
                    }
                    if let Some(s) = &mut m.mime_type {
                        clip(s, MAX_NAME_LEN);
                    }
                    // Cut base64 is no image: too large, it is left to the reference.
                    if m.b64.as_ref().is_some_and(|b| b.len() > MAX_MEDIA_B64) {
                        m.b64 = None;
                    }
                }
            }
            Self::StreamLagged { .. } | Self::StreamReconnected {} => {}
        }
    }
}

/// Cuts `s` to at most `max` bytes, on a character boundary, marking the cut with `…`.
fn clip(s: &mut String, max: usize) {
    if s.len() <= max {
        return;
    }
    let mut end = max.saturating_sub('…'.len_utf8());
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s.truncate(end);
    s.push('…');
}
