//! Helpers the built-in tools share: reading arguments with JSON-pointer errors, measuring output
//! against the caller's limit, and running bounded blocking work under the context's deadline.
//!
//! Nothing here knows about a particular tool; limits themselves belong to each tool.

use std::io;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::{Map, Value};

use crate::{ToolContext, ToolError};

/// An invalid-arguments error at a JSON pointer.
pub(crate) fn invalid(path: impl Into<String>, message: impl Into<String>) -> ToolError {
    ToolError::InvalidArguments {
        path: path.into(),
        message: message.into(),
    }
}

/// A view of a tool's arguments object with typed getters that name the offending field.
pub(crate) struct Args<'a> {
    map: &'a Map<String, Value>,
}

impl<'a> Args<'a> {
    /// The arguments must be an object; the registry's schema check guarantees it, but a direct
    /// caller may not have run one.
    pub(crate) fn new(value: &'a Value) -> Result<Self, ToolError> {
        match value {
            Value::Object(map) => Ok(Self { map }),
            _ => Err(invalid("", "the arguments must be a JSON object")),
        }
    }

    /// The raw value of a field, null included.
    pub(crate) fn raw(&self, name: &str) -> Option<&'a Value> {
        self.map.get(name)
    }

    /// The raw value of a field, if present and not null.
    pub(crate) fn get(&self, name: &str) -> Option<&'a Value> {
        self.map.get(name).filter(|v| !v.is_null())
    }

    /// The `operation` field.
    pub(crate) fn operation(&self) -> Result<&'a str, ToolError> {
        self.str("operation")
    }

    /// A required string field.
    pub(crate) fn str(&self, name: &str) -> Result<&'a str, ToolError> {
        match self.get(name) {
            Some(Value::String(s)) => Ok(s),
            Some(_) => Err(invalid(format!("/{name}"), "must be a string")),
            None => Err(invalid(
                format!("/{name}"),
                "is required for this operation",
            )),
        }
    }

    /// An optional string field.
    pub(crate) fn opt_str(&self, name: &str) -> Result<Option<&'a str>, ToolError> {
        match self.get(name) {
            Some(Value::String(s)) => Ok(Some(s)),
            Some(_) => Err(invalid(format!("/{name}"), "must be a string")),
            None => Ok(None),
        }
    }

    /// An optional boolean field.
    pub(crate) fn opt_bool(&self, name: &str) -> Result<Option<bool>, ToolError> {
        match self.get(name) {
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(_) => Err(invalid(format!("/{name}"), "must be a boolean")),
            None => Ok(None),
        }
    }

    /// An optional integer field within `min..=max`.
    pub(crate) fn opt_int(&self, name: &str, min: i64, max: i64) -> Result<Option<i64>, ToolError> {
        match self.get(name) {
            None => Ok(None),
            Some(v) => match v.as_i64() {
                Some(n) if (min..=max).contains(&n) => Ok(Some(n)),
                Some(_) => Err(invalid(
                    format!("/{name}"),
                    format!("must be between {min} and {max}"),
                )),
                None => Err(invalid(format!("/{name}"), "must be an integer")),
            },
        }
    }

    /// An optional array of strings.
    pub(crate) fn opt_str_array(&self, name: &str) -> Result<Option<Vec<&'a str>>, ToolError> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::Array(items)) => items
                .iter()
                .enumerate()
                .map(|(i, item)| {
                    item.as_str()
                        .ok_or_else(|| invalid(format!("/{name}/{i}"), "must be a string"))
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Some),
            Some(_) => Err(invalid(format!("/{name}"), "must be an array of strings")),
        }
    }
}

/// Fails with `LimitExceeded` when a text field is longer than `max` bytes.
pub(crate) fn cap_len(field: &str, len: usize, max: usize) -> Result<(), ToolError> {
    if len > max {
        Err(ToolError::LimitExceeded(format!(
            "`{field}` is {len} bytes; the limit is {max} bytes"
        )))
    } else {
        Ok(())
    }
}

/// A writer that only counts, and fails once the count passes a limit, so measuring a huge value
/// stops early instead of serialising all of it.
struct CountingWriter {
    written: usize,
    limit: usize,
}

impl io::Write for CountingWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.written = self.written.saturating_add(buf.len());
        if self.written > self.limit {
            Err(io::Error::other("limit"))
        } else {
            Ok(buf.len())
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// True when `value`, serialised compactly, fits in `limit` bytes.
pub(crate) fn fits(value: &Value, limit: usize) -> bool {
    let mut counter = CountingWriter { written: 0, limit };
    serde_json::to_writer(&mut counter, value).is_ok()
}

/// Returns the value when its serialised size is within the caller's output limit.
pub(crate) fn bounded(value: Value, ctx: &ToolContext) -> Result<Value, ToolError> {
    if fits(&value, ctx.max_output_bytes) {
        Ok(value)
    } else {
        Err(ToolError::OutputTooLarge {
            limit: ctx.max_output_bytes,
        })
    }
}

/// Fails fast when the caller has already cancelled or the deadline has already passed.
pub(crate) fn check_live(ctx: &ToolContext) -> Result<(), ToolError> {
    if ctx.is_cancelled() {
        return Err(ToolError::Cancelled);
    }
    if tokio::time::Instant::now() >= ctx.deadline {
        return Err(ToolError::Timeout);
    }
    Ok(())
}

/// Resolves once the caller cancels; never resolves when the sender is gone without cancelling.
async fn cancelled(ctx: &ToolContext) {
    let mut rx = ctx.cancelled.clone();
    loop {
        if *rx.borrow_and_update() {
            return;
        }
        if rx.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// A flag the blocking work polls between steps, raised when the caller stops waiting (deadline or
/// cancellation), so that work which can stop early does.
#[derive(Clone, Default)]
pub(crate) struct StopFlag(Arc<AtomicBool>);

impl StopFlag {
    pub(crate) fn is_raised(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    fn raise(&self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// What the caller sees when blocking work panicked: the panic is caught, never propagated.
fn panicked() -> ToolError {
    ToolError::Failed("internal error: the computation panicked and was stopped".to_owned())
}

/// Runs `work` on tokio's blocking pool under the context's deadline and cancellation, catching
/// panics. The work receives a [`StopFlag`] raised when the caller gives up; work that cannot be
/// interrupted must be bounded by its inputs.
pub(crate) async fn run_blocking<T, F>(ctx: &ToolContext, work: F) -> Result<T, ToolError>
where
    T: Send + 'static,
    F: FnOnce(&StopFlag) -> Result<T, ToolError> + Send + 'static,
{
    check_live(ctx)?;
    let stop = StopFlag::default();
    let worker_stop = stop.clone();
    let handle = tokio::task::spawn_blocking(move || {
        std::panic::catch_unwind(AssertUnwindSafe(|| work(&worker_stop)))
    });
    let result = tokio::select! {
        joined = tokio::time::timeout_at(ctx.deadline, handle) => match joined {
            Err(_elapsed) => Err(ToolError::Timeout),
            Ok(Err(_join)) => Err(panicked()),
            Ok(Ok(Err(_panic))) => Err(panicked()),
            Ok(Ok(Ok(result))) => result,
        },
        () = cancelled(ctx) => Err(ToolError::Cancelled),
    };
    if matches!(result, Err(ToolError::Timeout | ToolError::Cancelled)) {
        stop.raise();
    }
    result
}

/// Like [`run_blocking`] but on a dedicated thread with a large stack, for interpreters whose
/// recursion depth follows their (model-supplied) program. The stack is reserved, not committed,
/// so its size costs address space only.
pub(crate) async fn run_on_thread<T, F>(
    ctx: &ToolContext,
    name: &str,
    stack_bytes: usize,
    work: F,
) -> Result<T, ToolError>
where
    T: Send + 'static,
    F: FnOnce(&StopFlag) -> Result<T, ToolError> + Send + 'static,
{
    check_live(ctx)?;
    let stop = StopFlag::default();
    let worker_stop = stop.clone();
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name(name.to_owned())
        .stack_size(stack_bytes)
        .spawn(move || {
            let result = std::panic::catch_unwind(AssertUnwindSafe(|| work(&worker_stop)))
                .unwrap_or_else(|_| Err(panicked()));
            // The receiver is gone when the caller stopped waiting; nothing to do then.
            let _ = tx.send(result);
        })
        .map_err(|e| ToolError::Failed(format!("could not start a worker thread: {e}")))?;
    let result = tokio::select! {
        received = tokio::time::timeout_at(ctx.deadline, rx) => match received {
            Err(_elapsed) => Err(ToolError::Timeout),
            Ok(Err(_closed)) => Err(panicked()),
            Ok(Ok(result)) => result,
        },
        () = cancelled(ctx) => Err(ToolError::Cancelled),
    };
    if matches!(result, Err(ToolError::Timeout | ToolError::Cancelled)) {
        stop.raise();
    }
    result
}

/// The JSON Schema fragment for an `operation` enum with a description.
pub(crate) fn operation_schema(ops: &[&str], description: &str) -> Value {
    serde_json::json!({
        "type": "string",
        "enum": ops,
        "description": description,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::time::Duration;

    #[test]
    fn fits_stops_counting_at_the_limit() {
        let big = json!({"a": "x".repeat(100)});
        assert!(fits(&big, 1000));
        assert!(!fits(&big, 50));
    }

    #[test]
    fn args_errors_name_the_field() {
        let v = json!({"n": "x", "list": [1]});
        let args = Args::new(&v).unwrap();
        let err = args.opt_int("n", 0, 5).unwrap_err();
        assert_eq!(err, invalid("/n", "must be an integer"));
        let err = args.opt_str_array("list").unwrap_err();
        assert_eq!(err, invalid("/list/0", "must be a string"));
        assert!(
            matches!(args.str("missing"), Err(ToolError::InvalidArguments { path, .. }) if path == "/missing")
        );
        assert!(Args::new(&json!([1])).is_err());
    }

    #[tokio::test]
    async fn run_blocking_times_out_and_raises_the_stop_flag() {
        let ctx = ToolContext::with_timeout(Duration::from_millis(50), 1024);
        let (tx, rx) = std::sync::mpsc::channel();
        let err = run_blocking(&ctx, move |stop| {
            while !stop.is_raised() {
                std::thread::sleep(Duration::from_millis(5));
            }
            let _ = tx.send(());
            Ok(())
        })
        .await
        .unwrap_err();
        assert_eq!(err, ToolError::Timeout);
        // The worker saw the flag and finished on its own.
        assert!(rx.recv_timeout(Duration::from_secs(5)).is_ok());
    }

    #[tokio::test]
    async fn run_blocking_turns_a_panic_into_an_error() {
        let ctx = ToolContext::default();
        let err = run_blocking::<(), _>(&ctx, |_| panic!("boom"))
            .await
            .unwrap_err();
        assert!(matches!(err, ToolError::Failed(m) if m.contains("panicked")));
        let err = run_on_thread::<(), _>(&ctx, "t", 1 << 20, |_| panic!("boom"))
            .await
            .unwrap_err();
        assert!(matches!(err, ToolError::Failed(m) if m.contains("panicked")));
    }

    #[tokio::test]
    async fn cancellation_stops_waiting() {
        let (tx, rx) = tokio::sync::watch::channel(false);
        let ctx = ToolContext {
            cancelled: rx,
            ..ToolContext::default()
        };
        let waiter = run_blocking(&ctx, |stop| {
            while !stop.is_raised() {
                std::thread::sleep(Duration::from_millis(5));
            }
            Ok(())
        });
        let cancel = async {
            tokio::time::sleep(Duration::from_millis(20)).await;
            let _ = tx.send(true);
        };
        let (result, ()) = tokio::join!(waiter, cancel);
        assert_eq!(result.unwrap_err(), ToolError::Cancelled);
        assert_eq!(check_live(&ctx).unwrap_err(), ToolError::Cancelled);
    }
}
