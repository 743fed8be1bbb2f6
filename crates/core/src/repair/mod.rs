//! Repair of model output: what weak models get wrong in tool calls, put right where it is safe,
//! and reported where it is not.
//!
//! Three checks, each pure and each reporting every change it makes as a [`Fix`] with a stable
//! code:
//! - [`arguments`]: function arguments that are not JSON (fences, double encoding, trailing
//!   commas, unquoted keys, a lone `{`) are repaired with `jsonrepair-rs`, then validated against
//!   the tool's JSON Schema, and safe coercions ("5" for an integer, a value for an array, an
//!   enum's case) are applied where validation points.
//! - [`names`]: a tool name nobody declared is matched to a declared one (case and separators,
//!   `functions.` prefixes, known aliases) only when exactly one declared tool fits.
//! - [`custom`]: the freeform input of a grammar-checked custom tool (Codex's `apply_patch`) is
//!   checked against the tool's Lark grammar ([`lark`] compiles the subset those grammars use,
//!   [`matcher`] runs it with a step budget), after the repairs models need (fences, CRLF, a
//!   missing `*** End Patch`, uniform indentation, a `{"input": …}` wrapper).
//!
//! [`ToolSchemas`] compiles every declared tool's check once per request; the assembler asks it
//! per complete call, through [`ToolSchemas::restore_repaired`] (name, then payload, then
//! restoration, in the order each needs).
//!
//! *Invariant*: input that already passes its check is returned unchanged, byte for byte
//! ([`Outcome::Valid`]). A check this module cannot run (a grammar outside the subset, a budget
//! spent) never rejects: it answers [`Outcome::Unchecked`] with the reason.
//!
//! Not here: deciding what to do with an [`Outcome::Invalid`] call (the assembler decides), and
//! restoring calls to Responses items (`restore`).

pub mod arguments;
mod cache;
mod call;
pub mod custom;
pub mod lark;
pub mod matcher;
pub mod names;
mod schemas;

pub use arguments::{CompiledSchema, repair_arguments};
pub use cache::SchemaCache;
pub use call::RepairedCall;
pub use custom::repair_custom_input;
pub use lark::Grammar;
pub use names::{MatchReason, NameMatch, resolve_name, resolve_provider_name};
pub use schemas::{ToolCheck, ToolSchemas};

use toolbridge_wire::responses::Diagnostic;

use crate::diagnostics::{
    ARGUMENTS_COERCED, ARGUMENTS_INVALID, ARGUMENTS_REPAIRED, CUSTOM_INPUT_INVALID,
    CUSTOM_INPUT_REPAIRED, diag,
};

/// The most bytes of model output a repair looks at; larger output is only validated.
pub const MAX_REPAIR_BYTES: usize = 1 << 20;

/// What one repair step did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FixKind {
    /// A markdown code fence around the whole output was removed.
    FenceStripped,
    /// A JSON string holding the real arguments was decoded.
    DoubleEncodedUnwrapped,
    /// Empty arguments were read as `{}`.
    EmptyArgumentsFilled,
    /// Chat-template tokens the provider leaked around the arguments (`<|tool_call_end|>`,
    /// `</tool_call>`) were removed.
    TemplateTokenStripped,
    /// A doubled pair of braces around the arguments (`{{…}}`) became one.
    ExtraBracesRemoved,
    /// The JSON syntax was repaired (quotes, commas, comments, keywords, truncation).
    JsonSyntaxRepaired,
    /// A numeric string became a number for an `integer`/`number` field.
    StringToNumber,
    /// `"true"`/`"false"` became a boolean.
    StringToBoolean,
    /// A single value was wrapped in a one-element array.
    WrappedInArray,
    /// A string matched an `enum` value except for its case.
    EnumCaseMatched,
    /// A `{"input": …}` object or a JSON string around freeform input was removed.
    JsonWrapperRemoved,
    /// CRLF line ends became LF.
    CrlfNormalized,
    /// Indentation shared by every line was removed.
    IndentationRemoved,
    /// Whitespace after the last line was trimmed.
    TrailingWhitespaceTrimmed,
    /// `*** Begin Patch` was added before a patch that lacked it.
    BeginPatchAdded,
    /// `*** End Patch` was added after a patch that lacked it.
    EndPatchAdded,
    /// An empty line inside an update hunk became an empty context line (`" "`), as editors that
    /// strip trailing spaces leave them and as Codex's own patch parser reads them.
    BlankContextLineFilled,
}

impl FixKind {
    /// The stable snake_case code of this fix.
    pub fn code(self) -> &'static str {
        match self {
            Self::FenceStripped => "fence_stripped",
            Self::DoubleEncodedUnwrapped => "double_encoded_unwrapped",
            Self::EmptyArgumentsFilled => "empty_arguments_filled",
            Self::TemplateTokenStripped => "template_token_stripped",
            Self::ExtraBracesRemoved => "extra_braces_removed",
            Self::JsonSyntaxRepaired => "json_syntax_repaired",
            Self::StringToNumber => "string_to_number",
            Self::StringToBoolean => "string_to_boolean",
            Self::WrappedInArray => "wrapped_in_array",
            Self::EnumCaseMatched => "enum_case_matched",
            Self::JsonWrapperRemoved => "json_wrapper_removed",
            Self::CrlfNormalized => "crlf_normalized",
            Self::IndentationRemoved => "indentation_removed",
            Self::TrailingWhitespaceTrimmed => "trailing_whitespace_trimmed",
            Self::BeginPatchAdded => "begin_patch_added",
            Self::EndPatchAdded => "end_patch_added",
            Self::BlankContextLineFilled => "blank_context_line_filled",
        }
    }

    /// Whether the fix changed a value's type (a coercion) rather than the text's syntax.
    pub fn is_coercion(self) -> bool {
        matches!(
            self,
            Self::StringToNumber
                | Self::StringToBoolean
                | Self::WrappedInArray
                | Self::EnumCaseMatched
        )
    }
}

/// One change made to model output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fix {
    pub kind: FixKind,
    /// The JSON pointer of the changed value (`""` for the whole output).
    pub pointer: String,
}

impl Fix {
    pub fn whole(kind: FixKind) -> Self {
        Self {
            kind,
            pointer: String::new(),
        }
    }

    pub fn at(kind: FixKind, pointer: impl Into<String>) -> Self {
        Self {
            kind,
            pointer: pointer.into(),
        }
    }
}

/// What a check found, and the text to use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The output passed as it came; this is the original text, byte for byte.
    Valid(String),
    /// The output passed after the fixes; `text` is the repaired output.
    Repaired { text: String, fixes: Vec<Fix> },
    /// The output does not pass even after repair. `best_effort` is the output with the fixes
    /// that could be made (the original when none could); `message` names where it fails (a JSON
    /// pointer, or a line and column).
    Invalid {
        best_effort: String,
        message: String,
        fixes: Vec<Fix>,
    },
    /// The check could not run (no grammar this module understands, a budget spent); the original
    /// text, unchanged, with the reason.
    Unchecked { text: String, reason: String },
}

/// Which kind of output an outcome is about, for its diagnostic code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Subject {
    Arguments,
    CustomInput,
}

impl Outcome {
    /// The text to send on: original, repaired or best effort.
    pub fn text(&self) -> &str {
        match self {
            Self::Valid(text) | Self::Unchecked { text, .. } | Self::Repaired { text, .. } => text,
            Self::Invalid { best_effort, .. } => best_effort,
        }
    }

    /// The text to send on, owned.
    pub fn into_text(self) -> String {
        match self {
            Self::Valid(text) | Self::Unchecked { text, .. } | Self::Repaired { text, .. } => text,
            Self::Invalid { best_effort, .. } => best_effort,
        }
    }

    /// The fixes made (none for valid or unchecked output).
    pub fn fixes(&self) -> &[Fix] {
        match self {
            Self::Repaired { fixes, .. } | Self::Invalid { fixes, .. } => fixes,
            Self::Valid(_) | Self::Unchecked { .. } => &[],
        }
    }

    /// The diagnostics to report for a call to `tool` (none for valid or unchecked output): one
    /// per diagnostic code, naming the fixes and their pointers.
    pub fn diagnostics(&self, subject: Subject, tool: &str) -> Vec<Diagnostic> {
        let mut out = Vec::new();
        let (repaired, coerced, invalid) = match subject {
            Subject::Arguments => (ARGUMENTS_REPAIRED, ARGUMENTS_COERCED, ARGUMENTS_INVALID),
            Subject::CustomInput => (
                CUSTOM_INPUT_REPAIRED,
                CUSTOM_INPUT_REPAIRED,
                CUSTOM_INPUT_INVALID,
            ),
        };
        let syntax: Vec<&Fix> = self
            .fixes()
            .iter()
            .filter(|f| !f.kind.is_coercion())
            .collect();
        let coercions: Vec<&Fix> = self
            .fixes()
            .iter()
            .filter(|f| f.kind.is_coercion())
            .collect();
        if !syntax.is_empty() {
            out.push(diag(
                repaired,
                None,
                format!("`{tool}`: {}", describe(&syntax)),
            ));
        }
        if !coercions.is_empty() {
            out.push(diag(
                coerced,
                None,
                format!("`{tool}`: {}", describe(&coercions)),
            ));
        }
        if let Self::Invalid { message, .. } = self {
            out.push(diag(invalid, None, format!("`{tool}`: {message}")));
        }
        out
    }
}

fn describe(fixes: &[&Fix]) -> String {
    let parts: Vec<String> = fixes
        .iter()
        .map(|f| {
            if f.pointer.is_empty() {
                f.kind.code().to_owned()
            } else {
                format!("{} at `{}`", f.kind.code(), f.pointer)
            }
        })
        .collect();
    parts.join(", ")
}

#[cfg(test)]
mod tests;
