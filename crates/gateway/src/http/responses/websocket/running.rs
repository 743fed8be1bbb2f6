//! One response in flight on a socket, as a stream of what the connection sends for it: its
//! start (admission and the stages, awaited inside the stream so that a slow start holds up
//! no other lane), then its events — the pipeline's JSON events as they come, or the few the
//! gateway made itself (a prewarm, an error) — each tagged with its lane's `stream_id`, a
//! keep-alive as a ping, and last an [`Item::End`] saying how it ended.
//!
//! The connection polls every running response from its own task (no task or channel per
//! response): when it stops polling one (the client left), the response's body is dropped,
//! which ends it as a dropped HTTP stream ends.
//!
//! What the chain keeps comes from the events themselves: a response's terminal event carries
//! its output, which with the expanded input is the history a continuation starts from.
//!
//! Not here: starting a response (`frame`), the connection (`websocket`).

use axum::body::{BodyDataStream, Bytes};
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{StreamExt, stream};
use serde::Deserialize;
use serde_json::Value;

use super::frame::Pending;
use super::lanes::{Lane, tag_of, tagged};

/// What a running response hands the connection.
pub(super) enum Item {
    /// One event as a text frame, tagged with its lane.
    Event(Bytes),
    /// A keep-alive: sent as a ping.
    Ping,
    /// The response ended; its lane may start its next frame.
    End(Box<Ended>),
}

/// How a response ended, for the connection's lanes and chains.
pub(super) struct Ended {
    pub(super) lane: Lane,
    pub(super) outcome: Outcome,
    pub(super) pending: Pending,
}

/// What a response's start produced.
pub(super) enum Started {
    /// The pipeline's answer: one JSON event per body frame (an empty frame is a keep-alive).
    Stream(BodyDataStream),
    /// Events the gateway made itself (a prewarm, a refusal); the last one ends the response.
    Events(Vec<Value>),
}

/// How a response's events ended, as the connection saw them.
#[derive(Default)]
pub(super) enum Outcome {
    /// A terminal event with a response the chain can continue from.
    Done {
        id: String,
        output: Vec<Value>,
        /// The terminal event's size: the output's share of the chain's bytes.
        bytes: usize,
    },
    /// Failed, cancelled or refused: nothing to continue from.
    #[default]
    Failed,
}

enum Step {
    Start(BoxFuture<'static, Started>),
    Stream(BodyDataStream),
    Events(std::vec::IntoIter<Value>),
    End,
    Done,
}

struct Run {
    lane: Lane,
    tag: Option<Bytes>,
    step: Step,
    outcome: Outcome,
    pending: Option<Pending>,
}

impl Run {
    /// `bytes` as the next item, noting a terminal event's outcome.
    fn event(mut self, bytes: Bytes) -> Option<(Item, Self)> {
        if let Some(ended) = terminal(&bytes) {
            self.outcome = ended;
        }
        let event = tagged(self.tag.as_ref(), bytes);
        Some((Item::Event(event), self))
    }
}

/// The response `start` begins, on `lane`, with what its chain keeps in `pending`.
pub(super) fn running(
    lane: Lane,
    start: BoxFuture<'static, Started>,
    pending: Pending,
) -> BoxStream<'static, Item> {
    let run = Run {
        tag: tag_of(&lane),
        lane,
        step: Step::Start(start),
        outcome: Outcome::Failed,
        pending: Some(pending),
    };
    stream::unfold(run, |mut run| async move {
        loop {
            match std::mem::replace(&mut run.step, Step::Done) {
                Step::Start(start) => {
                    run.step = match start.await {
                        Started::Stream(body) => Step::Stream(body),
                        Started::Events(events) => Step::Events(events.into_iter()),
                    };
                }
                Step::Stream(mut body) => match body.next().await {
                    Some(Ok(bytes)) if bytes.is_empty() => {
                        run.step = Step::Stream(body);
                        return Some((Item::Ping, run));
                    }
                    Some(Ok(bytes)) => {
                        run.step = Step::Stream(body);
                        return run.event(bytes);
                    }
                    Some(Err(_)) | None => run.step = Step::End,
                },
                Step::Events(mut events) => match events.next() {
                    Some(event) => {
                        run.step = Step::Events(events);
                        let bytes = serde_json::to_vec(&event).unwrap_or_default();
                        return run.event(Bytes::from(bytes));
                    }
                    None => run.step = Step::End,
                },
                Step::End => {
                    // A stream's capture is written when it is metered; one that ended without
                    // (a gateway-answered compaction) is written here.
                    if let Some(ctx) = crate::platform::ops::observe::current() {
                        ctx.write_capture(None, 200).await;
                    }
                    let pending = run.pending.take()?;
                    let ended = Ended {
                        lane: run.lane.clone(),
                        outcome: std::mem::take(&mut run.outcome),
                        pending,
                    };
                    return Some((Item::End(Box::new(ended)), run));
                }
                Step::Done => return None,
            }
        }
    })
    .boxed()
}

/// The parts of an event the connection reads.
#[derive(Deserialize)]
struct Head {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    response: Option<HeadResponse>,
}

#[derive(Deserialize)]
struct HeadResponse {
    id: String,
    #[serde(default)]
    output: Vec<Value>,
}

/// The outcome a terminal event stands for; `None` for any other event. Only events whose
/// opening names a terminal type are parsed whole.
fn terminal(frame: &[u8]) -> Option<Outcome> {
    let head = &frame[..frame.len().min(64)];
    let names_terminal = [
        &b"response.completed"[..],
        b"response.incomplete",
        b"response.failed",
        b"response.cancelled",
        b"\"error\"",
    ]
    .iter()
    .any(|name| head.windows(name.len()).any(|w| w == *name));
    if !names_terminal {
        return None;
    }
    let head: Head = serde_json::from_slice(frame).ok()?;
    match head.kind.as_str() {
        "response.completed" | "response.incomplete" => Some(match head.response {
            Some(response) => Outcome::Done {
                id: response.id,
                output: response.output,
                bytes: frame.len(),
            },
            None => Outcome::Failed,
        }),
        "response.failed" | "response.cancelled" | "error" => Some(Outcome::Failed),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_terminal_events_end_a_response_and_only_completed_ones_can_be_continued() {
        let done = terminal(
            br#"{"type":"response.completed","response":{"id":"resp_1","output":[{"type":"message"}]}}"#,
        );
        assert!(
            matches!(done, Some(Outcome::Done { ref id, ref output, .. }) if id == "resp_1" && output.len() == 1)
        );
        assert!(matches!(
            terminal(br#"{"type":"response.failed","response":{"id":"resp_2"}}"#),
            Some(Outcome::Failed)
        ));
        assert!(matches!(
            terminal(br#"{"type":"error","error":{"code":"x"}}"#),
            Some(Outcome::Failed)
        ));
        assert!(
            terminal(br#"{"type":"response.output_text.delta","delta":"response.completed"}"#)
                .is_none()
        );
    }
}
