//! The plain log line against tracing-subscriber's own format, the timestamp and the calendar.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tracing_subscriber::layer::SubscriberExt;

use super::*;

/// A `MakeWriter` keeping every byte written.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .map_err(|_| std::io::ErrorKind::Other)?
            .extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'w> tracing_subscriber::fmt::MakeWriter<'w> for Captured {
    type Writer = Captured;

    fn make_writer(&'w self) -> Self::Writer {
        self.clone()
    }
}

impl Captured {
    fn text(&self) -> String {
        let bytes = self.0.lock().map(|b| b.clone()).unwrap_or_default();
        String::from_utf8(bytes).unwrap_or_default()
    }
}

#[derive(Debug)]
struct Failure {
    text: &'static str,
    source: Option<Box<Failure>>,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.text)
    }
}

impl std::error::Error for Failure {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|s| s as &(dyn std::error::Error + 'static))
    }
}

/// Events of every kind of field, in spans with fields, including text that must be escaped.
fn emit() {
    let outer = tracing::info_span!("request", request_id = "resp_1", route = "/v1/responses");
    let _outer = outer.enter();
    tracing::info!(
        request_id = "resp_1",
        model = "glm-4.6",
        stream = false,
        diagnostics = 3_u64,
        delta = -4_i64,
        ratio = 0.5_f64,
        "forwarding"
    );
    let inner = tracing::warn_span!("round", n = 2_u64, note = "a \"quoted\" name");
    let _inner = inner.enter();
    tracing::warn!(
        quote = "say \"hi\"",
        backslash = "C:\\tmp",
        control = "bell\x07 tab\t esc\x1b[31m",
        unicode = "héllo — ok",
        empty = "",
        r#type = "function",
        shown = %"display value",
        debugged = ?vec![1, 2],
        "falling back: {} {}",
        "esc\x1b[0m",
        "c1\u{85}end"
    );
    let error = Failure {
        text: "outer\x1b failed",
        source: Some(Box::new(Failure {
            text: "middle",
            source: Some(Box::new(Failure {
                text: "root",
                source: None,
            })),
        })),
    };
    tracing::error!(
        error = &error as &(dyn std::error::Error + 'static),
        "storing failed"
    );
    let lone = Failure {
        text: "alone",
        source: None,
    };
    tracing::error!(error = &lone as &(dyn std::error::Error + 'static));
    drop(_inner);
    tracing::info!(message = "a message\x07 as a field", n = 1_u64);
    tracing::debug!("plain");
    tracing::trace!(target: "custom::target", "targeted");
}

/// The default format without colour or time, and ours, each over `emit`.
fn both() -> (String, String) {
    let theirs = Captured::default();
    let layer = tracing_subscriber::fmt::layer()
        .with_ansi(false)
        .without_time()
        .with_writer(theirs.clone());
    let subscriber = tracing_subscriber::registry()
        .with(layer)
        .with(tracing_subscriber::filter::LevelFilter::TRACE);
    tracing::subscriber::with_default(subscriber, emit);

    let ours = Captured::default();
    let layer = tracing_subscriber::fmt::layer()
        .with_ansi(false)
        .fmt_fields(PlainFields)
        .event_format(PlainLine)
        .with_writer(ours.clone());
    let subscriber = tracing_subscriber::registry()
        .with(layer)
        .with(tracing_subscriber::filter::LevelFilter::TRACE);
    tracing::subscriber::with_default(subscriber, emit);
    (theirs.text(), ours.text())
}

#[test]
fn lines_are_the_default_formats_bytes() {
    let (theirs, ours) = both();
    let ours_lines: Vec<&str> = ours.lines().collect();
    let theirs_lines: Vec<&str> = theirs.lines().collect();
    assert_eq!(ours_lines.len(), 7, "{ours}");
    assert_eq!(theirs_lines.len(), ours_lines.len());
    for (mine, default) in ours_lines.iter().zip(&theirs_lines) {
        // Our line starts with the timestamp and a space; the default's was turned off.
        let (stamp, rest) = mine.split_at(28);
        assert_eq!(rest, *default);
        assert_eq!(stamp.len(), 28);
        assert!(stamp.ends_with("Z "), "{stamp}");
    }
    // The escapes did happen (the comparison would pass if both wrote raw bytes).
    assert!(!ours.contains('\x1b') && !ours.contains('\x07') && !ours.contains('\u{85}'));
    assert!(ours.contains("esc\\x1b[0m c1\\u{85}end"), "{ours}");
    assert!(ours.contains(r#"quote="say \"hi\"""#), "{ours}");
    assert!(ours.contains("error=outer\\x1b failed error.sources=[middle, root]"));
    assert!(ours.contains("type=\"function\""), "{ours}");
}

#[test]
fn timestamps_are_utc_with_microseconds() {
    let cases = [
        (0, 0, "1970-01-01T00:00:00.000000Z"),
        (951_782_400, 123_456_789, "2000-02-29T00:00:00.123456Z"),
        (1_796_367_662, 345_678_000, "2026-12-04T07:01:02.345678Z"),
        (4_107_542_399, 999_999_999, "2100-02-28T23:59:59.999999Z"),
        (253_402_300_799, 0, "9999-12-31T23:59:59.000000Z"),
    ];
    for (secs, nanos, expected) in cases {
        let mut text = String::new();
        let time = UNIX_EPOCH + Duration::new(secs, nanos);
        write_timestamp(&mut Writer::new(&mut text), time).unwrap_or_default();
        assert_eq!(text, expected, "{secs}");
    }
    let mut text = String::new();
    let before = UNIX_EPOCH - Duration::from_secs(1);
    write_timestamp(&mut Writer::new(&mut text), before).unwrap_or_default();
    assert_eq!(text, "<unknown time>");
}

#[test]
fn every_day_matches_a_running_calendar() {
    // Walk 1970-01-01 forward a day at a time for 500 years, the slow way.
    let (mut year, mut month, mut day) = (1970_u32, 1_u32, 1_u32);
    for days in 0..(500 * 366) {
        assert_eq!(civil_from_days(days), (year, month, day), "day {days}");
        let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
        let length = match month {
            2 if leap => 29,
            2 => 28,
            4 | 6 | 9 | 11 => 30,
            _ => 31,
        };
        day += 1;
        if day > length {
            day = 1;
            month += 1;
            if month > 12 {
                month = 1;
                year += 1;
            }
        }
    }
}
