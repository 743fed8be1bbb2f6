//! Usage across the upstream rounds of one response, and the text produced so far (what the
//! gateway estimates output tokens from when the upstream reports no usage).
//!
//! Not here: the token estimate itself (the gateway's).

use toolbridge_wire::responses::{OutputContent, OutputItem, Usage};

use super::machine::{Assembler, Open};

impl Assembler {
    /// True while the upstream has reported no usage.
    pub fn needs_usage(&self) -> bool {
        self.usage.is_none()
    }

    /// Everything the model produced so far, as text (answers, reasoning, call names and
    /// arguments), for estimating output tokens.
    pub fn produced_text(&self) -> String {
        let mut text = String::new();
        for item in self.slots.iter().flatten() {
            match item {
                OutputItem::Message(m) => {
                    for part in &m.content {
                        match part {
                            OutputContent::OutputText { text: t, .. } => text.push_str(t),
                            OutputContent::Refusal { refusal } => text.push_str(refusal),
                            OutputContent::ReasoningText { text: t } => text.push_str(t),
                        }
                    }
                }
                OutputItem::Reasoning(r) => {
                    for c in r.content.iter().flatten() {
                        text.push_str(&c.text);
                    }
                    for s in &r.summary {
                        text.push_str(&s.text);
                    }
                }
                other => text.push_str(&serde_json::to_string(other).unwrap_or_default()),
            }
        }
        match &self.current {
            Open::None => {}
            Open::Reasoning { text: t, .. } => text.push_str(t),
            Open::Message { parts, .. } => {
                for p in parts {
                    text.push_str(&p.text);
                }
            }
        }
        for call in &self.calls {
            text.push_str(call.name.as_deref().unwrap_or_default());
            text.push_str(&call.arguments);
        }
        text
    }
}

/// Two rounds' usage added up, saturating: the counts are the upstream's, any `u64`.
pub(super) fn add_usage(a: &Usage, b: &Usage) -> Usage {
    let mut sum = b.clone();
    let add = |x: &mut u64, y: u64| *x = x.saturating_add(y);
    add(&mut sum.input_tokens, a.input_tokens);
    add(&mut sum.output_tokens, a.output_tokens);
    add(&mut sum.total_tokens, a.total_tokens);
    add(
        &mut sum.input_tokens_details.cached_tokens,
        a.input_tokens_details.cached_tokens,
    );
    add(
        &mut sum.input_tokens_details.cache_write_tokens,
        a.input_tokens_details.cache_write_tokens,
    );
    add(
        &mut sum.output_tokens_details.reasoning_tokens,
        a.output_tokens_details.reasoning_tokens,
    );
    sum
}
