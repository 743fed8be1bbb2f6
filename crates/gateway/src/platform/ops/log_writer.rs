//! The log writer of a serving process: formatted lines are appended to one shared buffer, and
//! a thread of its own writes the buffer to stderr, a lingering batch at a time.
//!
//! Why a batch: a request logs one line. Handing each line to a writer thread (a channel send
//! that wakes it) cost every request a wake-up, a context switch on a busy core, a write and two
//! futex calls; under load the writer and the request threads also fought over the channel's
//! lock. Here a line is appended under a short lock and the writer is woken only when the
//! buffer was empty (or passes half full); once woken it lingers [`LINGER`] so that the lines
//! of every request finishing meanwhile go out in the same `write`. Under load that is one
//! wake-up and one write per linger, whatever the request rate; an idle gateway writes each
//! line within the linger.
//!
//! Bounds: the buffer holds at most [`BUFFER_BYTES`] (a line never splits). A line that finds
//! it full waits for the writer, at most [`ROOM_WAIT`], then is dropped and counted; the writer
//! says how many were dropped in its next write (stderr blocked for seconds is the only way
//! there). At exit [`LogWriterGuard`] writes out what is buffered, waiting at most
//! [`DRAIN_WAIT`]. A `kill -9` loses at most the lines of the last linger.
//!
//! Lines stay whole: `tracing_subscriber`'s formatter formats an event into a buffer of its own
//! and writes it with one `write_all`, which [`LogLine::write`] appends in one piece.

use std::io::Write;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

/// Bytes the buffer holds at most.
const BUFFER_BYTES: usize = 1 << 20;
/// How long the writer waits, once woken, for more lines before writing.
const LINGER: Duration = Duration::from_millis(10);
/// How long a line waits for room in a full buffer before it is dropped.
const ROOM_WAIT: Duration = Duration::from_secs(2);
/// How long the guard waits at exit for the buffer to be written.
const DRAIN_WAIT: Duration = Duration::from_secs(2);

/// The writer's limits (the constants above; tests shrink them).
#[derive(Clone, Copy, Debug)]
struct Limits {
    buffer_bytes: usize,
    linger: Duration,
    room_wait: Duration,
}

const LIMITS: Limits = Limits {
    buffer_bytes: BUFFER_BYTES,
    linger: LINGER,
    room_wait: ROOM_WAIT,
};

/// What the writer thread is doing, so that a line wakes it only when it must.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Writer {
    /// Waiting for a first line: the next line wakes it.
    Idle,
    /// Woken, gathering lines: only a buffer past half full (or the exit) wakes it early.
    Lingering,
    /// Writing out a batch: nothing to wake.
    Writing,
}

struct State {
    pending: Vec<u8>,
    /// Lines dropped since the last write (the buffer stayed full past [`ROOM_WAIT`]).
    dropped: u64,
    writer: Writer,
    /// Lines waiting for room.
    waiting: usize,
    /// The guard asked for the rest to be written; the writer stops once it is.
    closing: bool,
    /// The writer has stopped: lines go to stderr directly.
    finished: bool,
}

struct Shared {
    state: Mutex<State>,
    /// Wakes the writer.
    work: Condvar,
    /// Wakes lines waiting for room, and the guard waiting for the end.
    room: Condvar,
    limits: Limits,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Makes the subscriber's line writers; cheap to clone.
#[derive(Clone)]
pub(crate) struct LogWriter {
    shared: Arc<Shared>,
}

/// Writes out the buffered lines and stops the writer when dropped (at the end of `main`).
pub(crate) struct LogWriterGuard {
    shared: Arc<Shared>,
}

/// Starts the writer thread, writing to stderr.
pub(crate) fn start() -> std::io::Result<(LogWriter, LogWriterGuard)> {
    start_with(LIMITS, std::io::stderr())
}

fn start_with(
    limits: Limits,
    out: impl Write + Send + 'static,
) -> std::io::Result<(LogWriter, LogWriterGuard)> {
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            pending: Vec::with_capacity(64 * 1024),
            dropped: 0,
            writer: Writer::Writing,
            waiting: 0,
            closing: false,
            finished: false,
        }),
        work: Condvar::new(),
        room: Condvar::new(),
        limits,
    });
    let thread_shared = Arc::clone(&shared);
    std::thread::Builder::new()
        .name("toolbridge-log".to_owned())
        .spawn(move || run(&thread_shared, out))?;
    Ok((
        LogWriter {
            shared: Arc::clone(&shared),
        },
        LogWriterGuard { shared },
    ))
}

/// The writer thread: waits for a line, lingers, swaps the buffer out and writes it, until the
/// guard asks it to stop and everything is written.
fn run(shared: &Shared, mut out: impl Write) {
    let mut batch: Vec<u8> = Vec::with_capacity(64 * 1024);
    loop {
        let mut state = shared.lock();
        if state.pending.is_empty() && !state.closing {
            state.writer = Writer::Idle;
            state = shared
                .work
                .wait_while(state, |s| s.pending.is_empty() && !s.closing)
                .unwrap_or_else(PoisonError::into_inner);
        }
        if !state.closing {
            state.writer = Writer::Lingering;
            let half = shared.limits.buffer_bytes / 2;
            state = shared
                .work
                .wait_timeout_while(state, shared.limits.linger, |s| {
                    !s.closing && s.pending.len() < half
                })
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        state.writer = Writer::Writing;
        std::mem::swap(&mut state.pending, &mut batch);
        let dropped = std::mem::take(&mut state.dropped);
        let closing = state.closing;
        let waiting = state.waiting > 0;
        drop(state);
        if waiting {
            shared.room.notify_all();
        }
        if dropped > 0 {
            let _ = writeln!(
                out,
                "toolbridge: {dropped} log lines dropped: stderr accepted nothing for {} ms",
                shared.limits.room_wait.as_millis()
            );
        }
        let _ = out.write_all(&batch);
        let _ = out.flush();
        batch.clear();
        // A burst's batch is not kept: the buffer and the batch both go back to their usual size.
        batch.shrink_to(64 * 1024);
        if closing {
            let mut state = shared.lock();
            if state.pending.is_empty() {
                state.finished = true;
                drop(state);
                shared.room.notify_all();
                return;
            }
        }
    }
}

impl LogWriter {
    /// Appends one whole line (or several), waking the writer if it must.
    fn append(&self, line: &[u8]) {
        let shared = &*self.shared;
        let limit = shared.limits.buffer_bytes;
        let mut state = shared.lock();
        if state.finished {
            drop(state);
            let _ = std::io::stderr().write_all(line);
            return;
        }
        let full = |s: &State| {
            !s.finished && !s.pending.is_empty() && s.pending.len() + line.len() > limit
        };
        if full(&state) {
            state.waiting += 1;
            let (next, waited) = shared
                .room
                .wait_timeout_while(state, shared.limits.room_wait, |s| full(s))
                .unwrap_or_else(PoisonError::into_inner);
            state = next;
            state.waiting -= 1;
            if waited.timed_out() {
                state.dropped += 1;
                return;
            }
            if state.finished {
                drop(state);
                let _ = std::io::stderr().write_all(line);
                return;
            }
        }
        let before = state.pending.len();
        state.pending.extend_from_slice(line);
        let half = limit / 2;
        let wake = match state.writer {
            Writer::Idle => true,
            Writer::Lingering => before < half && state.pending.len() >= half,
            Writer::Writing => false,
        };
        if wake {
            // Set here, under the lock, so that the lines after this one do not wake it again.
            state.writer = Writer::Lingering;
        }
        drop(state);
        if wake {
            shared.work.notify_one();
        }
    }
}

impl Drop for LogWriterGuard {
    fn drop(&mut self) {
        let shared = &*self.shared;
        let mut state = shared.lock();
        state.closing = true;
        drop(state);
        shared.work.notify_one();
        let state = shared.lock();
        let _ = shared
            .room
            .wait_timeout_while(state, DRAIN_WAIT, |s| !s.finished)
            .unwrap_or_else(PoisonError::into_inner);
    }
}

/// One event's writer: appends each `write` whole.
pub(crate) struct LogLine<'a> {
    writer: &'a LogWriter,
}

impl Write for LogLine<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.writer.append(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'w> tracing_subscriber::fmt::MakeWriter<'w> for LogWriter {
    type Writer = LogLine<'w>;
    fn make_writer(&'w self) -> LogLine<'w> {
        LogLine { writer: self }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sink the test reads, optionally stuck until released.
    #[derive(Clone, Default)]
    struct Sink {
        bytes: Arc<Mutex<Vec<u8>>>,
        writes: Arc<Mutex<usize>>,
        gate: Option<Arc<(Mutex<bool>, Condvar)>>,
    }

    impl Write for Sink {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if let Some(gate) = &self.gate {
                let open = gate.0.lock().unwrap();
                drop(gate.1.wait_while(open, |open| !*open).unwrap());
            }
            self.bytes.lock().unwrap().extend_from_slice(buf);
            *self.writes.lock().unwrap() += 1;
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn limits(buffer_bytes: usize, linger_ms: u64, room_wait_ms: u64) -> Limits {
        Limits {
            buffer_bytes,
            linger: Duration::from_millis(linger_ms),
            room_wait: Duration::from_millis(room_wait_ms),
        }
    }

    /// Lines from several threads all come out whole, each thread's in its order, and the
    /// guard writes out the rest before it returns.
    #[test]
    fn every_line_comes_out_whole_and_in_order_per_thread() {
        let sink = Sink::default();
        let (writer, guard) = start_with(limits(4096, 5, 2000), sink.clone()).unwrap();
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let writer = writer.clone();
                std::thread::spawn(move || {
                    for i in 0..500 {
                        let mut line = LogLine { writer: &writer };
                        line.write_all(
                            format!("thread {t} line {i:04} {}\n", "x".repeat(i % 37)).as_bytes(),
                        )
                        .unwrap();
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        drop(guard);
        let text = String::from_utf8(sink.bytes.lock().unwrap().clone()).unwrap();
        let mut next = [0usize; 4];
        for line in text.lines() {
            let mut words = line.split(' ');
            assert_eq!(words.next(), Some("thread"), "{line:?}");
            let t: usize = words.next().unwrap().parse().unwrap();
            assert_eq!(words.next(), Some("line"));
            let i: usize = words.next().unwrap().parse().unwrap();
            assert_eq!(words.next().unwrap(), "x".repeat(i % 37), "a whole line");
            assert_eq!(i, next[t], "thread {t}'s lines in order");
            next[t] += 1;
        }
        assert_eq!(next, [500; 4], "nothing lost");
    }

    /// Lines written while the writer lingers go out in one write, not one write each.
    #[test]
    fn lines_within_a_linger_share_one_write() {
        let sink = Sink::default();
        let (writer, guard) = start_with(limits(1 << 20, 300, 2000), sink.clone()).unwrap();
        for i in 0..50 {
            LogLine { writer: &writer }
                .write_all(format!("line {i}\n").as_bytes())
                .unwrap();
        }
        drop(guard);
        assert_eq!(
            sink.bytes
                .lock()
                .unwrap()
                .iter()
                .filter(|b| **b == b'\n')
                .count(),
            50
        );
        assert!(
            *sink.writes.lock().unwrap() <= 2,
            "{} writes for 50 lines",
            sink.writes.lock().unwrap()
        );
    }

    /// With stderr stuck and the buffer full, a line waits at most the room wait, is dropped
    /// and counted; once stderr moves again the count is said and later lines go out.
    #[test]
    fn a_full_buffer_drops_after_the_wait_and_says_so() {
        let gate = Arc::new((Mutex::new(false), Condvar::new()));
        let sink = Sink {
            gate: Some(Arc::clone(&gate)),
            ..Sink::default()
        };
        let (writer, guard) = start_with(limits(64, 1, 50), sink.clone()).unwrap();
        // The first batch is taken by the writer, which then blocks in the stuck sink.
        LogLine { writer: &writer }
            .write_all(b"first line\n")
            .unwrap();
        std::thread::sleep(Duration::from_millis(100));
        // This fills the buffer; the next one finds no room and is dropped after the wait.
        LogLine { writer: &writer }.write_all(&[b'a'; 60]).unwrap();
        LogLine { writer: &writer }
            .write_all(b"dropped line\n")
            .unwrap();
        *gate.0.lock().unwrap() = true;
        gate.1.notify_all();
        LogLine { writer: &writer }
            .write_all(b"\nlast line\n")
            .unwrap();
        drop(guard);
        let text = String::from_utf8(sink.bytes.lock().unwrap().clone()).unwrap();
        assert!(text.starts_with("first line\n"), "{text:?}");
        assert!(!text.contains("dropped line"), "{text:?}");
        assert!(text.contains("toolbridge: 1 log lines dropped"), "{text:?}");
        assert!(text.ends_with("last line\n"), "{text:?}");
    }
}
