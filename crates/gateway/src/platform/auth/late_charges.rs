//! Budget charges the store refused while it was down, kept and written once it is back.
//!
//! A request's charge (its reservation settled, or its usage added, `admission::charge`) comes
//! after its answer: when the store is down then, the answer is out and only the ledger is
//! wrong, too high by the reservation or too low by the usage. Such a charge goes to
//! [`LateCharges`] instead of being lost: charges waiting are summed per key and periods (they
//! are additions, so their order does not matter), and one task writes them once the store is
//! back, backing off while it is down. Meanwhile the ledger errs as the charge does, and the
//! budget check with it.
//!
//! *Bounds:* at most [`MAX_WAITING`] keys-and-periods wait; past that the oldest is given up
//! (logged and counted: that key's ledger stays off by the amount logged). A charge the store
//! refuses for a reason that is not an outage is given up the same way. At shutdown the queue
//! is not drained. *Exactness:* a write that timed out after the database committed it is
//! written again (the ledger then counts it twice); a paused or unreachable database does not
//! commit, so an outage of that kind leaves the ledger exact.
//!
//! Not here: the charge itself (`admission`), the ledger (`KeyStore::add_usage`).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use metrics::counter;
use tokio::sync::Notify;
use toolbridge_store::KeyStore;

use crate::platform::ops::metrics::names;

/// Keys-and-periods waiting, at most.
pub(crate) const MAX_WAITING: usize = 4096;
/// The first pause after a failed retry; it doubles up to [`MAX_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(250);
const MAX_PAUSE: Duration = Duration::from_secs(10);

/// The sum of the charges waiting for one key in one set of periods.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Charge {
    key_id: String,
    periods: Vec<String>,
    tokens: i64,
}

/// The charges waiting for the store, and the signal that one arrived.
#[derive(Default)]
pub(crate) struct LateCharges {
    waiting: Mutex<VecDeque<Charge>>,
    arrived: Notify,
}

impl LateCharges {
    /// Keeps `tokens` (negative: returned) for `key_id` in `periods`, added to what waits for
    /// the same key and periods; gives up the oldest past the bound.
    pub(crate) fn keep(&self, key_id: &str, periods: &[String], tokens: i64) {
        if tokens == 0 {
            return;
        }
        {
            let Ok(mut waiting) = self.waiting.lock() else {
                return;
            };
            if let Some(same) = waiting
                .iter_mut()
                .find(|c| c.key_id == key_id && c.periods == periods)
            {
                same.tokens = same.tokens.saturating_add(tokens);
            } else {
                waiting.push_back(Charge {
                    key_id: key_id.to_owned(),
                    periods: periods.to_vec(),
                    tokens,
                });
            }
            while waiting.len() > MAX_WAITING {
                let Some(oldest) = waiting.pop_front() else {
                    break;
                };
                given_up(&oldest, "too many budget charges are waiting for the store");
            }
        }
        counter!(names::BUDGET_LATE_CHARGES, "outcome" => "kept").increment(1);
        self.arrived.notify_one();
    }

    /// The tokens waiting for `key_id` in `periods` (0 when none).
    #[cfg(test)]
    fn waiting(&self, key_id: &str, periods: &[String]) -> i64 {
        self.waiting.lock().map_or(0, |w| {
            w.iter()
                .filter(|c| c.key_id == key_id && c.periods == periods)
                .map(|c| c.tokens)
                .sum()
        })
    }

    /// Writes the waiting charges, oldest first, until the process ends. Each write is bounded
    /// by the store's own deadline; while the store is down the pause between tries doubles up
    /// to [`MAX_PAUSE`].
    pub(crate) async fn drain(self: Arc<Self>, store: Arc<dyn KeyStore>) {
        let mut pause = FIRST_PAUSE;
        loop {
            let Some(next) = self.take_oldest() else {
                self.arrived.notified().await;
                continue;
            };
            match store
                .add_usage(&next.key_id, &next.periods, next.tokens)
                .await
            {
                Ok(()) => {
                    pause = FIRST_PAUSE;
                    tracing::info!(
                        key_id = next.key_id,
                        tokens = next.tokens,
                        "a budget charge the store refused earlier landed"
                    );
                    counter!(names::BUDGET_LATE_CHARGES, "outcome" => "written").increment(1);
                }
                Err(e) if e.is_outage() => {
                    // Back at the front, with whatever arrived for it meanwhile.
                    self.put_back(next);
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(MAX_PAUSE);
                }
                Err(e) => given_up(&next, &e.to_string()),
            }
        }
    }

    /// Takes the oldest charge out of the queue (a charge for the same key and periods that
    /// arrives while it is written waits as a new one).
    fn take_oldest(&self) -> Option<Charge> {
        self.waiting.lock().ok()?.pop_front()
    }

    /// Puts a charge whose write failed back first, merged with one that arrived meanwhile.
    fn put_back(&self, charge: Charge) {
        let Ok(mut waiting) = self.waiting.lock() else {
            return;
        };
        if let Some(at) = waiting
            .iter()
            .position(|c| c.key_id == charge.key_id && c.periods == charge.periods)
            && let Some(newer) = waiting.remove(at)
        {
            waiting.push_front(Charge {
                tokens: charge.tokens.saturating_add(newer.tokens),
                ..charge
            });
        } else {
            waiting.push_front(charge);
        }
    }
}

fn given_up(charge: &Charge, why: &str) {
    tracing::error!(
        key_id = charge.key_id,
        periods = ?charge.periods,
        tokens = charge.tokens,
        "a budget charge is given up ({why}); the key's ledger is off by these tokens"
    );
    counter!(names::BUDGET_LATE_CHARGES, "outcome" => "given_up").increment(1);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn periods(day: &str) -> Vec<String> {
        vec![day.to_owned(), "2026-12".to_owned()]
    }

    #[test]
    fn charges_for_the_same_key_and_periods_are_summed() {
        let late = LateCharges::default();
        late.keep("k", &periods("2026-12-06"), 100);
        late.keep("k", &periods("2026-12-06"), -40);
        late.keep("k", &periods("2026-12-07"), 5);
        late.keep("other", &periods("2026-12-06"), 7);
        late.keep("k", &periods("2026-12-06"), 0);
        assert_eq!(late.waiting("k", &periods("2026-12-06")), 60);
        assert_eq!(late.waiting("k", &periods("2026-12-07")), 5);
        assert_eq!(late.waiting("other", &periods("2026-12-06")), 7);
        assert_eq!(late.waiting.lock().unwrap().len(), 3);
    }

    #[test]
    fn a_charge_put_back_absorbs_what_arrived_while_it_was_written() {
        let late = LateCharges::default();
        late.keep("k", &periods("d"), 10);
        late.keep("j", &periods("d"), 1);
        let taken = late.take_oldest().unwrap();
        late.keep("k", &periods("d"), 5);
        late.put_back(taken);
        let first = late.take_oldest().unwrap();
        assert_eq!((first.key_id.as_str(), first.tokens), ("k", 15));
        assert_eq!(late.take_oldest().unwrap().key_id, "j");
        assert!(late.take_oldest().is_none());
    }

    #[test]
    fn the_oldest_charges_are_given_up_past_the_bound() {
        let late = LateCharges::default();
        for n in 0..MAX_WAITING + 2 {
            late.keep(&format!("k{n}"), &periods("d"), 1);
        }
        assert_eq!(late.waiting.lock().unwrap().len(), MAX_WAITING);
        assert_eq!(late.waiting("k0", &periods("d")), 0);
        assert_eq!(late.waiting("k2", &periods("d")), 1);
    }
}
