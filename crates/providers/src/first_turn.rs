//! Providers that require the conversation to open with a user turn (Anthropic Messages: "the
//! first message must use the user role"; Gemini: a function call must follow a user turn or a
//! function response) get the minimal placeholder user turn before history that starts with
//! assistant output, with a diagnostic, instead of passing on the upstream's 400. Such history
//! is what a client sends after trimming or compacting its context.
//!
//! Not here: where each dialect puts the turn (its own `request`).

use toolbridge_core::diagnostics::{USER_TURN_ADDED, diag};
use toolbridge_wire::responses::Diagnostic;

/// The placeholder user turn's text: short, and plain about what it is.
pub const PLACEHOLDER: &str = "(The conversation so far follows.)";

/// The diagnostic for a placeholder added for `provider` (the dialect's name for people).
pub fn diagnostic(provider: &str) -> Diagnostic {
    diag(
        USER_TURN_ADDED,
        Some("input"),
        format!(
            "{provider} requires the conversation to start with a user turn; a placeholder user turn was added before the first assistant output"
        ),
    )
}
