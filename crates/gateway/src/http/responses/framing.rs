//! How a stream's events become the transport's messages ([`Framing`]): SSE frames for HTTP,
//! one JSON text per event for a transport that frames messages itself (WebSocket), so the
//! pumps are transport-neutral. The caller's framing is chosen at each ingress (HTTP, a
//! background run, a WebSocket frame) and read by every stage that writes events.
//!
//! Not here: when events are written (the transport loop, `emit/transport`).

use axum::body::Bytes;
use serde::Serialize;
use toolbridge_wire::responses::{EventKind, StreamEvent};

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
}
