//! Token usage estimates, for upstreams that report none.
//!
//! Codex only compacts its context when it sees non-zero token totals, so a response without
//! usage is worse than one with an honest estimate. The estimate counts the o200k tokens of the
//! request's message texts, tool calls and tool declarations (plus OpenAI's few tokens of framing
//! per message) and of everything the model produced; the response says it is an estimate with a
//! `usage_estimated` diagnostic.

use std::sync::OnceLock;

use tiktoken_rs::CoreBPE;
use toolbridge_providers::dialect::PromptTexts;
use toolbridge_wire::responses::{InputTokensDetails, OutputTokensDetails, Usage};

/// Framing tokens per chat message, as OpenAI counts them.
const PER_MESSAGE: u64 = 3;

/// The o200k tokenizer, loaded on first use only: it takes about 50 MB and a fraction of a second,
/// and most upstreams report usage, so most gateways never load it.
fn tokenizer() -> Option<&'static CoreBPE> {
    static BPE: OnceLock<Option<CoreBPE>> = OnceLock::new();
    BPE.get_or_init(|| tiktoken_rs::o200k_base().ok()).as_ref()
}

fn count(text: &str) -> u64 {
    match tokenizer() {
        Some(bpe) => bpe.encode_ordinary(text).len() as u64,
        // Without the tokenizer, the usual rule of thumb.
        None => (text.len() as u64).div_ceil(4),
    }
}

/// Estimated usage for a request (as sent upstream, JSON) and the model's output text.
pub(crate) fn estimate(request_json: &[u8], output: &str) -> Usage {
    let input = match PromptTexts::read(request_json) {
        Some(prompt) => input_tokens(&prompt),
        None => count(&String::from_utf8_lossy(request_json)),
    };
    let output = count(output);
    Usage {
        input_tokens: input,
        input_tokens_details: InputTokensDetails::default(),
        output_tokens: output,
        output_tokens_details: OutputTokensDetails::default(),
        total_tokens: input + output,
    }
}

/// Each text's tokens, the framing of each message, and the reply's priming.
fn input_tokens(prompt: &PromptTexts) -> u64 {
    let texts: u64 = prompt.texts.iter().map(|t| count(t)).sum();
    texts + prompt.messages * PER_MESSAGE + PER_MESSAGE
}

/// Gives a response an estimated usage (marked as such) when the upstream reported none and
/// the request sent (`payload`, a Chat request) is at hand.
pub(super) fn estimate_missing_usage(
    assembler: &mut toolbridge_core::assemble::Assembler,
    payload: Option<&[u8]>,
    out: &mut Vec<toolbridge_wire::responses::StreamEvent>,
) {
    let Some(payload) = payload else {
        return;
    };
    if !assembler.needs_usage() {
        return;
    }
    let produced = assembler.produced_text();
    if produced.is_empty() {
        // Nothing was produced: the response fails, and a guess would only mislead.
        return;
    }
    let usage = estimate(payload, &produced);
    assembler.on_event(toolbridge_core::events::UpstreamEvent::Usage(usage), out);
    assembler.add_diagnostic(toolbridge_core::diagnostics::diag(
        toolbridge_core::diagnostics::USAGE_ESTIMATED,
        Some("usage"),
        "the upstream reported no token usage; the counts are o200k estimates",
    ));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_o200k_tokens() {
        // "hello world" is two o200k tokens.
        assert_eq!(count("hello world"), 2);
        let request = serde_json::to_vec(&serde_json::json!({
            "model": "m", "stream": false,
            "messages": [{"role": "user", "content": "hello world"}]
        }))
        .unwrap();
        let usage = estimate(&request, "hello world");
        assert_eq!(usage.input_tokens, 2 + 2 * PER_MESSAGE);
        assert_eq!(usage.output_tokens, 2);
        assert_eq!(usage.total_tokens, usage.input_tokens + 2);
    }
}
