//! Fuzzing on the stable toolchain: property tests (proptest) run as fuzz targets, bounded by
//! default and for as long as asked when [`SECS`] says so.
//!
//! A target is one `#[test]` calling [`check`] with its [`Target`] (a name, a regression file,
//! a case count), a strategy that generates inputs shaped like real traffic and mutated
//! ([`json`]: request- and event-shaped documents with wrong types, duplicate keys, deep
//! nesting, huge numbers, bad escapes, bytes that are not UTF-8), and the property.
//!
//! - **Bounded run** (the default, in CI): `Target::cases` cases (`PROPTEST_CASES` overrides),
//!   then the test passes.
//! - **Long run**: `TOOLBRIDGE_FUZZ_SECS=1800 cargo test --workspace --test fuzz_x -- --nocapture`
//!   runs batches of fresh random cases until that many seconds have passed (per test
//!   function) and prints how many inputs it tried.
//! - **Failures**: proptest shrinks a failing input to a minimal one, prints it, and appends its
//!   seed to the target's regression file (`proptest-regressions/<target>.txt` in the crate,
//!   committed), which every later run replays first; a bug found is also kept as an explicit
//!   `#[test]` with the minimal input, which survives changes to the strategies.
//! - **Hangs**: a watchdog thread aborts the process, printing the input, when one case runs
//!   longer than [`HANG_SECS`] (60 s by default): a hang fails loudly instead of stalling CI.
//!
//! Not here: what a target generates or asserts (each target's own file).

pub mod json;

use std::fmt::Debug;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use proptest::strategy::Strategy;
use proptest::test_runner::{Config, FileFailurePersistence, TestCaseError, TestError, TestRunner};

/// Seconds a long run lasts (per test function); unset or 0: the bounded run.
pub const SECS: &str = "TOOLBRIDGE_FUZZ_SECS";

/// Seconds one case may run before the watchdog calls it a hang.
pub const HANG_SECS: &str = "TOOLBRIDGE_FUZZ_HANG_SECS";

/// One fuzz target.
#[derive(Debug, Clone, Copy)]
pub struct Target {
    /// Printed with the counts, and in failures.
    pub name: &'static str,
    /// The regression file, absolute: `concat!(env!("CARGO_MANIFEST_DIR"),
    /// "/proptest-regressions/<target>.txt")`.
    pub regressions: &'static str,
    /// Cases of the bounded run.
    pub cases: u32,
}

/// What a run did: the inputs tried and for how long.
#[derive(Debug, Clone, Copy)]
pub struct Ran {
    pub inputs: u64,
    pub elapsed: Duration,
}

/// Checks `property` on inputs from `strategy`: the bounded run, or the long run when [`SECS`]
/// is set. Panics with the minimal failing input when the property fails (or panics).
pub fn check<S>(
    target: &Target,
    strategy: S,
    property: impl Fn(S::Value) -> Result<(), TestCaseError>,
) -> Ran
where
    S: Strategy,
    S::Value: Clone + Debug + Send + 'static,
{
    let started = Instant::now();
    let watch = Watch::<S::Value>::new(target.name);
    let counted = |value: S::Value| {
        watch.begin(&value);
        let result = property(value);
        watch.end();
        result
    };
    let long = long_run();
    let ran = match long {
        None => {
            let cases = std::env::var("PROPTEST_CASES")
                .ok()
                .and_then(|c| c.parse().ok())
                .unwrap_or(target.cases);
            run_batch(target, &strategy, cases, &counted);
            watch.inputs()
        }
        Some(budget) => {
            // Batches grow while they stay short, so the deadline is never overshot by much.
            let mut batch = 16u32;
            while started.elapsed() < budget {
                let before = Instant::now();
                run_batch(target, &strategy, batch, &counted);
                if before.elapsed() < Duration::from_secs(5) {
                    batch = batch.saturating_mul(2).min(1 << 16);
                } else if before.elapsed() > Duration::from_secs(20) {
                    batch = (batch / 2).max(1);
                }
            }
            watch.inputs()
        }
    };
    let ran = Ran {
        inputs: ran,
        elapsed: started.elapsed(),
    };
    if long.is_some() {
        println!(
            "fuzz {}: {} inputs in {:.0} s ({:.0}/s), no failure",
            target.name,
            ran.inputs,
            ran.elapsed.as_secs_f64(),
            ran.inputs as f64 / ran.elapsed.as_secs_f64().max(0.001),
        );
    }
    ran
}

/// The long run's budget, when one is asked for.
fn long_run() -> Option<Duration> {
    let secs: u64 = std::env::var(SECS).ok()?.trim().parse().ok()?;
    (secs > 0).then(|| Duration::from_secs(secs))
}

/// `cases` fresh random cases (after the persisted failures, replayed first).
fn run_batch<S>(
    target: &Target,
    strategy: &S,
    cases: u32,
    property: &impl Fn(S::Value) -> Result<(), TestCaseError>,
) where
    S: Strategy,
    S::Value: Debug,
{
    let config = Config {
        cases,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(target.regressions))),
        // Shrinking stops after a while: a large input still comes out much smaller.
        max_shrink_iters: 4096,
        max_shrink_time: 120_000,
        ..Config::default()
    };
    let mut runner = TestRunner::new(config);
    match runner.run(strategy, property) {
        Ok(()) => {}
        Err(TestError::Fail(reason, minimal)) => {
            panic!(
                "fuzz target {} failed: {reason}\nminimal input: {minimal:#?}\n(its seed is kept in {})",
                target.name, target.regressions
            )
        }
        Err(TestError::Abort(reason)) => {
            panic!("fuzz target {} aborted: {reason}", target.name)
        }
    }
}

/// The current case, watched for hangs from another thread.
struct Watch<V> {
    shared: Arc<Shared<V>>,
    /// Dropped at the end of the run, which stops the watchdog.
    _stop: mpsc::Sender<()>,
}

struct Shared<V> {
    /// The input being tried, and when it started.
    current: Mutex<Option<(V, Instant)>>,
    inputs: AtomicU64,
}

impl<V: Clone + Debug + Send + 'static> Watch<V> {
    fn new(name: &'static str) -> Self {
        let shared = Arc::new(Shared {
            current: Mutex::new(None),
            inputs: AtomicU64::new(0),
        });
        let hang = std::env::var(HANG_SECS)
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .map_or(Duration::from_secs(60), Duration::from_secs);
        let (stop, stopped) = mpsc::channel::<()>();
        let watched = shared.clone();
        std::thread::spawn(move || {
            while let Err(mpsc::RecvTimeoutError::Timeout) =
                stopped.recv_timeout(Duration::from_millis(500))
            {
                let current = watched.current.lock().unwrap_or_else(|e| e.into_inner());
                if let Some((input, since)) = current.as_ref()
                    && since.elapsed() > hang
                {
                    eprintln!(
                        "fuzz target {name}: one case has run for more than {} s (a hang); its input:\n{input:#?}",
                        hang.as_secs()
                    );
                    std::process::abort();
                }
            }
        });
        Self {
            shared,
            _stop: stop,
        }
    }

    fn begin(&self, input: &V) {
        self.shared.inputs.fetch_add(1, Ordering::Relaxed);
        let mut current = self
            .shared
            .current
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        *current = Some((input.clone(), Instant::now()));
    }

    fn end(&self) {
        let mut current = self
            .shared
            .current
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        *current = None;
    }

    fn inputs(&self) -> u64 {
        self.shared.inputs.load(Ordering::Relaxed)
    }
}
