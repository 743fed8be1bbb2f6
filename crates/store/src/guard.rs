//! Failing fast when the database is away: every store operation runs under a deadline, and a
//! circuit opens after repeated outages so that later calls answer `store_unavailable` at once
//! instead of each waiting out its own timeout.
//!
//! The layers, from the bottom: the pool waits at most `acquire_timeout` for a connection;
//! PostgreSQL stops any statement after `timeout` (`statement_timeout`, set on every
//! connection); and [`Circuit::run`] bounds the whole operation (acquire, statements, commit)
//! by `timeout` on the client side too, which is what catches a database that stopped
//! answering without closing its connections. After `circuit_failures` outages in a row the
//! circuit is open for `circuit_cooldown`; then one call goes through as a probe (the others
//! still fail fast), and its result closes or reopens it.
//!
//! Only outages count: a constraint violation or a row that does not decode is the caller's
//! problem, not the database's, and neither opens nor closes the circuit's count.
//!
//! Not here: retries (the gateway decides what a failed write means for its client).

use std::future::Future;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::StoreError;

/// How the store bounds its waits; [`Default`] gives the documented defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreOptions {
    /// The longest wait for a pooled connection (including connecting). Default 2 s.
    pub acquire_timeout: Duration,
    /// The longest one store operation may take, end to end; PostgreSQL also gets it as
    /// `statement_timeout`. Default 5 s.
    pub timeout: Duration,
    /// Outages in a row that open the circuit. Default 5; 0 never opens it.
    pub circuit_failures: u32,
    /// How long an open circuit answers at once before a probe is let through. Default 10 s.
    pub circuit_cooldown: Duration,
}

impl Default for StoreOptions {
    fn default() -> Self {
        Self {
            acquire_timeout: Duration::from_secs(2),
            timeout: Duration::from_secs(5),
            circuit_failures: 5,
            circuit_cooldown: Duration::from_secs(10),
        }
    }
}

/// What the store's circuit says about the database.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreHealth {
    /// Answering (or not yet known to fail).
    Ok,
    /// The last operations failed, but not enough in a row to open the circuit.
    Degraded,
    /// The circuit is open: store calls fail at once until a probe succeeds.
    Unavailable,
}

impl StoreHealth {
    /// `ok`, `degraded` or `unavailable`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Degraded => "degraded",
            Self::Unavailable => "unavailable",
        }
    }
}

#[derive(Debug, Default)]
struct State {
    /// Outages in a row.
    failures: u32,
    /// While set and in the future, calls are refused at once.
    open_until: Option<Instant>,
    /// The circuit has opened since it was last closed by a success.
    opened: bool,
}

/// The store's circuit breaker and operation deadline.
#[derive(Debug)]
pub(crate) struct Circuit {
    options: StoreOptions,
    state: Mutex<State>,
}

impl Circuit {
    pub(crate) fn new(options: StoreOptions) -> Self {
        Self {
            options,
            state: Mutex::default(),
        }
    }

    /// Runs one store operation under the deadline, through the circuit.
    pub(crate) async fn run<T>(
        &self,
        operation: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        self.admit()?;
        let result = match tokio::time::timeout(self.options.timeout, operation).await {
            Ok(result) => result,
            Err(_) => Err(StoreError::Unavailable(format!(
                "the store did not answer within {} ms",
                self.options.timeout.as_millis()
            ))),
        };
        match &result {
            Err(e) if e.is_outage() => self.failed(),
            _ => self.succeeded(),
        }
        result
    }

    pub(crate) fn health(&self) -> StoreHealth {
        let Ok(state) = self.state.lock() else {
            return StoreHealth::Ok;
        };
        if state.opened {
            StoreHealth::Unavailable
        } else if state.failures > 0 {
            StoreHealth::Degraded
        } else {
            StoreHealth::Ok
        }
    }

    /// Refuses at once while the circuit is open; past the cool-down, lets one call through as
    /// the probe (the circuit stays shut to others for the probe's deadline, so a probe that is
    /// cancelled midway does not keep it shut for good).
    fn admit(&self) -> Result<(), StoreError> {
        let Ok(mut state) = self.state.lock() else {
            return Ok(());
        };
        let Some(until) = state.open_until else {
            return Ok(());
        };
        let now = Instant::now();
        if now < until {
            return Err(StoreError::Unavailable(format!(
                "the store failed {} times in a row; retrying it in at most {} ms",
                state.failures.max(1),
                until.saturating_duration_since(now).as_millis()
            )));
        }
        state.open_until = Some(now + self.options.timeout);
        Ok(())
    }

    fn failed(&self) {
        let Ok(mut state) = self.state.lock() else {
            return;
        };
        state.failures = state.failures.saturating_add(1);
        let threshold = self.options.circuit_failures;
        if threshold > 0 && (state.opened || state.failures >= threshold) {
            state.opened = true;
            state.open_until = Some(Instant::now() + self.options.circuit_cooldown);
        }
    }

    fn succeeded(&self) {
        if let Ok(mut state) = self.state.lock() {
            *state = State::default();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn circuit(failures: u32, cooldown_ms: u64) -> Circuit {
        Circuit::new(StoreOptions {
            acquire_timeout: Duration::from_millis(100),
            timeout: Duration::from_millis(200),
            circuit_failures: failures,
            circuit_cooldown: Duration::from_millis(cooldown_ms),
        })
    }

    async fn outage(c: &Circuit) -> Result<(), StoreError> {
        c.run(async { Err::<(), _>(StoreError::Unavailable("down".into())) })
            .await
    }

    #[tokio::test]
    async fn the_circuit_opens_after_repeated_outages_and_a_probe_closes_it() {
        let c = circuit(3, 50);
        for _ in 0..3 {
            assert!(outage(&c).await.is_err());
        }
        assert_eq!(c.health(), StoreHealth::Unavailable);
        // Open: the operation is not even started.
        let started = std::sync::atomic::AtomicBool::new(false);
        let refused = c
            .run(async {
                started.store(true, std::sync::atomic::Ordering::SeqCst);
                Ok(())
            })
            .await;
        assert_eq!(refused.unwrap_err().code(), "store_unavailable");
        assert!(!started.load(std::sync::atomic::Ordering::SeqCst));
        tokio::time::sleep(Duration::from_millis(80)).await;
        c.run(async { Ok(()) }).await.unwrap();
        assert_eq!(c.health(), StoreHealth::Ok);
    }

    #[tokio::test]
    async fn an_operation_past_its_deadline_is_an_outage() {
        let c = circuit(1, 10_000);
        let slow = c
            .run(async {
                tokio::time::sleep(Duration::from_secs(60)).await;
                Ok(())
            })
            .await;
        assert_eq!(slow.unwrap_err().code(), "store_unavailable");
        assert_eq!(c.health(), StoreHealth::Unavailable);
    }

    #[tokio::test]
    async fn a_callers_error_is_not_an_outage() {
        let c = circuit(1, 10_000);
        let e = c
            .run(async { Err::<(), _>(StoreError::Corrupt("bad".into())) })
            .await;
        assert!(e.is_err());
        assert_eq!(c.health(), StoreHealth::Ok);
    }
}
