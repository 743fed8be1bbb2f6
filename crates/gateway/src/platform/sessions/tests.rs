//! The session side channel in isolation: session ids and headers, event shapes, and the
//! in-process channels (lifetime, lagging and bounded subscribers).

use futures::StreamExt;
use http::{HeaderMap, HeaderValue};
use serde_json::json;

use super::*;

fn tool(step: u32) -> SessionEvent {
    SessionEvent::ToolStarted(ToolInfo::new(
        "resp_1",
        format!("call_{step}"),
        "calc",
        step,
        7,
    ))
}

#[test]
fn session_ids_are_bounded_and_restricted() {
    for ok in ["abc", "019a-bc.de_f:1", &"a".repeat(MAX_SESSION_ID_LEN)] {
        assert_eq!(validate_session_id(ok), Ok(()), "{ok}");
    }
    for bad in [
        "",
        "a b",
        "a/b",
        "é",
        "a\nb",
        &"a".repeat(MAX_SESSION_ID_LEN + 1),
    ] {
        assert!(validate_session_id(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn session_header_prefers_codex_and_ignores_invalid_values() {
    let mut headers = HeaderMap::new();
    assert_eq!(session_id_from_headers(&headers), None);
    headers.insert("x-session-id", HeaderValue::from_static("fallback"));
    assert_eq!(
        session_id_from_headers(&headers).as_deref(),
        Some("fallback")
    );
    headers.insert("session-id", HeaderValue::from_static(" codex-1 "));
    assert_eq!(
        session_id_from_headers(&headers).as_deref(),
        Some("codex-1")
    );
    // An invalid `session-id` does not hide a valid `x-session-id`.
    headers.insert("session-id", HeaderValue::from_static("not valid"));
    assert_eq!(
        session_id_from_headers(&headers).as_deref(),
        Some("fallback")
    );
}

#[test]
fn events_serialise_with_their_type_and_without_empty_fields() {
    let event = SessionEvent::ToolFailed(
        ToolInfo::new("resp_1", "call_1", "web_search", 2, 1000)
            .server_label("toolbridge")
            .at(1500, 500)
            .error("timeout: no answer"),
    );
    assert_eq!(
        serde_json::to_value(&event).unwrap(),
        json!({
            "type": "tool.failed", "session_id": "", "response_id": "resp_1", "call_id": "call_1",
            "tool": "web_search", "server_label": "toolbridge", "step": 2, "elapsed_ms": 500,
            "error": "timeout: no answer", "timestamp_ms": 1500
        })
    );
    let back: SessionEvent = serde_json::from_value(serde_json::to_value(&event).unwrap()).unwrap();
    assert_eq!(back, event);
    assert_eq!(
        serde_json::to_value(SessionEvent::StreamLagged { dropped: 3 }).unwrap(),
        json!({"type": "stream.lagged", "dropped": 3})
    );
    let done = SessionEvent::ResponseCompleted(ResponseInfo::new("resp_1", 9).status("completed"));
    assert_eq!(done.kind(), "response.completed");
    assert_eq!(
        serde_json::to_value(&done).unwrap()["type"],
        "response.completed"
    );
}

#[test]
fn prepare_stamps_the_session_and_clips_long_text_on_a_char_boundary() {
    let mut event = SessionEvent::ToolProgress(
        ToolInfo::new("r", "c", "t".repeat(1000), 1, 0).detail("é".repeat(MAX_DETAIL_LEN)),
    );
    event.prepare("s1");
    let SessionEvent::ToolProgress(info) = &event else {
        panic!("kind changed")
    };
    assert_eq!(info.session_id, "s1");
    assert!(info.tool.len() <= MAX_NAME_LEN && info.tool.ends_with('…'));
    let detail = info.detail.as_deref().unwrap();
    assert!(detail.len() <= MAX_DETAIL_LEN && detail.ends_with('…'));
}

#[tokio::test]
async fn a_channel_lives_only_while_its_session_is_watched() {
    let bus = local::LocalBus::new(2, 8);
    bus.publish("nobody", tool(1));
    assert_eq!(
        bus.sessions(),
        0,
        "publishing to an unwatched session keeps nothing"
    );
    let a1 = bus.subscribe("a").unwrap();
    let a2 = bus.subscribe("a").unwrap();
    let b = bus.subscribe("b").unwrap();
    assert_eq!(bus.sessions(), 2);
    assert!(
        matches!(bus.subscribe("c"), Err(SubscribeError::TooManySessions(2))),
        "a third session is refused"
    );
    drop(a1);
    assert_eq!(bus.sessions(), 2, "a subscriber of `a` is still there");
    drop(a2);
    drop(b);
    assert_eq!(
        bus.sessions(),
        0,
        "the last subscriber removed each channel"
    );
    assert!(bus.subscribe("c").is_ok(), "room again");
}

#[tokio::test]
async fn a_lagging_subscriber_gets_the_marker_and_ends_while_others_get_everything() {
    let bus = EventBus::in_process(8, 4, 8);
    let t = Tenant::named("team-a");
    let mut slow = bus.subscribe(&t, "s").await.unwrap();
    let mut fast = bus.subscribe(&t, "s").await.unwrap();
    for step in 1..=100 {
        bus.publish(&t, "s", tool(step));
        let got = fast.next().await.unwrap();
        let SessionEvent::ToolStarted(info) = got else {
            panic!("unexpected {got:?}")
        };
        assert_eq!((info.step, info.session_id.as_str()), (step, "s"));
    }
    assert_eq!(
        slow.next().await,
        Some(SessionEvent::StreamLagged { dropped: 96 }),
        "the slow subscriber lost all but the last 4 events"
    );
    assert_eq!(slow.next().await, None, "then its stream ends");
    // The fast one is unaffected.
    bus.publish(&t, "s", tool(101));
    assert!(matches!(fast.next().await, Some(SessionEvent::ToolStarted(i)) if i.step == 101));
}

#[tokio::test]
async fn subscribers_are_bounded() {
    let bus = EventBus::in_process(8, 4, 1);
    let t = Tenant::open();
    let first = bus.subscribe(&t, "s").await.unwrap();
    assert!(matches!(
        bus.subscribe(&t, "t").await,
        Err(SubscribeError::TooManySubscribers(1))
    ));
    drop(first);
    assert!(bus.subscribe(&t, "t").await.is_ok());
    assert!(matches!(
        bus.subscribe(&t, "bad id").await,
        Err(SubscribeError::InvalidSessionId(_))
    ));
}

#[tokio::test]
async fn one_session_id_under_two_tenants_is_two_sessions() {
    let bus = EventBus::in_process(8, 8, 8);
    let (a, b) = (Tenant::named("team-a"), Tenant::named("team-b"));
    // Tenant names that a naive `tenant:session` join would confuse.
    let (c, d) = (Tenant::named("x:1"), Tenant::named("x"));
    let mut watch_a = bus.subscribe(&a, "s").await.unwrap();
    let mut watch_b = bus.subscribe(&b, "s").await.unwrap();
    let mut watch_d = bus.subscribe(&d, "1:s").await.unwrap();
    bus.publish(&b, "s", tool(7));
    bus.publish(&c, "s", tool(8));
    bus.publish(&a, "s", tool(9));
    let got = watch_a.next().await.unwrap();
    assert!(
        matches!(&got, SessionEvent::ToolStarted(i) if i.step == 9),
        "{got:?}"
    );
    let got = watch_b.next().await.unwrap();
    assert!(
        matches!(&got, SessionEvent::ToolStarted(i) if i.step == 7),
        "{got:?}"
    );
    bus.publish(&d, "1:s", tool(10));
    let got = watch_d.next().await.unwrap();
    assert!(
        matches!(&got, SessionEvent::ToolStarted(i) if i.step == 10),
        "{got:?}"
    );
}

fn sessions_config(section: &str) -> Result<crate::config::Config, String> {
    let text = format!(
        "[sessions]\n{section}\n[providers.up]\nbase_url = \"http://127.0.0.1:9/v1\"\n[[routes]]\nmodel = \"*\"\nprovider = \"up\"\n"
    );
    let file: crate::config::FileConfig = toml::from_str(&text).map_err(|e| e.to_string())?;
    crate::config::Config::from_file(file, &|_| None).map_err(|e| e.to_string())
}

#[test]
fn the_sessions_section_is_validated_and_check_names_the_backend() {
    let local = sessions_config("").unwrap();
    assert_eq!(
        crate::cli::describe_sessions(&local.sessions),
        "in-process (at most 1024 sessions, buffer 256, 1024 subscribers)"
    );
    let redis = sessions_config("redis_url = \"redis://user:secret@10.0.0.5:6379/0\"").unwrap();
    let line = crate::cli::describe_sessions(&redis.sessions);
    assert_eq!(
        line,
        "redis redis://…@10.0.0.5:6379/0 (channels toolbridge:session:{tenant length}:{tenant}:{session_id}, buffer 256, 1024 subscribers)"
    );
    assert!(crate::cli::describe(&redis).contains(&format!("session events: {line}\n")));
    assert!(!format!("{redis:?}").contains("secret"));
    for bad in [
        "buffer = 0",
        "max_sessions = 0",
        "buffer = 1000000",
        "redis_url = \"http://127.0.0.1:6379\"",
        "channel_prefix = \"has space\"",
        "unknown = 1",
    ] {
        assert!(sessions_config(bad).is_err(), "{bad}");
    }
}
