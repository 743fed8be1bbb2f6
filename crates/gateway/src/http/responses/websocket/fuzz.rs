//! Fuzz target, in-crate part: what a WebSocket text frame meets before its response starts —
//! its lane (`lanes::lane_of`), the per-socket bound and order of lanes (`lanes::Lanes`), and
//! the tagging of its events with the lane (`lanes::tag_of`, `lanes::tagged`). The frame's
//! reading and its response (`frame`, private) are fuzzed over a real socket in
//! `tests/fuzz_websocket.rs`.
//!
//! Properties: `lane_of` never panics, names a lane only for a `stream_id` string of 1 to 128
//! bytes (the frame's own, when the frame is a plain JSON object) and refuses only a frame whose
//! `stream_id` is something else; `Lanes`, driven by any sequence of arrivals, ends and drops,
//! starts a frame only on an idle lane under [`MAX_STREAMS`], queues only on a busy lane under
//! [`MAX_QUEUED`], refuses otherwise with the documented code, and hands each lane's waiting
//! frames back in arrival order; a tagged event is the same JSON object with `stream_id` first.
//!
//! Long run: `TOOLBRIDGE_FUZZ_SECS=600 cargo test --workspace --lib websocket::fuzz --
//! --nocapture` (the seconds are per property).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code fails loudly

use std::collections::{HashMap, HashSet, VecDeque};

use axum::body::Bytes;
use proptest::prelude::*;
use proptest::sample::Index;
use serde_json::{Value, json};
use toolbridge_testkit::fuzz::json::{self as fj, Json};
use toolbridge_testkit::fuzz::{Target, check};

use super::lanes::{Arrival, Lane, Lanes, MAX_QUEUED, MAX_STREAMS, lane_of, tag_of, tagged};

const TARGET: Target = Target {
    name: "websocket-lanes",
    regressions: concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/proptest-regressions/fuzz_websocket_lanes.txt"
    ),
    cases: 256,
};

/// `stream_id` values a client may send, right and wrong.
fn stream_id() -> impl Strategy<Value = Value> {
    prop_oneof![
        4 => "[a-z0-9_-]{1,12}".prop_map(Value::String),
        1 => Just(json!("")),
        1 => (120..140usize).prop_map(|n| json!("s".repeat(n))),
        1 => (40..50usize).prop_map(|n| json!("é".repeat(n))),
        1 => "\\PC{1,8}".prop_map(Value::String),
        1 => Just(json!(null)),
        1 => Just(json!(7)),
        1 => Just(json!(["s1"])),
        1 => Just(json!({"id": "s1"})),
        1 => Just(json!(true)),
    ]
}

fn frame() -> impl Strategy<Value = Json> {
    let base = (prop::option::of(stream_id()), any::<bool>()).prop_map(|(id, generate)| {
        let mut frame = json!({"type": "response.create", "model": "m", "input": "hi"});
        if let Some(id) = id {
            frame["stream_id"] = id;
        }
        if !generate {
            frame["generate"] = json!(false);
        }
        Json::from(frame)
    });
    prop_oneof![
        8 => fj::mutated(base, 3),
        1 => fj::wild(),
        1 => prop::collection::vec(any::<u8>(), 0..64).prop_map(Json::Raw),
    ]
}

#[test]
fn a_frame_names_a_lane_only_with_a_short_string() {
    check(&TARGET, frame(), |frame| {
        let bytes = fj::render(&frame);
        // The frame's own `stream_id`, when it is a plain JSON object that names it once and
        // without escapes in its keys (the reading may refuse a repeated one).
        let text = String::from_utf8_lossy(&bytes);
        let plain = text.matches("stream_id").count() <= 1 && !text.contains("\\u");
        let named = serde_json::from_slice::<Value>(&bytes)
            .ok()
            .filter(|v| plain && v.is_object())
            .map(|v| v.get("stream_id").cloned());
        match lane_of(&bytes) {
            Ok(Some(id)) => {
                prop_assert!(!id.is_empty() && id.len() <= 128, "lane {:?}", id);
                if let Some(named) = named {
                    prop_assert_eq!(named, Some(json!(id)));
                }
            }
            Ok(None) => {
                if let Some(Some(named)) = named {
                    prop_assert!(named.is_null(), "no lane for stream_id {}", named);
                }
            }
            Err(message) => {
                prop_assert!(message.contains("stream_id"));
                if let Some(named) = named {
                    let named = named.unwrap_or(Value::Null);
                    let valid = named
                        .as_str()
                        .is_some_and(|s| !s.is_empty() && s.len() <= 128);
                    prop_assert!(!valid && !named.is_null(), "refused stream_id {}", named);
                }
            }
        }
        Ok(())
    });
}

/// One step of a socket's life, as its lanes see it.
#[derive(Clone, Debug)]
enum Op {
    /// A frame arrives on lane `n` (`None`: unnamed).
    Arrive(Option<u8>),
    /// The response on lane `n` ends.
    End(Option<u8>),
    /// The socket is ending: the waiting frames go.
    DropWaiting,
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    let lane = prop::option::weighted(0.8, 0u8..12);
    prop::collection::vec(
        prop_oneof![
            6 => lane.clone().prop_map(Op::Arrive),
            4 => lane.prop_map(Op::End),
            1 => Just(Op::DropWaiting),
        ],
        0..120,
    )
}

#[test]
fn lanes_keep_their_bounds_and_their_order() {
    check(&TARGET, ops(), |ops| {
        let mut lanes = Lanes::default();
        // The model: the busy lanes and, for each, the frames waiting in order.
        let mut busy: HashMap<Lane, VecDeque<u64>> = HashMap::new();
        let mut sent = 0u64;
        for op in ops {
            let name = |n: Option<u8>| n.map(|n| format!("s{n}"));
            match op {
                Op::Arrive(n) => {
                    let lane = name(n);
                    sent += 1;
                    let frame = Bytes::from(sent.to_string());
                    let queued: usize = busy.values().map(VecDeque::len).sum();
                    match lanes.arrive(&lane, frame) {
                        Arrival::Start => {
                            prop_assert!(!busy.contains_key(&lane), "started on a busy lane");
                            prop_assert!(busy.len() < MAX_STREAMS, "started past the bound");
                            busy.insert(lane, VecDeque::new());
                        }
                        Arrival::Queued => {
                            prop_assert!(queued < MAX_QUEUED, "queued past the bound");
                            let Some(waiting) = busy.get_mut(&lane) else {
                                return Err(TestCaseError::fail("queued on an idle lane"));
                            };
                            waiting.push_back(sent);
                        }
                        Arrival::Refused(code, message) => {
                            prop_assert!(!message.is_empty());
                            if busy.contains_key(&lane) {
                                prop_assert_eq!(code, "too_many_queued_frames");
                                prop_assert_eq!(queued, MAX_QUEUED);
                            } else {
                                prop_assert_eq!(code, "too_many_streams");
                                prop_assert_eq!(busy.len(), MAX_STREAMS);
                            }
                        }
                    }
                }
                Op::End(n) => {
                    let lane = name(n);
                    let next = lanes.next(&lane);
                    let expected = match busy.get_mut(&lane) {
                        None => None,
                        Some(waiting) => match waiting.pop_front() {
                            Some(frame) => Some(frame),
                            None => {
                                busy.remove(&lane);
                                None
                            }
                        },
                    };
                    let next = next.map(|b| String::from_utf8(b.to_vec()).unwrap());
                    prop_assert_eq!(next, expected.map(|f| f.to_string()), "the next frame");
                }
                Op::DropWaiting => {
                    lanes.drop_waiting();
                    for waiting in busy.values_mut() {
                        waiting.clear();
                    }
                }
            }
            let lanes_busy: HashSet<&Lane> = busy.keys().collect();
            prop_assert!(lanes_busy.len() <= MAX_STREAMS);
        }
        Ok(())
    });
}

#[test]
fn a_tagged_event_is_the_same_object_with_its_lane_first() {
    let event = fj::wild()
        .prop_map(|j| serde_json::from_slice::<Value>(&fj::render(&j)).ok())
        .prop_filter_map("an object without a lane", |v| {
            v.and_then(|v| v.as_object().cloned())
                .filter(|m| !m.contains_key("stream_id"))
        });
    let id = prop_oneof![
        "[a-z0-9]{1,8}",
        "\\PC{1,40}",
        Just("a\"b\\c\u{1}\n".to_owned())
    ];
    check(
        &TARGET,
        (id, event, any::<Index>()),
        |(id, event, spaces)| {
            let tag = tag_of(&Some(id.clone()));
            prop_assert!(tag.is_some());
            let mut text = serde_json::to_string(&Value::Object(event.clone())).unwrap();
            // Our events are compact, but an empty object with a space inside still tags.
            if event.is_empty() && spaces.index(2) == 1 {
                text = "{ }".to_owned();
            }
            let out = tagged(tag.as_ref(), Bytes::from(text.clone()));
            let value: Value = serde_json::from_slice(&out).map_err(|e| {
                TestCaseError::fail(format!("not JSON ({e}): {}", String::from_utf8_lossy(&out)))
            })?;
            let map = value.as_object().unwrap();
            let mut keys = map.keys();
            prop_assert_eq!(keys.next().map(String::as_str), Some("stream_id"));
            prop_assert_eq!(&map["stream_id"], &json!(id));
            let mut rest = map.clone();
            rest.shift_remove("stream_id");
            prop_assert_eq!(&rest, &event);
            // Untagged, the event is untouched.
            prop_assert_eq!(
                &tagged(None, Bytes::from(text.clone()))[..],
                text.as_bytes()
            );
            Ok(())
        },
    );
}
