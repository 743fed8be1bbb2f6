//! The policy half of tool-call repair: what a response does with a call that is still invalid
//! after the core repaired what it could (`toolbridge_core::repair`, applied by the assembler).
//!
//! At the end of every upstream round that would end the response, [`RepairRounds::review`]
//! asks the assembler for the round's invalid calls and applies the provider's policy:
//! `reask` (one hidden re-ask through the response's [`Continuation`]: the calls are not shown,
//! the upstream gets them back with the validation error as their result, and the next round's
//! calls are checked the same way), `pass` (the best effort goes on with its `arguments_invalid`
//! or `custom_input_invalid` diagnostic) or `fail` (`invalid_tool_call`). The re-ask is bounded
//! to one per response; after it, `invalid_calls_after_reask` applies.
//!
//! [`record_repairs`] is the one place that counts what repair did, per provider and model (a log
//! line and `toolbridge_repairs_total`).
//!
//! [`Continuation`]: super::tool_loop::Continuation

use toolbridge_core::assemble::{Assembler, Reask};
use toolbridge_core::diagnostics::REPAIR_CODES;
use toolbridge_wire::responses::{Diagnostic, StreamEvent};

use crate::config::{InvalidCalls, RepairPolicy};

/// The most hidden re-asks in one response.
pub(super) const MAX_REASKS: u8 = 1;

/// One response's repair policy and what is left of its re-asks.
pub(in crate::http::responses) struct RepairRounds {
    pub(super) policy: RepairPolicy,
    pub(super) reasks_left: u8,
}

/// What to do at the end of a round.
pub(super) enum Review {
    /// End the response; its calls are shown (repaired, or best effort with a diagnostic).
    Pass,
    /// Send the re-ask round; nothing of it was shown.
    Reask(Reask),
    /// Fail the response with `invalid_tool_call` and this message.
    Fail(String),
}

impl RepairRounds {
    pub(in crate::http::responses) fn new(policy: RepairPolicy) -> Self {
        Self {
            policy,
            reasks_left: MAX_REASKS,
        }
    }

    /// Reviews the round's calls. `can_reask` is false where the round cannot be sent again
    /// (its gateway calls already ran beside the client's, or no continuation exists): a re-ask
    /// then falls back to the after-re-ask policy.
    pub(super) fn review(
        &mut self,
        assembler: &mut Assembler,
        can_reask: bool,
        out: &mut Vec<StreamEvent>,
    ) -> Review {
        let invalid = assembler.review_calls();
        let Some(first) = invalid.first() else {
            return Review::Pass;
        };
        let policy = match self.policy.invalid_calls {
            InvalidCalls::Reask if can_reask && self.reasks_left > 0 => InvalidCalls::Reask,
            InvalidCalls::Reask => self.policy.after_reask,
            other => other,
        };
        match policy {
            InvalidCalls::Pass => Review::Pass,
            InvalidCalls::Fail => Review::Fail(format!(
                "the model made an invalid call to `{}`: {}",
                first.tool, first.message
            )),
            InvalidCalls::Reask => {
                self.reasks_left = self.reasks_left.saturating_sub(1);
                Review::Reask(assembler.take_reask(&invalid, out))
            }
        }
    }
}

/// Counts what repair did to one response's calls (repairs, coercions, renames, invalid calls,
/// re-asks), by provider and model: a log line and `toolbridge_repairs_total` per diagnostic.
pub(crate) fn record_repairs(provider: &str, model: &str, diagnostics: &[Diagnostic]) {
    // The metric's model label is the request's bounded one (its route pattern), never the
    // model name as the client wrote it; the log line names the model itself.
    let request = crate::platform::ops::observe::current();
    let model_label = request
        .as_ref()
        .map_or(crate::platform::ops::metrics::OTHER, |r| r.labels().1);
    for d in diagnostics {
        if REPAIR_CODES.contains(&d.code.as_str()) {
            crate::platform::ops::metrics::repair(provider, model_label, d);
            tracing::info!(
                provider,
                model,
                code = d.code,
                "tool call repair: {}",
                d.message
            );
        }
    }
}
