//! Token budgets: the periods a key's usage is counted in (UTC day and calendar month), when
//! each resets, and the check before a request.
//!
//! Usage is a ledger in the store (`KeyStore::add_usage`): one row per key and period, so every
//! gateway process sharing the store sees the same counts. Admission reserves the request's
//! [`estimate`] atomically when the count is below the limit (`KeyStore::reserve_usage`), and
//! the end of the request settles it: the reservation is replaced by the usage reported, or by
//! an estimate of what was used when a stream failed or its client went away. So concurrent
//! requests overspend a budget by at most about one request's estimate, and the request that
//! crosses the line still finishes; the next one is refused until the period resets.

use std::sync::Mutex;

use toolbridge_wire::responses::CreateResponse;

use crate::error::GatewayError;

/// The output tokens reserved for a request that sets no `max_output_tokens`, on a route whose
/// answers have not been seen yet.
pub(crate) const DEFAULT_OUTPUT_RESERVE: u64 = 1024;
/// The least and the most an observed route reserves for output.
const MIN_OUTPUT_RESERVE: u64 = 16;
const MAX_OUTPUT_RESERVE: u64 = 65_536;
/// Routes whose output is followed, at most (route patterns come from the config).
const MAX_ROUTES: usize = 1024;

/// What admission reserves for `req`: its input at about four bytes a token (the JSON of its
/// `input` and `instructions`; history from `previous_response_id` is not counted), plus
/// `max_output_tokens`, or else `output` (what its route's answers suggest, [`ObservedOutput`]).
pub(crate) fn estimate(req: &CreateResponse, output: u64) -> u64 {
    let input = req
        .input
        .as_ref()
        .and_then(|i| serde_json::to_string(i).ok())
        .map_or(0, |t| t.len())
        + req.instructions.as_ref().map_or(0, String::len);
    (input as u64).div_ceil(4) + req.max_output_tokens.unwrap_or(output)
}

/// The output tokens each route's answers have used lately (a moving average per route
/// pattern), so a request that sets no `max_output_tokens` reserves about what it will use,
/// not a flat [`DEFAULT_OUTPUT_RESERVE`]: a key whose budget is smaller than that flat figure
/// was served one request at a time. The reservation is twice the average (answers vary),
/// within [`MIN_OUTPUT_RESERVE`]..[`MAX_OUTPUT_RESERVE`]; settling stays exact either way.
#[derive(Debug, Default)]
pub(crate) struct ObservedOutput {
    averages: Mutex<std::collections::HashMap<String, f64>>,
}

impl ObservedOutput {
    /// What a request on `route` reserves for output.
    pub(crate) fn reserve(&self, route: &str) -> u64 {
        let average = self
            .averages
            .lock()
            .ok()
            .and_then(|averages| averages.get(route).copied());
        average.map_or(DEFAULT_OUTPUT_RESERVE, |average| {
            ((average * 2.0).ceil() as u64).clamp(MIN_OUTPUT_RESERVE, MAX_OUTPUT_RESERVE)
        })
    }

    /// An answer on `route` used `output` tokens.
    pub(crate) fn observe(&self, route: &str, output: u64) {
        let Ok(mut averages) = self.averages.lock() else {
            return;
        };
        let output = output as f64;
        let full = averages.len() >= MAX_ROUTES;
        match averages.get_mut(route) {
            Some(average) => *average += (output - *average) / 5.0,
            None if !full => {
                averages.insert(route.to_owned(), output);
            }
            None => {}
        }
    }
}

/// Tokens reserved on a key's ledger at admission, settled once.
#[derive(Debug)]
pub struct Reservation {
    /// The periods reserved on and the tokens; `None` once settled.
    held: Mutex<Option<([String; 2], u64)>>,
}

impl Reservation {
    pub fn new(periods: [String; 2], tokens: u64) -> Self {
        Self {
            held: Mutex::new(Some((periods, tokens))),
        }
    }

    /// The periods and tokens to settle, the first time only.
    pub fn take(&self) -> Option<([String; 2], u64)> {
        self.held.lock().ok().and_then(|mut held| held.take())
    }
}

/// A budget period.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Period {
    Day,
    Month,
}

impl Period {
    pub(crate) fn word(self) -> &'static str {
        match self {
            Self::Day => "daily",
            Self::Month => "monthly",
        }
    }

    /// The ledger's name for the period holding `now` (Unix seconds): `day:2025-01-31`,
    /// `month:2025-01`.
    pub(crate) fn label(self, now: i64) -> String {
        let (y, m, d) = crate::platform::time::civil(now.div_euclid(86_400));
        match self {
            Self::Day => format!("day:{y:04}-{m:02}-{d:02}"),
            Self::Month => format!("month:{y:04}-{m:02}"),
        }
    }

    /// When the period holding `now` ends (Unix seconds).
    pub(crate) fn end(self, now: i64) -> i64 {
        let day = now.div_euclid(86_400);
        match self {
            Self::Day => (day + 1) * 86_400,
            Self::Month => {
                let (y, m, _) = crate::platform::time::civil(day);
                let (y, m) = if m == 12 { (y + 1, 1) } else { (y, m + 1) };
                crate::platform::time::days_from_civil(y, m, 1) * 86_400
            }
        }
    }
}

/// Both periods' labels, in the order [`Period::Day`], [`Period::Month`].
pub fn labels(now: i64) -> [String; 2] {
    [Period::Day.label(now), Period::Month.label(now)]
}

/// The refusal when `used` reached `limit` in `period`, else nothing.
pub(crate) fn verdict(
    period: Period,
    limit: Option<u64>,
    used: i64,
    now: i64,
) -> Result<(), GatewayError> {
    let Some(limit) = limit else {
        return Ok(());
    };
    let used = u64::try_from(used).unwrap_or(0);
    if used < limit {
        return Ok(());
    }
    let end = period.end(now);
    let (y, m, d) = crate::platform::time::civil(end.div_euclid(86_400));
    Err(GatewayError::BudgetExhausted {
        period: period.word(),
        limit,
        used,
        resets_at: format!("{y:04}-{m:02}-{d:02}T00:00:00Z"),
        retry_after_secs: u64::try_from(end - now).unwrap_or(1).max(1),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn periods_are_utc_days_and_months_with_their_ends() {
        // 2024-02-29T13:00:00Z, a leap day.
        let now = 1_709_211_600;
        assert_eq!(
            labels(now),
            ["day:2024-02-29".to_owned(), "month:2024-02".to_owned()]
        );
        assert_eq!(Period::Day.end(now), 1_709_251_200); // 2024-03-01T00:00:00Z
        assert_eq!(Period::Month.end(now), 1_709_251_200);
        // 2024-12-31T23:59:59Z: the month ends with the year.
        let now = 1_735_689_599;
        assert_eq!(Period::Month.label(now), "month:2024-12");
        assert_eq!(Period::Month.end(now), 1_735_689_600);
        assert_eq!(Period::Day.label(0), "day:1970-01-01");
    }

    #[test]
    fn a_route_reserves_about_what_its_answers_used() {
        let observed = ObservedOutput::default();
        assert_eq!(observed.reserve("*"), DEFAULT_OUTPUT_RESERVE);
        observed.observe("*", 40);
        assert_eq!(observed.reserve("*"), 80);
        for _ in 0..50 {
            observed.observe("*", 2);
        }
        assert_eq!(observed.reserve("*"), MIN_OUTPUT_RESERVE);
        observed.observe("long", 1_000_000);
        assert_eq!(observed.reserve("long"), MAX_OUTPUT_RESERVE);
        assert_eq!(observed.reserve("other"), DEFAULT_OUTPUT_RESERVE);
    }

    #[test]
    fn an_exhausted_budget_names_its_period_and_reset() {
        let now = 1_709_211_600;
        assert!(verdict(Period::Day, Some(100), 99, now).is_ok());
        assert!(verdict(Period::Day, None, 1_000, now).is_ok());
        let refused = verdict(Period::Month, Some(100), 100, now).unwrap_err();
        assert_eq!(refused.code(), "budget_exhausted");
        assert_eq!(refused.status().as_u16(), 429);
        let message = refused.to_string();
        assert!(message.contains("monthly token budget of 100"), "{message}");
        assert!(message.contains("2024-03-01T00:00:00Z"), "{message}");
    }
}
