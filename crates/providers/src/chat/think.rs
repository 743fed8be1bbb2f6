//! Splitting a leading `<think>…</think>` block out of content, for providers (MiniMax without
//! `reasoning_split`, some Ollama and vLLM models) that put reasoning in the answer text.
//!
//! Only a block that opens the content counts: once answer text has started, tags are text (a
//! model discussing the tag must not lose its answer). Tags may be split across chunks.

use toolbridge_core::events::UpstreamEvent;

const OPEN: &str = "<think>";
const CLOSE: &str = "</think>";

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Nothing but whitespace seen yet.
    #[default]
    Start,
    Inside,
    /// Just after `</think>`: leading whitespace of the answer is dropped.
    AfterBlock,
    Outside,
}

/// The splitter of one answer.
#[derive(Debug, Default)]
pub struct ThinkSplitter {
    state: State,
    pending: String,
    /// Whether any reasoning text (past the blanks after `<think>`) was seen.
    started: bool,
}

impl ThinkSplitter {
    /// Feeds a content delta.
    pub fn push(&mut self, delta: &str, out: &mut Vec<UpstreamEvent>) {
        match self.state {
            State::Outside => emit_text(delta.to_owned(), out),
            State::AfterBlock => {
                let rest = delta.trim_start();
                if !rest.is_empty() {
                    self.state = State::Outside;
                    emit_text(rest.to_owned(), out);
                }
            }
            State::Start => {
                self.pending.push_str(delta);
                let trimmed = self.pending.trim_start();
                if trimmed.is_empty() || (OPEN.starts_with(trimmed) && trimmed.len() < OPEN.len()) {
                    return;
                }
                if let Some(rest) = trimmed.strip_prefix(OPEN) {
                    // The reasoning starts at its first non-blank character.
                    let rest = rest.trim_start().to_owned();
                    self.pending.clear();
                    self.state = State::Inside;
                    self.inside(&rest, out);
                } else {
                    self.state = State::Outside;
                    emit_text(std::mem::take(&mut self.pending), out);
                }
            }
            State::Inside => self.inside(delta, out),
        }
    }

    fn inside(&mut self, delta: &str, out: &mut Vec<UpstreamEvent>) {
        let delta = if self.started {
            delta
        } else {
            let trimmed = delta.trim_start();
            if trimmed.is_empty() {
                return;
            }
            self.started = true;
            trimmed
        };
        self.pending.push_str(delta);
        if let Some(at) = self.pending.find(CLOSE) {
            let after = self.pending[at + CLOSE.len()..].to_owned();
            self.pending.truncate(at);
            emit_reasoning(std::mem::take(&mut self.pending), out);
            self.state = State::AfterBlock;
            self.push(&after, out);
            return;
        }
        // Keep a tail that could be the start of `</think>`.
        let keep = (1..CLOSE.len())
            .rev()
            .find(|n| self.pending.ends_with(&CLOSE[..*n]))
            .unwrap_or(0);
        let cut = self.pending.len() - keep;
        let done: String = self.pending.drain(..cut).collect();
        emit_reasoning(done, out);
    }

    /// Flushes what is held back at the end of the answer.
    pub fn finish(&mut self, out: &mut Vec<UpstreamEvent>) {
        let pending = std::mem::take(&mut self.pending);
        match self.state {
            State::Inside => emit_reasoning(pending, out),
            _ => emit_text(pending, out),
        }
    }
}

fn emit_text(text: String, out: &mut Vec<UpstreamEvent>) {
    if !text.is_empty() {
        out.push(UpstreamEvent::Text(text));
    }
}

fn emit_reasoning(text: String, out: &mut Vec<UpstreamEvent>) {
    if !text.is_empty() {
        out.push(UpstreamEvent::Reasoning(text));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(pieces: &[&str]) -> (String, String) {
        let mut s = ThinkSplitter::default();
        let mut out = Vec::new();
        for p in pieces {
            s.push(p, &mut out);
        }
        s.finish(&mut out);
        let (mut reasoning, mut text) = (String::new(), String::new());
        for e in out {
            match e {
                UpstreamEvent::Reasoning(r) => reasoning.push_str(&r),
                UpstreamEvent::Text(t) => text.push_str(&t),
                other => panic!("{other:?}"),
            }
        }
        (reasoning, text)
    }

    #[test]
    fn a_leading_block_is_reasoning_wherever_the_chunks_split_it() {
        let whole = "\n<think>\n step one</think>\n\nThe answer <think> stays text.";
        let expected = (
            "step one".to_owned(),
            "The answer <think> stays text.".to_owned(),
        );
        for cut in 0..=whole.len() {
            if !whole.is_char_boundary(cut) {
                continue;
            }
            for cut2 in cut..=whole.len() {
                let pieces = [&whole[..cut], &whole[cut..cut2], &whole[cut2..]];
                assert_eq!(split(&pieces), expected, "{pieces:?}");
            }
        }
    }

    #[test]
    fn text_without_a_block_is_untouched() {
        assert_eq!(
            split(&["  hello", " <think>x</think>"]),
            (String::new(), "  hello <think>x</think>".to_owned())
        );
        assert_eq!(split(&["<thi"]), (String::new(), "<thi".to_owned()));
        assert_eq!(
            split(&["<think>unterminated"]),
            ("unterminated".to_owned(), String::new())
        );
    }
}
