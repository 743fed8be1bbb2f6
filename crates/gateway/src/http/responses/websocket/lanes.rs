//! `stream_id` lanes: how several responses share one socket. A `response.create` may name a
//! lane in `stream_id` (WebSocket-only, beside the create request's fields); frames of one lane
//! run one after another, in order, and lanes run side by side; every event of a response on a
//! named lane carries the same top-level `stream_id`. Frames without one form a lane of their
//! own, whose events are untagged: a client that never names a lane sees one response at a
//! time, as before lanes existed. `previous_response_id` is independent of the lane, so a lane
//! may continue a response another lane made.
//!
//! *Architecture invariant:* bounded per connection: at most [`MAX_STREAMS`] responses in
//! flight, and at most [`MAX_QUEUED`] frames waiting behind them (all lanes together); past
//! either, the frame is answered with an `error` event on its lane and the socket stays usable.
//!
//! Not here: running a response (`running`), reading its frame (`frame`).

use std::collections::HashMap;
use std::collections::VecDeque;

use axum::body::Bytes;
use bytes::BytesMut;
use serde::Deserialize;

/// Responses in flight on one socket at most (one per busy lane).
pub(super) const MAX_STREAMS: usize = 8;

/// Frames waiting behind busy lanes on one socket at most.
pub(super) const MAX_QUEUED: usize = 16;

/// The longest `stream_id` accepted.
const MAX_STREAM_ID: usize = 128;

/// A lane: `None` for frames that name none.
pub(super) type Lane = Option<String>;

/// What became of an arriving frame.
pub(super) enum Arrival {
    /// Its lane was idle: start it now.
    Start,
    /// Its lane is busy: it waits its turn.
    Queued,
    /// Refused with this `error` event's code and message.
    Refused(&'static str, &'static str),
}

/// The busy lanes of one socket, each with the frames waiting on it.
#[derive(Default)]
pub(super) struct Lanes {
    busy: HashMap<Lane, VecDeque<Bytes>>,
    queued: usize,
}

impl Lanes {
    /// Takes `frame` for `lane`.
    pub(super) fn arrive(&mut self, lane: &Lane, frame: Bytes) -> Arrival {
        if let Some(waiting) = self.busy.get_mut(lane) {
            if self.queued >= MAX_QUEUED {
                return Arrival::Refused(
                    "too_many_queued_frames",
                    "too many frames are waiting behind responses in flight on this socket",
                );
            }
            waiting.push_back(frame);
            self.queued += 1;
            return Arrival::Queued;
        }
        if self.busy.len() >= MAX_STREAMS {
            return Arrival::Refused(
                "too_many_streams",
                "too many responses are in flight on this socket; wait for one to end or open another socket",
            );
        }
        self.busy.insert(lane.clone(), VecDeque::new());
        Arrival::Start
    }

    /// The response on `lane` ended: its next frame, if one waits (the lane stays busy), else
    /// the lane goes idle.
    pub(super) fn next(&mut self, lane: &Lane) -> Option<Bytes> {
        let waiting = self.busy.get_mut(lane)?;
        match waiting.pop_front() {
            Some(frame) => {
                self.queued -= 1;
                Some(frame)
            }
            None => {
                self.busy.remove(lane);
                None
            }
        }
    }

    /// Drops every waiting frame (the socket is ending); responses in flight keep their lanes.
    pub(super) fn drop_waiting(&mut self) {
        for waiting in self.busy.values_mut() {
            waiting.clear();
        }
        self.queued = 0;
    }
}

#[derive(Deserialize)]
struct Envelope {
    #[serde(default)]
    stream_id: Option<serde_json::Value>,
}

/// The lane a frame names. `Err` with a message when `stream_id` is not a short string; a
/// frame that is not JSON is its own problem, answered when it is read (on the unnamed lane).
pub(super) fn lane_of(frame: &[u8]) -> Result<Lane, &'static str> {
    let Ok(envelope) = serde_json::from_slice::<Envelope>(frame) else {
        return Ok(None);
    };
    match envelope.stream_id {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(serde_json::Value::String(id)) if !id.is_empty() && id.len() <= MAX_STREAM_ID => {
            Ok(Some(id))
        }
        Some(_) => Err("`stream_id` must be a string of 1 to 128 characters"),
    }
}

/// The opening a tagged event starts with: `{"stream_id":"…",`.
pub(super) fn tag_of(lane: &Lane) -> Option<Bytes> {
    let id = lane.as_ref()?;
    let quoted = serde_json::to_string(id).ok()?;
    Some(Bytes::from(format!("{{\"stream_id\":{quoted},")))
}

/// `event` (one JSON object) with the lane's `stream_id` first; untouched without a tag.
pub(super) fn tagged(tag: Option<&Bytes>, event: Bytes) -> Bytes {
    let Some(tag) = tag else {
        return event;
    };
    let Some(rest) = event.strip_prefix(b"{") else {
        return event;
    };
    let mut out = BytesMut::with_capacity(tag.len() + rest.len());
    out.extend_from_slice(tag);
    if rest.trim_ascii_start().starts_with(b"}") {
        // An empty object: the tag's trailing comma must go.
        out.truncate(out.len() - 1);
    }
    out.extend_from_slice(rest);
    out.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lane_runs_one_frame_at_a_time_and_the_socket_bounds_lanes_and_waiting_frames() {
        let mut lanes = Lanes::default();
        let frame = || Bytes::from_static(b"{}");
        for n in 0..MAX_STREAMS {
            assert!(matches!(
                lanes.arrive(&Some(format!("s{n}")), frame()),
                Arrival::Start
            ));
        }
        assert!(matches!(
            lanes.arrive(&None, frame()),
            Arrival::Refused("too_many_streams", _)
        ));
        for _ in 0..MAX_QUEUED {
            assert!(matches!(
                lanes.arrive(&Some("s0".to_owned()), frame()),
                Arrival::Queued
            ));
        }
        assert!(matches!(
            lanes.arrive(&Some("s1".to_owned()), frame()),
            Arrival::Refused("too_many_queued_frames", _)
        ));
        assert!(lanes.next(&Some("s0".to_owned())).is_some());
        assert!(matches!(
            lanes.arrive(&Some("s1".to_owned()), frame()),
            Arrival::Queued
        ));
        assert!(lanes.next(&Some("s2".to_owned())).is_none());
        assert!(matches!(lanes.arrive(&None, frame()), Arrival::Start));
        lanes.drop_waiting();
        assert!(lanes.next(&Some("s0".to_owned())).is_none());
        assert_eq!(lanes.queued, 0);
    }

    #[test]
    fn events_on_a_named_lane_carry_its_stream_id_and_others_are_untouched() {
        let tag = tag_of(&Some("a\"b".to_owned()));
        let event = tagged(tag.as_ref(), Bytes::from_static(br#"{"type":"x"}"#));
        let value: serde_json::Value = serde_json::from_slice(&event).unwrap();
        assert_eq!(value, serde_json::json!({"stream_id": "a\"b", "type": "x"}));
        let empty = tagged(tag.as_ref(), Bytes::from_static(b"{}"));
        assert_eq!(
            serde_json::from_slice::<serde_json::Value>(&empty).unwrap(),
            serde_json::json!({"stream_id": "a\"b"})
        );
        let plain = tagged(None, Bytes::from_static(br#"{"type":"x"}"#));
        assert_eq!(&plain[..], br#"{"type":"x"}"#);
        assert_eq!(lane_of(br#"{"stream_id":"s1"}"#), Ok(Some("s1".to_owned())));
        assert_eq!(lane_of(br#"{"type":"response.create"}"#), Ok(None));
        assert_eq!(lane_of(b"{not json"), Ok(None));
        assert!(lane_of(br#"{"stream_id":7}"#).is_err());
        assert!(lane_of(br#"{"stream_id":""}"#).is_err());
    }
}
