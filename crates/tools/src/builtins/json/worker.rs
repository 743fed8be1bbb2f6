//! The isolated jq worker: one query per process, spoken as JSON over stdin and stdout.
//!
//! [`jq_worker_main`] reads one request, `{"filter": …, "input": …, "max_output_bytes": …,
//! "timeout_ms": …}`, runs it with [`jq::run_query`] — the very code the in-process path runs,
//! pre-checks, step budget and result caps included — on a thread with [`jq::STACK_BYTES`] of
//! stack, and writes one answer: `{"results": [...]}` or `{"error": {"code": …, "message": …}}`
//! (with `path` for `invalid_arguments` and `limit` for `output_too_large`). It exits 0 whenever it
//! wrote an answer for a request it could read.
//!
//! Before it reads anything the worker puts itself under an address-space limit (`RLIMIT_AS`, soft
//! and hard) of the bytes its parent ([`super::isolated`]) names in [`MEMORY_LIMIT_VAR`], through
//! `setrlimit` (rustix's safe wrapper: no shell, no `unsafe`). When the variable is missing or
//! malformed, or the limit cannot be set, it exits with [`EXIT_NO_LIMIT`] without reading the
//! request, so a query never runs unlimited. The parent kills it at the deadline. A filter that
//! outgrows the limit makes an allocation fail, which aborts the worker; the parent reports that
//! as a memory limit. Both sides read the wire's JSON with serde_json's
//! recursion limit lifted, after a byte scan has checked the nesting, because a document or result
//! may nest as deeply as the tool allows plus the envelope — one level more than serde_json's own
//! parser takes.

use std::io::{Read, Write};
use std::panic::AssertUnwindSafe;
use std::time::{Duration, Instant};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::jq::{self, MAX_FILTER_BYTES, MAX_RESULT_DEPTH, STACK_BYTES};
use super::{MAX_DEPTH, MAX_DOCUMENT_BYTES};
use crate::ToolError;
use crate::builtins::common::StopFlag;

/// The most bytes of a request: the largest document, the largest filter fully escaped, and the
/// envelope.
pub(crate) const MAX_REQUEST_BYTES: usize = MAX_DOCUMENT_BYTES + 6 * MAX_FILTER_BYTES + 4096;
/// How deeply the wire's JSON may nest: the deepest document or result plus the envelope.
const MAX_WIRE_DEPTH: usize = max(MAX_DEPTH, MAX_RESULT_DEPTH) + 8;
/// The longest a worker lets a query run by itself (the parent kills it at its deadline anyway).
const MAX_TIMEOUT_MS: u64 = 24 * 60 * 60 * 1000;

/// The worker wrote an answer.
pub(crate) const EXIT_ANSWERED: i32 = 0;
/// The request could not be read; the answer says why.
pub(crate) const EXIT_BAD_REQUEST: i32 = 2;
/// The answer could not be written.
pub(crate) const EXIT_WRITE_FAILED: i32 = 3;
/// The memory limit could not be set; nothing was read or run.
pub(crate) const EXIT_NO_LIMIT: i32 = 125;
/// The environment variable that carries the worker's address-space limit, in bytes (the only
/// variable in its environment).
pub(crate) const MEMORY_LIMIT_VAR: &str = "TOOLBRIDGE_JQ_MEMORY_LIMIT_BYTES";

const fn max(a: usize, b: usize) -> usize {
    if a > b { a } else { b }
}

/// What the parent asks the worker to do.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Request {
    /// The jq filter.
    pub(crate) filter: String,
    /// The document.
    pub(crate) input: Value,
    /// The caller's output limit, in serialised bytes of all results together.
    pub(crate) max_output_bytes: usize,
    /// How long the query may run, in milliseconds from when the worker starts it.
    pub(crate) timeout_ms: u64,
}

/// An error on the wire.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct WireError {
    /// [`ToolError::code`].
    pub(crate) code: String,
    /// The message (for `invalid_arguments`, `limit_exceeded` and `tool_failed`, the variant's own
    /// text).
    pub(crate) message: String,
    /// `invalid_arguments`: the JSON pointer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) path: Option<String>,
    /// `output_too_large`: the limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) limit: Option<usize>,
}

/// What the worker answers: exactly one of the two fields.
#[derive(Debug, Default, Serialize, Deserialize)]
pub(crate) struct Answer {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) results: Option<Vec<Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) error: Option<WireError>,
}

impl Answer {
    fn from_result(result: Result<Vec<Value>, ToolError>) -> Self {
        match result {
            Ok(results) => Self {
                results: Some(results),
                error: None,
            },
            Err(error) => Self {
                results: None,
                error: Some(WireError::from_error(&error)),
            },
        }
    }

    /// The query's outcome; `limit` stands in for an `output_too_large` answer without one.
    pub(crate) fn into_result(self, limit: usize) -> Result<Vec<Value>, ToolError> {
        match (self.results, self.error) {
            (Some(results), None) => Ok(results),
            (None, Some(error)) => Err(error.into_error(limit)),
            _ => Err(ToolError::Failed(
                "the jq worker gave a malformed answer".to_owned(),
            )),
        }
    }
}

impl WireError {
    fn from_error(error: &ToolError) -> Self {
        let (message, path, limit) = match error {
            ToolError::InvalidArguments { path, message } => {
                (message.clone(), Some(path.clone()), None)
            }
            ToolError::LimitExceeded(message) | ToolError::Failed(message) => {
                (message.clone(), None, None)
            }
            ToolError::OutputTooLarge { limit } => (error.to_string(), None, Some(*limit)),
            other => (other.to_string(), None, None),
        };
        Self {
            code: error.code().to_owned(),
            message,
            path,
            limit,
        }
    }

    fn into_error(self, limit: usize) -> ToolError {
        match self.code.as_str() {
            "invalid_arguments" => ToolError::InvalidArguments {
                path: self.path.unwrap_or_default(),
                message: self.message,
            },
            "limit_exceeded" => ToolError::LimitExceeded(self.message),
            "timeout" => ToolError::Timeout,
            "cancelled" => ToolError::Cancelled,
            "output_too_large" => ToolError::OutputTooLarge {
                limit: self.limit.unwrap_or(limit),
            },
            _ => ToolError::Failed(self.message),
        }
    }
}

/// How deeply `bytes`, read as JSON, nests arrays and objects (brackets inside strings do not
/// count). Malformed JSON gets some number; the parser rejects it afterwards.
fn nesting(bytes: &[u8]) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    let (mut in_string, mut escaped) = (false, false);
    for &byte in bytes {
        if in_string {
            if escaped {
                escaped = false;
            } else if byte == b'\\' {
                escaped = true;
            } else if byte == b'"' {
                in_string = false;
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// Parses wire JSON whose nesting a scan has bounded, without serde_json's recursion limit.
pub(crate) fn from_wire<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, String> {
    let depth = nesting(bytes);
    if depth > MAX_WIRE_DEPTH {
        return Err(format!(
            "the message nests {depth} levels deep; the limit is {MAX_WIRE_DEPTH}"
        ));
    }
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    deserializer.disable_recursion_limit();
    let value = T::deserialize(&mut deserializer).map_err(|e| e.to_string())?;
    deserializer.end().map_err(|e| e.to_string())?;
    Ok(value)
}

fn read_request(reader: &mut impl Read) -> Result<Request, ToolError> {
    let mut bytes = Vec::new();
    let limit = u64::try_from(MAX_REQUEST_BYTES).unwrap_or(u64::MAX);
    reader
        .take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| ToolError::Failed(format!("the jq worker could not read its request: {e}")))?;
    if bytes.len() > MAX_REQUEST_BYTES {
        return Err(ToolError::LimitExceeded(format!(
            "the jq request is larger than {MAX_REQUEST_BYTES} bytes"
        )));
    }
    from_wire(&bytes)
        .map_err(|e| ToolError::Failed(format!("the jq worker got a malformed request: {e}")))
}

/// Runs the query on a thread with the stack the evaluator needs, catching panics.
fn execute(request: Request) -> Result<Vec<Value>, ToolError> {
    let timeout = Duration::from_millis(request.timeout_ms.min(MAX_TIMEOUT_MS));
    let started = Instant::now();
    let deadline = started.checked_add(timeout).unwrap_or(started);
    let handle = std::thread::Builder::new()
        .name("toolbridge-jq".to_owned())
        .stack_size(STACK_BYTES)
        .spawn(move || {
            std::panic::catch_unwind(AssertUnwindSafe(|| {
                jq::run_query(
                    &request.filter,
                    request.input,
                    request.max_output_bytes,
                    deadline,
                    &StopFlag::default(),
                )
            }))
        })
        .map_err(|e| ToolError::Failed(format!("could not start the query thread: {e}")))?;
    match handle.join() {
        Ok(Ok(result)) => result,
        Ok(Err(_)) | Err(_) => Err(ToolError::Failed(
            "internal error: the computation panicked and was stopped".to_owned(),
        )),
    }
}

fn write_answer(writer: &mut impl Write, answer: &Answer) -> std::io::Result<()> {
    let mut writer = std::io::BufWriter::new(writer);
    serde_json::to_writer(&mut writer, answer)?;
    writer.flush()
}

/// Puts this process under an address-space limit of `bytes` (soft and hard; never above a hard
/// limit it already has, which it could not raise).
#[cfg(unix)]
fn limit_address_space(bytes: u64) -> Result<(), String> {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let bytes = getrlimit(Resource::As)
        .maximum
        .map_or(bytes, |hard| hard.min(bytes));
    setrlimit(
        Resource::As,
        Rlimit {
            current: Some(bytes),
            maximum: Some(bytes),
        },
    )
    .map_err(|e| e.to_string())
}

#[cfg(not(unix))]
fn limit_address_space(_bytes: u64) -> Result<(), String> {
    Err("address-space limits need a Unix system".to_owned())
}

/// The limit the parent asked for in [`MEMORY_LIMIT_VAR`], set on this process.
fn apply_memory_limit() -> Result<(), String> {
    let bytes = std::env::var(MEMORY_LIMIT_VAR)
        .map_err(|_| format!("{MEMORY_LIMIT_VAR} is not set"))?
        .parse::<u64>()
        .map_err(|e| format!("{MEMORY_LIMIT_VAR}: {e}"))?;
    limit_address_space(bytes)
}

/// The worker process's whole life: puts itself under the memory limit its parent set in
/// `TOOLBRIDGE_JQ_MEMORY_LIMIT_BYTES`, reads one request from stdin, runs it, writes one answer to stdout, and
/// returns the exit code: 0 when it answered, 2 when the request was unreadable (the answer says
/// why), 3 when the answer could not be written, 125 when the memory limit could not be set
/// (nothing read, nothing written). A binary calls it from `main` and exits with the code. It
/// writes nothing to stderr (the parent discards it) and never panics; an allocation failure under
/// the memory limit aborts it.
pub fn jq_worker_main() -> i32 {
    if apply_memory_limit().is_err() {
        return EXIT_NO_LIMIT;
    }
    let (answer, code) = match read_request(&mut std::io::stdin().lock()) {
        Ok(request) => (Answer::from_result(execute(request)), EXIT_ANSWERED),
        Err(error) => (Answer::from_result(Err(error)), EXIT_BAD_REQUEST),
    };
    match write_answer(&mut std::io::stdout().lock(), &answer) {
        Ok(()) => code,
        Err(_) => EXIT_WRITE_FAILED,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn nesting_ignores_brackets_in_strings() {
        assert_eq!(nesting(br#"{"a": [1, "[[[\"]]"]}"#), 2);
        assert_eq!(nesting(b"1"), 0);
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        assert_eq!(nesting(deep.as_bytes()), 200);
        assert!(from_wire::<Value>(deep.as_bytes()).is_err());
    }

    #[test]
    fn wire_reads_one_level_more_than_serde_json_does() {
        let deep = format!("{}{}", "[".repeat(MAX_DEPTH + 3), "]".repeat(MAX_DEPTH + 3));
        assert!(serde_json::from_str::<Value>(&deep).is_err());
        assert!(from_wire::<Value>(deep.as_bytes()).is_ok());
    }

    #[test]
    fn errors_round_trip() {
        let errors = [
            ToolError::InvalidArguments {
                path: "/filter".to_owned(),
                message: "no".to_owned(),
            },
            ToolError::LimitExceeded("too many".to_owned()),
            ToolError::Failed("jq error: boom".to_owned()),
            ToolError::OutputTooLarge { limit: 7 },
            ToolError::Timeout,
            ToolError::Cancelled,
        ];
        for error in errors {
            let answer = Answer::from_result(Err(error.clone()));
            let bytes = serde_json::to_vec(&answer).unwrap();
            let back: Answer = from_wire(&bytes).unwrap();
            assert_eq!(back.into_result(1).unwrap_err(), error);
        }
        let ok: Answer = from_wire(br#"{"results": [1, {"a": 2}]}"#).unwrap();
        assert_eq!(ok.into_result(1).unwrap(), vec![json!(1), json!({"a": 2})]);
        let neither: Answer = from_wire(b"{}").unwrap();
        assert!(matches!(neither.into_result(1), Err(ToolError::Failed(_))));
    }

    #[test]
    fn requests_are_read_and_capped() {
        let request =
            json!({"filter": ".a", "input": {"a": 1}, "max_output_bytes": 100, "timeout_ms": 1000});
        let bytes = serde_json::to_vec(&request).unwrap();
        let read = read_request(&mut bytes.as_slice()).unwrap();
        assert_eq!(execute(read).unwrap(), vec![json!(1)]);
        let huge = vec![b' '; MAX_REQUEST_BYTES + 10];
        assert!(matches!(
            read_request(&mut huge.as_slice()),
            Err(ToolError::LimitExceeded(_))
        ));
        assert!(matches!(
            read_request(&mut b"{".as_slice()),
            Err(ToolError::Failed(_))
        ));
    }
}
