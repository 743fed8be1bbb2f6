//! The one transport loop every streamed answer waits in: the pump (`sse`) asks [`wake`] what
//! happens next —
//! an upstream event, the body's end, a silence long enough for a keep-alive, or a stop (the
//! stream's deadline, the gateway's shutdown, the response's cancel) — and end a stopped stream
//! with the terminal code and message [`Stop`] gives. A gateway step run between upstream rounds
//! (the tool loop) is stopped the same way ([`interruptible`]). An event already read from the
//! socket is taken at once ([`ready`]), so a pump can gather a burst of them into one batch.
//!
//! Framing is [`Framing`]'s: SSE frames for HTTP, one JSON text per event for a transport that
//! frames messages itself (WebSocket), so the pumps are transport-neutral.
//!
//! Not here: what an event means (the decoders, the assembler) and what a round's end
//! leads to (`rounds`).

use std::task::Poll;

use axum::body::Bytes;
use futures::StreamExt;
use serde::Serialize;
use tokio::sync::watch;
use toolbridge_wire::responses::{EventKind, StreamEvent};

use crate::http::responses::dispatch::chunks::{Chunk, UpstreamSse};
use crate::upstream::StreamError;

/// Time limits and the stop signals of one stream.
pub(in crate::http::responses) struct PumpLimits {
    /// Silence after which a keep-alive goes to the client.
    pub(in crate::http::responses) keepalive: Option<std::time::Duration>,
    /// When the stream must end, whatever the upstream does.
    pub(super) deadline: tokio::time::Instant,
    /// Turns true when the gateway must end open streams now.
    pub(super) shutdown: watch::Receiver<bool>,
    /// Turns true when the response is cancelled (`/cancel`, or its client left under
    /// `on_client_disconnect = "cancel"`).
    pub(super) cancel: watch::Receiver<bool>,
}

/// What woke a waiting stream.
pub(super) enum Wake {
    /// An upstream SSE event.
    Event(sse_stream::Sse),
    /// An upstream event that was not UTF-8, dropped (`upstream_chunk_skipped`).
    Skipped,
    /// The upstream body ended (with or without the dialect's end marker: the pump knows).
    Ended,
    /// The upstream body broke: the terminal code and message.
    Broken(&'static str, String),
    /// Nothing came within the keep-alive interval.
    Silence,
    /// The stream must end now.
    Stop(Stop),
}

/// Why a stream is stopped from outside the upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::http::responses) enum Stop {
    /// The stream ran past `stream_timeout_secs`.
    Deadline,
    /// The gateway's shutdown grace period ran out.
    Shutdown,
    /// The response was cancelled.
    Cancelled,
}

impl Stop {
    /// The terminal code and message of a stream stopped this way; `None` for a cancel, which
    /// ends the response `cancelled`, not failed.
    pub(super) fn failure(self) -> Option<(&'static str, String)> {
        match self {
            Self::Deadline => Some((
                "server_error",
                "the upstream stream went on past its deadline (stream_timeout_secs)".to_owned(),
            )),
            Self::Shutdown => Some((
                "server_shutting_down",
                "the gateway is shutting down; retry the request".to_owned(),
            )),
            Self::Cancelled => None,
        }
    }
}

/// Waits for what happens next on `upstream`; a stop wins over an event ready at the same time.
/// An event already read from the socket goes without arming the select's timers.
pub(super) async fn wake(upstream: &mut UpstreamSse, limits: &mut PumpLimits) -> Wake {
    if let Some(wake) = ready(upstream, limits).await {
        return wake;
    }
    let keepalive = limits.keepalive;
    tokio::select! {
        biased;
        () = wait_for(&mut limits.shutdown) => Wake::Stop(Stop::Shutdown),
        () = wait_for(&mut limits.cancel) => Wake::Stop(Stop::Cancelled),
        () = tokio::time::sleep_until(limits.deadline) => Wake::Stop(Stop::Deadline),
        wake = next_or_silence(upstream, keepalive) => wake,
    }
}

/// At most this many upstream events go into one batch of a pump's frames: a burst of them is
/// written at once, its first delta held back by no more than their translation (tens of
/// microseconds).
pub(super) const MAX_BATCH_EVENTS: usize = 16;

/// What a pump's step handles next. Holding no frames yet (`holding` false) it waits
/// ([`wake`]); holding some, it takes only what the upstream has ready, while fewer than
/// [`MAX_BATCH_EVENTS`] were read in this step (`read` counts them). `None`: send what it holds.
pub(super) async fn batched(
    upstream: &mut UpstreamSse,
    limits: &mut PumpLimits,
    holding: bool,
    read: &mut usize,
) -> Option<Wake> {
    let wake = if !holding {
        Some(wake(upstream, limits).await)
    } else if *read < MAX_BATCH_EVENTS {
        ready(upstream, limits).await
    } else {
        None
    };
    *read += usize::from(wake.is_some());
    wake
}

/// What `upstream` has ready now, without waiting: `None` when it has nothing yet, or when a
/// stop is due (shutdown, cancel, deadline), which [`wake`] then reports first.
pub(super) async fn ready(upstream: &mut UpstreamSse, limits: &PumpLimits) -> Option<Wake> {
    if *limits.shutdown.borrow()
        || *limits.cancel.borrow()
        || tokio::time::Instant::now() >= limits.deadline
    {
        return None;
    }
    let polled = std::future::poll_fn(|cx| Poll::Ready(upstream.poll_next_unpin(cx))).await;
    match polled {
        Poll::Ready(item) => Some(woken(item)),
        Poll::Pending => None,
    }
}

/// Runs `step` (a gateway step between upstream rounds) unless the gateway shuts down or the
/// response is cancelled first.
pub(in crate::http::responses) async fn interruptible<F: Future>(
    limits: &mut PumpLimits,
    step: F,
) -> Result<F::Output, Stop> {
    tokio::select! {
        biased;
        () = wait_for(&mut limits.shutdown) => Err(Stop::Shutdown),
        () = wait_for(&mut limits.cancel) => Err(Stop::Cancelled),
        output = step => Ok(output),
    }
}

/// The next upstream event, or [`Wake::Silence`] when none came within `keepalive`.
async fn next_or_silence(
    upstream: &mut UpstreamSse,
    keepalive: Option<std::time::Duration>,
) -> Wake {
    let item = match keepalive {
        None => upstream.next().await,
        Some(limit) => match tokio::time::timeout(limit, upstream.next()).await {
            Ok(item) => item,
            Err(_) => return Wake::Silence,
        },
    };
    woken(item)
}

/// What one item of `upstream` (or its end) means to the pump.
fn woken(item: Option<Result<Chunk, sse_stream::Error>>) -> Wake {
    match item {
        Some(Ok(Chunk::Event(event))) => Wake::Event(event),
        Some(Ok(Chunk::Skipped)) => Wake::Skipped,
        Some(Err(e)) => {
            let (code, message) = stream_failure(&e);
            Wake::Broken(code, message)
        }
        None => Wake::Ended,
    }
}

/// The terminal code and message of an upstream body that broke.
fn stream_failure(e: &sse_stream::Error) -> (&'static str, String) {
    if let sse_stream::Error::Body(inner) = e
        && let Some(inner) = inner.downcast_ref::<StreamError>()
    {
        return (
            "server_error",
            match inner {
                StreamError::Idle | StreamError::TooLong => inner.to_string(),
                StreamError::Http(_) => format!("the upstream stream broke: {inner}"),
            },
        );
    }
    (
        "server_error",
        format!("the upstream stream could not be read: {e}"),
    )
}

/// Resolves once `signal` is true; never, when its sender is gone (no stop will ever come).
pub(in crate::http::responses) async fn wait_for(signal: &mut watch::Receiver<bool>) {
    loop {
        if *signal.borrow_and_update() {
            return;
        }
        if signal.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// How a stream's events become the transport's messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Framing {
    /// HTTP: one SSE frame per event (`event:` and `data:` lines, LF endings); a keep-alive is
    /// an SSE comment.
    #[default]
    Sse,
    /// A message transport (WebSocket): one JSON text per event; a keep-alive is an empty
    /// message, for the transport to turn into its own ping.
    Json,
}

/// The SSE comment sent during long upstream silences; clients skip comments.
const SSE_KEEPALIVE: &[u8] = b": keep-alive\n\n";

impl Framing {
    /// One message named `name` whose JSON `write` puts in the buffer: between the `event:`
    /// and `data:` lines and the blank line for SSE, alone for JSON texts.
    fn frame(self, name: &str, capacity: usize, write: impl FnOnce(&mut Vec<u8>)) -> Bytes {
        let mut buf = Vec::with_capacity(capacity + 2 * name.len() + 24);
        self.frame_into(&mut buf, name, write);
        Bytes::from(buf)
    }

    /// [`Self::frame`] appended to `buf`.
    fn frame_into(self, buf: &mut Vec<u8>, name: &str, write: impl FnOnce(&mut Vec<u8>)) {
        if self == Self::Sse {
            buf.extend_from_slice(b"event: ");
            buf.extend_from_slice(name.as_bytes());
            buf.extend_from_slice(b"\ndata: ");
        }
        write(buf);
        if self == Self::Sse {
            buf.extend_from_slice(b"\n\n");
        }
    }

    /// One event named `name` (serialising our own types cannot fail: string keys only).
    pub(crate) fn event(self, name: &str, event: &impl Serialize) -> Bytes {
        self.frame(name, 256, |buf| {
            let _ = serde_json::to_writer(buf, event);
        })
    }

    /// One of our stream events: the same bytes as [`Self::event`] of it, without serde's
    /// `flatten` (which writes each field through an adapter): the kind is written as its own
    /// tagged object and `sequence_number` spliced in before its closing brace. A text delta,
    /// most of a stream's events, is written field by field.
    pub(crate) fn stream_event(self, event: &StreamEvent) -> Bytes {
        let mut buf = Vec::with_capacity(256 + 2 * event.name().len() + 24);
        self.stream_event_into(&mut buf, event);
        Bytes::from(buf)
    }

    /// [`Self::stream_event`] appended to `buf`: a batch of SSE frames written into one piece.
    pub(crate) fn stream_event_into(self, buf: &mut Vec<u8>, event: &StreamEvent) {
        self.frame_into(buf, event.name(), |buf| {
            let start = buf.len();
            match &event.kind {
                EventKind::OutputTextDelta {
                    item_id,
                    output_index,
                    content_index,
                    delta,
                    logprobs,
                } if logprobs.is_empty() => {
                    text_delta(buf, item_id, *output_index, *content_index, delta);
                }
                kind => {
                    if serde_json::to_writer(&mut *buf, kind).is_err() || buf.last() != Some(&b'}')
                    {
                        buf.truncate(start);
                        let _ = serde_json::to_writer(buf, event);
                        return;
                    }
                    buf.pop();
                }
            }
            // A kind always has `type`: the object is never empty, so a comma follows.
            buf.extend_from_slice(b",\"sequence_number\":");
            buf.extend_from_slice(itoa::Buffer::new().format(event.sequence_number).as_bytes());
            buf.push(b'}');
        })
    }

    /// An event carrying a response (`response.created`, `.in_progress`, the terminal ones)
    /// whose response is `response`, that response's JSON text, spliced in rather than
    /// serialised again: the same bytes as [`Self::event`] of the event. Any other event is
    /// serialised as [`Self::stream_event`].
    pub(crate) fn with_response(self, event: &StreamEvent, response: &str) -> Bytes {
        let mut buf = Vec::with_capacity(response.len() + 3 * event.name().len() + 84);
        self.with_response_into(&mut buf, event, response);
        Bytes::from(buf)
    }

    /// [`Self::with_response`] appended to `buf`.
    pub(crate) fn with_response_into(self, buf: &mut Vec<u8>, event: &StreamEvent, response: &str) {
        if !event.kind.carries_response() {
            return self.stream_event_into(buf, event);
        }
        // `StreamEvent` flattens its kind: `type` and the kind's one field, then
        // `sequence_number`. The names are plain ASCII, written as they are.
        let name = event.name();
        self.frame_into(buf, name, |buf| {
            buf.extend_from_slice(b"{\"type\":\"");
            buf.extend_from_slice(name.as_bytes());
            buf.extend_from_slice(b"\",\"response\":");
            buf.extend_from_slice(response.as_bytes());
            buf.extend_from_slice(b",\"sequence_number\":");
            buf.extend_from_slice(itoa::Buffer::new().format(event.sequence_number).as_bytes());
            buf.push(b'}');
        })
    }

    /// The keep-alive message.
    pub(crate) fn keepalive(self) -> Bytes {
        match self {
            Self::Sse => Bytes::from_static(SSE_KEEPALIVE),
            Self::Json => Bytes::new(),
        }
    }
}

/// A `response.output_text.delta` kind without logprobs, its closing brace left off: the bytes
/// serde writes for it (the fields in their declared order, the strings escaped as serde_json
/// escapes).
fn text_delta(buf: &mut Vec<u8>, item_id: &str, output: usize, content: usize, delta: &str) {
    let mut number = itoa::Buffer::new();
    buf.extend_from_slice(b"{\"type\":\"response.output_text.delta\",\"item_id\":");
    toolbridge_wire::raw::write_json_literal(item_id, buf);
    buf.extend_from_slice(b",\"output_index\":");
    buf.extend_from_slice(number.format(output).as_bytes());
    buf.extend_from_slice(b",\"content_index\":");
    buf.extend_from_slice(number.format(content).as_bytes());
    buf.extend_from_slice(b",\"delta\":");
    toolbridge_wire::raw::write_json_literal(delta, buf);
    buf.extend_from_slice(b",\"logprobs\":[]");
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An upstream that has `n` events (`data: 0` …) ready at once, then nothing more.
    fn burst(n: usize) -> UpstreamSse {
        let text: String = (0..n).map(|i| format!("data: {i}\n\n")).collect();
        let bytes = futures::stream::iter([Ok::<_, StreamError>(Bytes::from(text))])
            .chain(futures::stream::pending());
        crate::http::responses::dispatch::chunks::events(bytes)
    }

    fn limits() -> (PumpLimits, watch::Sender<bool>) {
        let (_, shutdown) = watch::channel(false);
        let (cancel_tx, cancel) = watch::channel(false);
        let limits = PumpLimits {
            keepalive: None,
            deadline: tokio::time::Instant::now() + std::time::Duration::from_secs(60),
            shutdown,
            cancel,
        };
        (limits, cancel_tx)
    }

    fn data(wake: Option<Wake>) -> Option<String> {
        match wake {
            Some(Wake::Event(event)) => event.data,
            _ => None,
        }
    }

    #[tokio::test]
    async fn a_batch_takes_what_is_ready_up_to_its_bound_and_never_passes_a_stop() {
        let (mut limits, cancel) = limits();
        let mut upstream = burst(MAX_BATCH_EVENTS + 4);
        let mut read = 0;
        // Holding nothing, a step waits for its first event.
        let first = batched(&mut upstream, &mut limits, false, &mut read).await;
        assert_eq!(data(first).as_deref(), Some("0"));
        // Holding frames, it takes what is ready, in order, up to the bound.
        for i in 1..MAX_BATCH_EVENTS {
            let next = batched(&mut upstream, &mut limits, true, &mut read).await;
            assert_eq!(data(next), Some(i.to_string()));
        }
        assert!(
            batched(&mut upstream, &mut limits, true, &mut read)
                .await
                .is_none(),
            "the bound ends the batch"
        );
        // The next step goes on where this one stopped.
        let mut read = 0;
        let next = batched(&mut upstream, &mut limits, false, &mut read).await;
        assert_eq!(data(next), Some(MAX_BATCH_EVENTS.to_string()));
        // A cancel is not passed over by a ready event: the batch ends, the wait reports it.
        cancel.send_replace(true);
        assert!(
            batched(&mut upstream, &mut limits, true, &mut read)
                .await
                .is_none()
        );
        let stop = batched(&mut upstream, &mut limits, false, &mut read).await;
        assert!(matches!(stop, Some(Wake::Stop(Stop::Cancelled))));
    }

    #[tokio::test]
    async fn a_batch_ends_when_the_upstream_has_nothing_ready() {
        let (mut limits, _cancel) = limits();
        let mut upstream = burst(1);
        let mut read = 0;
        let first = batched(&mut upstream, &mut limits, false, &mut read).await;
        assert_eq!(data(first).as_deref(), Some("0"));
        assert!(
            batched(&mut upstream, &mut limits, true, &mut read)
                .await
                .is_none()
        );
        assert_eq!(read, 1);
    }

    #[test]
    fn sse_frames_name_the_event_and_json_frames_are_the_event_alone() {
        let event = serde_json::json!({"type": "response.created", "n": 1});
        let sse = Framing::Sse.event("response.created", &event);
        assert_eq!(
            &sse[..],
            b"event: response.created\ndata: {\"type\":\"response.created\",\"n\":1}\n\n"
        );
        let json = Framing::Json.event("response.created", &event);
        assert_eq!(&json[..], br#"{"type":"response.created","n":1}"#);
        assert_eq!(&Framing::Sse.keepalive()[..], b": keep-alive\n\n");
        assert!(Framing::Json.keepalive().is_empty());
    }

    #[test]
    fn a_frame_with_the_response_text_spliced_in_is_the_serialised_event() {
        use toolbridge_wire::responses::{EventKind, Response};
        let response: Response = serde_json::from_value(serde_json::json!({
            "id": "resp_1", "object": "response", "created_at": 1, "status": "completed",
            "model": "m", "output": [], "parallel_tool_calls": true, "tools": [],
            "tool_choice": "auto", "text": {"format": {"type": "text"}}, "truncation": "disabled",
            "top_p": 1.0, "presence_penalty": 0.0, "frequency_penalty": 0.0, "top_logprobs": 0,
            "temperature": 1.0, "store": false, "background": false, "service_tier": "default",
            "metadata": {"note": "a \"quoted\" line\n"},
        }))
        .expect("a response");
        let text = serde_json::to_string(&response).expect("serialised");
        let boxed = || Box::new(response.clone());
        let kinds = [
            EventKind::Created { response: boxed() },
            EventKind::InProgress { response: boxed() },
            EventKind::Completed { response: boxed() },
            EventKind::Incomplete { response: boxed() },
            EventKind::Failed { response: boxed() },
            // Not carrying a response: serialised whatever the text.
            EventKind::OutputTextDone {
                item_id: "msg_1".to_owned(),
                output_index: 0,
                content_index: 0,
                text: "x".to_owned(),
                logprobs: Vec::new(),
            },
        ];
        for (i, kind) in kinds.into_iter().enumerate() {
            let event = StreamEvent {
                kind,
                sequence_number: 41 + i as u64,
            };
            for framing in [Framing::Sse, Framing::Json] {
                assert_eq!(
                    framing.with_response(&event, &text),
                    framing.event(event.name(), &event),
                    "{}",
                    event.name()
                );
            }
        }
    }

    #[test]
    fn a_stream_event_is_the_bytes_serde_writes_for_it() {
        use toolbridge_wire::responses::EventKind;
        let events = [
            EventKind::OutputTextDelta {
                item_id: "msg_1".into(),
                output_index: 0,
                content_index: 0,
                delta: "He said \"hi\"\n".into(),
                logprobs: Vec::new(),
            },
            // Written field by field: every kind of byte the escaper meets, each at a word
            // boundary and inside one, and wide indexes.
            EventKind::OutputTextDelta {
                item_id: "msg_\u{1}\"é".into(),
                output_index: 12_345,
                content_index: 7,
                delta: "\u{0}\u{8}\u{c}\u{1f}\t\r\\/ café 🦀 \"end\" of a longer delta\n".into(),
                logprobs: Vec::new(),
            },
            EventKind::OutputTextDelta {
                item_id: String::new(),
                output_index: 0,
                content_index: 0,
                delta: String::new(),
                logprobs: Vec::new(),
            },
            // With logprobs: through serde.
            EventKind::OutputTextDelta {
                item_id: "msg_2".into(),
                output_index: 0,
                content_index: 0,
                delta: "x".into(),
                logprobs: vec![serde_json::json!({"token": "x", "logprob": -0.5})],
            },
            EventKind::OutputItemAdded {
                output_index: 2,
                item: serde_json::from_value(serde_json::json!({
                    "type": "function_call", "id": "fc_1", "call_id": "call_1",
                    "name": "f", "arguments": "{\"a\":[1,null]}", "status": "completed"
                }))
                .unwrap(),
            },
        ];
        let events: Vec<StreamEvent> = events
            .into_iter()
            .enumerate()
            .map(|(n, kind)| StreamEvent {
                kind,
                sequence_number: 7 + 1000 * n as u64,
            })
            .collect();
        let mut piece = Vec::new();
        let mut expected = Vec::new();
        for event in &events {
            for framing in [Framing::Sse, Framing::Json] {
                assert_eq!(
                    framing.stream_event(event),
                    framing.event(event.name(), event)
                );
            }
            Framing::Sse.stream_event_into(&mut piece, event);
            expected.extend_from_slice(&Framing::Sse.event(event.name(), event));
        }
        // A batch written into one piece is the frames one after another.
        assert_eq!(piece, expected);
    }

    #[tokio::test]
    async fn a_stop_interrupts_a_gateway_step_and_names_its_terminal_failure() {
        let (stop_tx, shutdown) = watch::channel(false);
        let (_cancel_tx, cancel) = watch::channel(false);
        let mut limits = PumpLimits {
            keepalive: None,
            deadline: tokio::time::Instant::now() + std::time::Duration::from_secs(60),
            shutdown,
            cancel,
        };
        let _ = stop_tx.send(true);
        let stopped = interruptible(&mut limits, std::future::pending::<()>()).await;
        assert_eq!(stopped, Err(Stop::Shutdown));
        assert_eq!(
            Stop::Shutdown.failure().map(|f| f.0),
            Some("server_shutting_down")
        );
        assert_eq!(Stop::Deadline.failure().map(|f| f.0), Some("server_error"));
        assert_eq!(Stop::Cancelled.failure(), None);
    }
}
