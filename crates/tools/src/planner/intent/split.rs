//! Decomposition: a request split into ordered parts at English and Chinese connectives
//! ("then", "and then", "after that", "using the result", "然后", "再", "接着", "并且", …),
//! each part saying whether it refers to the result before it ("the result", "结果"). English
//! connectives match whole words only, so `then` does not split `authentication`; Chinese ones
//! match inside CJK runs. Which capability each part asks for is the analyser's job.

use std::ops::Range;

use super::rules::{DEFAULT_CONNECTIVES, REFERENCE_TERMS};
use super::{cjk_runs, is_cjk, words};

/// The most parts one request is split into; text past the last allowed cut stays in the
/// last part.
pub const MAX_PARTS: usize = 16;

/// One part of a request that asks for several things in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IntentPart {
    /// The byte range of the part in the request, connectives and edge punctuation excluded.
    pub span: Range<usize>,
    /// The part refers to the previous part's result, by a reference ("the result", "结果")
    /// or by the connective before it ("using the result"). Always false for the first part.
    pub uses_previous: bool,
}

/// A cut: where a connective is, and whether it hands the result on.
struct Cut {
    span: Range<usize>,
    passes: bool,
}

/// The request's parts in order; one part spanning the whole text when there is no
/// connective between two non-empty parts.
pub fn split_request(text: &str) -> Vec<IntentPart> {
    let mut cuts = connective_cuts(text);
    cuts.sort_by_key(|c| (c.span.start, usize::MAX - c.span.len()));
    let mut parts = Vec::new();
    let mut at = 0;
    let mut passes = false;
    for cut in cuts {
        if cut.span.start < at || parts.len() + 1 >= MAX_PARTS {
            continue;
        }
        let pushed = push_part(text, at..cut.span.start, passes, &mut parts);
        // A connective right after another one (`然后再`) hands on what the first one said.
        passes = cut.passes || (passes && !pushed);
        at = cut.span.end;
    }
    push_part(text, at..text.len(), passes, &mut parts);
    if parts.len() <= 1 {
        return vec![IntentPart {
            span: 0..text.len(),
            uses_previous: false,
        }];
    }
    if let Some(first) = parts.first_mut() {
        first.uses_previous = false;
    }
    parts
}

fn connective_cuts(text: &str) -> Vec<Cut> {
    let tokens = words(text);
    let runs = cjk_runs(text);
    let mut cuts = Vec::new();
    for (connective, passes) in DEFAULT_CONNECTIVES {
        if connective.chars().any(is_cjk) {
            for (start, found) in text.match_indices(connective) {
                let span = start..start + found.len();
                if runs
                    .iter()
                    .any(|r| r.start <= span.start && span.end <= r.end)
                {
                    cuts.push(Cut {
                        span,
                        passes: *passes,
                    });
                }
            }
            continue;
        }
        let phrase: Vec<&str> = connective.split_whitespace().collect();
        for window in tokens.windows(phrase.len()) {
            if window.iter().zip(&phrase).all(|(t, w)| t.text == *w)
                && let (Some(first), Some(last)) = (window.first(), window.last())
            {
                cuts.push(Cut {
                    span: first.span.start..last.span.end,
                    passes: *passes,
                });
            }
        }
    }
    cuts
}

/// Adds the part in `range` trimmed of whitespace and punctuation, when anything is left;
/// says whether it did.
fn push_part(text: &str, range: Range<usize>, passes: bool, parts: &mut Vec<IntentPart>) -> bool {
    let Some(slice) = text.get(range.clone()) else {
        return false;
    };
    let edge =
        |c: char| c.is_whitespace() || (c.is_ascii_punctuation() && c != '$') || is_cjk_punct(c);
    let start = range.start + (slice.len() - slice.trim_start_matches(edge).len());
    let end = range.start + slice.trim_end_matches(edge).len();
    if start >= end {
        return false;
    }
    let refers = text.get(start..end).is_some_and(refers_back);
    parts.push(IntentPart {
        span: start..end,
        uses_previous: passes || refers,
    });
    true
}

fn is_cjk_punct(c: char) -> bool {
    matches!(
        c,
        '，' | '。' | '、' | '；' | '：' | '！' | '？' | '（' | '）'
    )
}

/// True when the text names an earlier result ("the result", "it", "结果").
fn refers_back(text: &str) -> bool {
    let tokens = words(text);
    REFERENCE_TERMS.iter().any(|term| {
        if term.chars().any(is_cjk) {
            text.contains(term)
        } else {
            tokens.iter().any(|t| t.text == *term)
        }
    })
}
