//! The plain text log line, for logs that do not go to a terminal: byte for byte what
//! tracing-subscriber's default (`Full`) format writes without colour, written directly.
//!
//! ```text
//! 2026-12-04T08:01:02.345678Z  INFO request{request_id="resp_…" route="/v1/responses"}: toolbridge_gateway::http::responses::dispatch: forwarding model="m" stream=false
//! ```
//!
//! Why not the default format: it pays for colour even when colour is off (every piece passes
//! through `nu_ansi_term`'s `Display`, with an empty style), writes every string field through
//! `str`'s `Debug` one character at a time, runs each message through its escaping writer one
//! character at a time, and formats the timestamp through six `write!`s. Counted with
//! `scripts/bench-instructions`, that was about 14 K instructions for the one line of a short
//! request. Here the common cases take a fast path that gives the same bytes: a string of
//! printable ASCII without `"` or `\` is written between quotes as it is, a message with no
//! byte that needs escaping is written as it is; anything else falls back to `Debug` and to the
//! same escaping of terminal control characters (ESC, BEL, BS, FF, DEL and the C1 controls)
//! that tracing-subscriber applies to messages, so a field cannot inject escape codes.
//!
//! On a terminal the gateway keeps tracing-subscriber's own coloured format.

use std::fmt::{self, Write as _};
use std::time::{SystemTime, UNIX_EPOCH};

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_log::NormalizeEvent;
use tracing_subscriber::field::RecordFields;
use tracing_subscriber::fmt::format::{FormatEvent, FormatFields, Writer};
use tracing_subscriber::fmt::{FmtContext, FormattedFields};
use tracing_subscriber::registry::LookupSpan;

/// The event format: timestamp, level, the spans from the root with their fields, the target,
/// the event's fields.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct PlainLine;

/// The field format of events and spans: `name=value` pairs separated by spaces, the message
/// first and bare.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct PlainFields;

impl<S, N> FormatEvent<S, N> for PlainLine
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        // A `log` record bridged into tracing names its own target and level.
        let normalized = event.normalized_metadata();
        let meta = normalized.as_ref().unwrap_or_else(|| event.metadata());
        write_timestamp(&mut writer, SystemTime::now())?;
        writer.write_char(' ')?;
        writer.write_str(level(meta.level()))?;
        writer.write_char(' ')?;
        if let Some(scope) = ctx.event_scope() {
            let mut seen = false;
            for span in scope.from_root() {
                writer.write_str(span.metadata().name())?;
                seen = true;
                let extensions = span.extensions();
                if let Some(fields) = extensions.get::<FormattedFields<N>>()
                    && !fields.is_empty()
                {
                    writer.write_char('{')?;
                    writer.write_str(fields)?;
                    writer.write_char('}')?;
                }
                writer.write_char(':')?;
            }
            if seen {
                writer.write_char(' ')?;
            }
        }
        writer.write_str(meta.target())?;
        writer.write_str(": ")?;
        ctx.format_fields(writer.by_ref(), event)?;
        writer.write_char('\n')
    }
}

/// A level as the default format writes it without colour: five characters.
fn level(level: &Level) -> &'static str {
    match *level {
        Level::TRACE => "TRACE",
        Level::DEBUG => "DEBUG",
        Level::INFO => " INFO",
        Level::WARN => " WARN",
        Level::ERROR => "ERROR",
    }
}

/// `2026-12-04T08:01:02.345678Z` (UTC, microseconds), as the default timer writes it. Unlike
/// the default, a clock before 1970 gives `<unknown time>` and a year past 9999 is written as
/// 9999: no clock this gateway runs on reads either.
fn write_timestamp(writer: &mut Writer<'_>, now: SystemTime) -> fmt::Result {
    let Ok(since) = now.duration_since(UNIX_EPOCH) else {
        return writer.write_str("<unknown time>");
    };
    let secs = since.as_secs();
    let (year, month, day) = civil_from_days(secs / 86_400);
    let of_day = secs % 86_400;
    let mut text = *b"0000-00-00T00:00:00.000000Z";
    put(&mut text[0..4], u64::from(year.min(9999)));
    put(&mut text[5..7], u64::from(month));
    put(&mut text[8..10], u64::from(day));
    put(&mut text[11..13], of_day / 3600);
    put(&mut text[14..16], of_day % 3600 / 60);
    put(&mut text[17..19], of_day % 60);
    put(&mut text[20..26], u64::from(since.subsec_micros()));
    // Only ASCII digits and separators were written.
    writer.write_str(std::str::from_utf8(&text).map_err(|_| fmt::Error)?)
}

/// Writes `value`'s last `out.len()` decimal digits into `out`, zero-padded.
fn put(out: &mut [u8], mut value: u64) {
    for digit in out.iter_mut().rev() {
        *digit = b'0' + (value % 10) as u8;
        value /= 10;
    }
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (Howard Hinnant's
/// `civil_from_days`, for days on or after the epoch).
fn civil_from_days(days: u64) -> (u32, u32, u32) {
    let z = days + 719_468;
    let era = z / 146_097;
    let day_of_era = z % 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let mp = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = year_of_era + era * 400 + u64::from(month <= 2);
    (
        u32::try_from(year).unwrap_or(u32::MAX),
        month as u32,
        day as u32,
    )
}

impl<'w> FormatFields<'w> for PlainFields {
    fn format_fields<R: RecordFields>(&self, writer: Writer<'w>, fields: R) -> fmt::Result {
        let mut visitor = Fields {
            writer,
            first: true,
            result: Ok(()),
        };
        fields.record(&mut visitor);
        visitor.result
    }
}

/// The visitor writing one event's or span's fields.
struct Fields<'w> {
    writer: Writer<'w>,
    first: bool,
    result: fmt::Result,
}

/// What a field is written as: the bare message, or `name=`.
enum Slot {
    Message,
    Named,
}

impl Fields<'_> {
    /// Writes the separator and the field's name, unless the field is not written at all (a
    /// bridged `log` record's own metadata) or an earlier write failed.
    fn start(&mut self, field: &Field) -> Option<Slot> {
        let name = field.name();
        if self.result.is_err() || name.starts_with("log.") {
            return None;
        }
        if !std::mem::take(&mut self.first) {
            self.result = self.writer.write_char(' ');
        }
        if name == "message" {
            return Some(Slot::Message);
        }
        let name = name.strip_prefix("r#").unwrap_or(name);
        self.result = self
            .result
            .and_then(|()| self.writer.write_str(name))
            .and_then(|()| self.writer.write_char('='));
        Some(Slot::Named)
    }
}

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.result = match self.start(field) {
            None => return,
            Some(Slot::Message) => Escaping(&mut self.writer).write_str(value),
            Some(Slot::Named) => quoted(&mut self.writer, value),
        };
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        if self.start(field).is_some() {
            self.result = self.writer.write_str(if value { "true" } else { "false" });
        }
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        if self.start(field).is_some() {
            self.result = self.writer.write_str(itoa::Buffer::new().format(value));
        }
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        if self.start(field).is_some() {
            self.result = self.writer.write_str(itoa::Buffer::new().format(value));
        }
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        if self.start(field).is_none() {
            return;
        }
        let writer = &mut self.writer;
        let mut result = write!(Escaping(writer), "{value}");
        if let Some(source) = value.source() {
            let name = field.name();
            let name = name.strip_prefix("r#").unwrap_or(name);
            result = result.and_then(|()| write!(writer, " {name}.sources=["));
            let mut next = Some(source);
            let mut first = true;
            while let Some(error) = next {
                if !std::mem::take(&mut first) {
                    result = result.and_then(|()| writer.write_str(", "));
                }
                result = result.and_then(|()| write!(Escaping(writer), "{error}"));
                next = error.source();
            }
            result = result.and_then(|()| writer.write_char(']'));
        }
        self.result = result;
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.result = match self.start(field) {
            None => return,
            Some(Slot::Message) => write!(Escaping(&mut self.writer), "{value:?}"),
            Some(Slot::Named) => write!(self.writer, "{value:?}"),
        };
    }
}

/// A string field as `str`'s `Debug` writes it: between quotes, escaped.
fn quoted(writer: &mut Writer<'_>, value: &str) -> fmt::Result {
    let plain = value
        .bytes()
        .all(|b| (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\');
    if plain {
        writer.write_char('"')?;
        writer.write_str(value)?;
        writer.write_char('"')
    } else {
        write!(writer, "{value:?}")
    }
}

/// Writes through, escaping what a terminal would take as a control sequence (ESC, BEL, BS,
/// FF, DEL and the C1 controls U+0080..U+009F), as tracing-subscriber escapes messages.
struct Escaping<'a, 'w>(&'a mut Writer<'w>);

impl fmt::Write for Escaping<'_, '_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        // A C1 control is U+0080..U+009F: 0xC2 then 0x80..0x9F in UTF-8.
        if !s
            .bytes()
            .any(|b| matches!(b, 0x1b | 0x07 | 0x08 | 0x0c | 0x7f | 0xc2))
        {
            return self.0.write_str(s);
        }
        for ch in s.chars() {
            match ch {
                '\x1b' => self.0.write_str("\\x1b")?,
                '\x07' => self.0.write_str("\\x07")?,
                '\x08' => self.0.write_str("\\x08")?,
                '\x0c' => self.0.write_str("\\x0c")?,
                '\x7f' => self.0.write_str("\\x7f")?,
                ch if ('\u{80}'..='\u{9f}').contains(&ch) => {
                    write!(self.0, "\\u{{{:x}}}", ch as u32)?;
                }
                ch => self.0.write_char(ch)?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
