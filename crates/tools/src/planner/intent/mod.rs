//! Intent analysis: from free text to the capabilities it asks for.
//!
//! [`IntentAnalyzer`] is the seam: a model-backed analyzer can replace the rule-based one without
//! touching the planner. [`RuleBasedAnalyzer`] matches configured terms with word boundaries, and
//! evaluates every rule (never first-match-wins):
//!
//! - English (any non-CJK script): the text is split into lowercase words at every character that
//!   is not a letter or digit, and a term (a word or a phrase of words) matches only whole,
//!   consecutive words. So `add` does not match `address` and `read` does not match `thread`.
//! - Chinese (CJK runs, which have no spaces): each run is segmented by forward maximum matching
//!   against a lexicon of every configured term plus *neutral* terms that belong to no
//!   capability. A term matches only where the segmentation produced exactly that whole term, so
//!   the neutral `计算机` (computer) keeps `计算` (compute) from matching inside it.
//!
//! Decomposition into ordered parts is in `split`, the built-in terms in `rules`. It does not
//! map capabilities to tools (see [`super::capability`]) nor pick a tool.

use std::collections::HashMap;
use std::ops::Range;

use crate::tool::{BoxFuture, ToolError};

mod rules;
mod split;
#[cfg(test)]
mod tests;

use rules::default_rules;
pub use rules::{DEFAULT_CONNECTIVES, DEFAULT_NEUTRAL_TERMS, DEFAULT_RULES, REFERENCE_TERMS};
pub use split::{IntentPart, MAX_PARTS, split_request};

/// A capability an intent asks for, with the terms that said so.
#[derive(Debug, Clone, PartialEq)]
pub struct IntentMatch {
    /// The capability id.
    pub capability: String,
    /// The weight of the matching terms (a phrase of n words weighs n; a Chinese term 1).
    pub score: f64,
    /// Every matching occurrence, in text order.
    pub terms: Vec<MatchedTerm>,
}

/// One occurrence of a configured term in the text.
#[derive(Debug, Clone, PartialEq)]
pub struct MatchedTerm {
    /// The term as configured (lowercased).
    pub term: String,
    /// The byte range of the occurrence in the analysed text.
    pub span: Range<usize>,
}

impl IntentMatch {
    /// The text without the matching terms, whitespace collapsed: what the intent is *about*
    /// ("compute 1+1" → "1+1").
    pub fn remainder(&self, text: &str) -> String {
        let mut spans: Vec<Range<usize>> = self.terms.iter().map(|t| t.span.clone()).collect();
        spans.sort_by_key(|s| s.start);
        let mut kept = String::with_capacity(text.len());
        let mut at = 0;
        for span in spans {
            if span.start >= at {
                kept.push_str(text.get(at..span.start).unwrap_or_default());
                kept.push(' ');
                at = span.end;
            }
        }
        kept.push_str(text.get(at..).unwrap_or_default());
        kept.split_whitespace().collect::<Vec<_>>().join(" ")
    }
}

/// Turns text into the capabilities it asks for, best first.
pub trait IntentAnalyzer: Send + Sync {
    /// The capabilities `text` asks for, sorted by descending score; empty when none.
    fn analyze<'a>(&'a self, text: &'a str) -> BoxFuture<'a, Result<Vec<IntentMatch>, ToolError>>;

    /// The ordered parts of a request that asks for several things ("compute 17+25 then sha256
    /// the result"); one part for a single intent. The default splits at the built-in English
    /// and Chinese connectives ([`split_request`]).
    fn decompose(&self, text: &str) -> Vec<IntentPart> {
        split_request(text)
    }
}

/// A capability and the terms (English words or phrases, or Chinese terms) that ask for it.
#[derive(Debug, Clone, PartialEq)]
pub struct IntentRule {
    /// The capability id the terms point to.
    pub capability: String,
    /// The terms; each is English (matched by whole words) unless it contains CJK characters.
    pub terms: Vec<String>,
}

impl IntentRule {
    /// A rule for `capability` with `terms`.
    pub fn new<S: Into<String>>(
        capability: impl Into<String>,
        terms: impl IntoIterator<Item = S>,
    ) -> Self {
        Self {
            capability: capability.into(),
            terms: terms.into_iter().map(Into::into).collect(),
        }
    }
}

/// The word-boundary, bilingual rule analyzer.
///
/// ```
/// use toolbridge_tools::planner::RuleBasedAnalyzer;
///
/// let analyzer = RuleBasedAnalyzer::with_default_rules();
/// let top = |text: &str| analyzer.matches(text).first().map(|m| m.capability.clone());
/// assert_eq!(top("please add 2 and 3").as_deref(), Some("math"));
/// assert_eq!(top("what is the address of the thread?"), None);
/// assert_eq!(top("计算 1+1").as_deref(), Some("math"));
/// assert_eq!(top("这台计算机很快"), None);
/// ```
#[derive(Debug, Clone)]
pub struct RuleBasedAnalyzer {
    /// Capability ids in rule order (ties rank by this order).
    capabilities: Vec<String>,
    /// English phrases: (words, capability index, the configured term).
    english: Vec<(Vec<String>, usize, String)>,
    /// Chinese lexicon: term → capability indexes (empty for neutral terms).
    lexicon: HashMap<String, Vec<usize>>,
    /// The longest lexicon term, in chars.
    longest: usize,
}

impl RuleBasedAnalyzer {
    /// An analyzer from rules and neutral Chinese terms (words that contain a capability term
    /// but mean something else, like `计算机`). Empty capability ids or terms are errors.
    pub fn new<S: AsRef<str>>(
        rules: impl IntoIterator<Item = IntentRule>,
        neutral_terms: impl IntoIterator<Item = S>,
    ) -> Result<Self, ToolError> {
        let mut analyzer = Self {
            capabilities: Vec::new(),
            english: Vec::new(),
            lexicon: HashMap::new(),
            longest: 0,
        };
        for rule in rules {
            if rule.capability.trim().is_empty() {
                return Err(ToolError::InvalidConfiguration(
                    "an intent rule has an empty capability id".to_owned(),
                ));
            }
            let index = match analyzer
                .capabilities
                .iter()
                .position(|c| *c == rule.capability)
            {
                Some(index) => index,
                None => {
                    analyzer.capabilities.push(rule.capability.clone());
                    analyzer.capabilities.len() - 1
                }
            };
            for term in &rule.terms {
                analyzer.add_term(term, Some(index), &rule.capability)?;
            }
        }
        for term in neutral_terms {
            analyzer.add_term(term.as_ref(), None, "(neutral)")?;
        }
        Ok(analyzer)
    }

    fn add_term(
        &mut self,
        term: &str,
        capability: Option<usize>,
        owner: &str,
    ) -> Result<(), ToolError> {
        let term = term.trim().to_lowercase();
        if term.is_empty() {
            return Err(ToolError::InvalidConfiguration(format!(
                "an intent rule for `{owner}` has an empty term"
            )));
        }
        if term.chars().any(is_cjk) {
            if term.chars().any(|c| !is_cjk(c)) {
                return Err(ToolError::InvalidConfiguration(format!(
                    "intent term `{term}` for `{owner}` mixes CJK and other characters"
                )));
            }
            self.longest = self.longest.max(term.chars().count());
            let owners = self.lexicon.entry(term).or_default();
            if let Some(index) = capability
                && !owners.contains(&index)
            {
                owners.push(index);
            }
        } else if let Some(index) = capability {
            let words: Vec<String> = words(&term).into_iter().map(|w| w.text).collect();
            if words.is_empty() {
                return Err(ToolError::InvalidConfiguration(format!(
                    "intent term `{term}` for `{owner}` has no letters or digits"
                )));
            }
            self.english.push((words, index, term));
        }
        Ok(())
    }

    /// The built-in English and Chinese rules for the capability ids `math`, `hash`, `text`,
    /// `id`, `regex`, `json`, `web_search`, `web_fetch`, `file` and `pdf`, with neutral terms
    /// such as `计算机` (computer), `加密` (encrypt), `地址` (address) and `线程` (thread).
    pub fn with_default_rules() -> Self {
        let rules = default_rules();
        let analyzer = Self::new(rules, DEFAULT_NEUTRAL_TERMS);
        // The default table is static and valid (a unit test proves it); an empty analyzer is
        // the safe fallback rather than a panic.
        analyzer.unwrap_or_else(|_| Self {
            capabilities: Vec::new(),
            english: Vec::new(),
            lexicon: HashMap::new(),
            longest: 0,
        })
    }

    /// The matches for `text`, best first (score descending, then rule order).
    pub fn matches(&self, text: &str) -> Vec<IntentMatch> {
        let mut found: Vec<Vec<MatchedTerm>> = vec![Vec::new(); self.capabilities.len()];
        let tokens = words(text);
        for (phrase, capability, term) in &self.english {
            for window_start in 0..tokens.len() {
                let window = tokens.get(window_start..window_start + phrase.len());
                let Some(window) = window else { break };
                if window.iter().zip(phrase).all(|(t, w)| t.text == *w) {
                    let (Some(first), Some(last)) = (window.first(), window.last()) else {
                        continue;
                    };
                    found[*capability].push(MatchedTerm {
                        term: term.clone(),
                        span: first.span.start..last.span.end,
                    });
                }
            }
        }
        for run in cjk_runs(text) {
            self.segment(text, run, &mut found);
        }
        let mut matches: Vec<(usize, IntentMatch)> = found
            .into_iter()
            .enumerate()
            .filter(|(_, terms)| !terms.is_empty())
            .map(|(index, mut terms)| {
                terms.sort_by_key(|t| t.span.start);
                let mut distinct: Vec<&str> = Vec::new();
                let mut score = 0.0;
                for t in &terms {
                    if !distinct.contains(&t.term.as_str()) {
                        distinct.push(&t.term);
                        score += term_weight(&t.term);
                    }
                }
                let capability = self.capabilities[index].clone();
                (
                    index,
                    IntentMatch {
                        capability,
                        score,
                        terms,
                    },
                )
            })
            .collect();
        matches.sort_by(|(ia, a), (ib, b)| b.score.total_cmp(&a.score).then(ia.cmp(ib)));
        matches.into_iter().map(|(_, m)| m).collect()
    }

    /// Forward maximum matching over one CJK run (a byte range of `text`).
    fn segment(&self, text: &str, run: Range<usize>, found: &mut [Vec<MatchedTerm>]) {
        let Some(run_text) = text.get(run.clone()) else {
            return;
        };
        let chars: Vec<(usize, char)> = run_text.char_indices().collect();
        let byte_at = |i: usize| {
            chars
                .get(i)
                .map_or(run.end, |(offset, _)| run.start + offset)
        };
        let mut i = 0;
        while i < chars.len() {
            let mut step = 1;
            for len in (1..=self.longest.min(chars.len() - i)).rev() {
                let Some(candidate) = text.get(byte_at(i)..byte_at(i + len)) else {
                    continue;
                };
                if let Some(owners) = self.lexicon.get(candidate) {
                    for owner in owners {
                        found[*owner].push(MatchedTerm {
                            term: candidate.to_owned(),
                            span: byte_at(i)..byte_at(i + len),
                        });
                    }
                    step = len;
                    break;
                }
            }
            i += step;
        }
    }
}

impl IntentAnalyzer for RuleBasedAnalyzer {
    fn analyze<'a>(&'a self, text: &'a str) -> BoxFuture<'a, Result<Vec<IntentMatch>, ToolError>> {
        Box::pin(async move { Ok(self.matches(text)) })
    }
}

fn term_weight(term: &str) -> f64 {
    if term.chars().any(is_cjk) {
        1.0
    } else {
        words(term).len() as f64
    }
}

struct Word {
    text: String,
    span: Range<usize>,
}

/// Lowercase words: maximal runs of letters and digits outside CJK.
fn words(text: &str) -> Vec<Word> {
    let mut out = Vec::new();
    let mut start: Option<usize> = None;
    for (offset, c) in text.char_indices() {
        let in_word = c.is_alphanumeric() && !is_cjk(c);
        match (in_word, start) {
            (true, None) => start = Some(offset),
            (false, Some(s)) => {
                out.push(Word {
                    text: text[s..offset].to_lowercase(),
                    span: s..offset,
                });
                start = None;
            }
            _ => {}
        }
    }
    if let Some(s) = start {
        out.push(Word {
            text: text[s..].to_lowercase(),
            span: s..text.len(),
        });
    }
    out
}

/// Byte ranges of maximal CJK runs.
fn cjk_runs(text: &str) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut start: Option<usize> = None;
    for (offset, c) in text.char_indices() {
        match (is_cjk(c), start) {
            (true, None) => start = Some(offset),
            (false, Some(s)) => {
                out.push(s..offset);
                start = None;
            }
            _ => {}
        }
    }
    if let Some(s) = start {
        out.push(s..text.len());
    }
    out
}

/// CJK ideographs (the unified blocks and extensions), plus `々` and `〇`.
fn is_cjk(c: char) -> bool {
    matches!(c,
        '\u{3400}'..='\u{4DBF}'
        | '\u{4E00}'..='\u{9FFF}'
        | '\u{F900}'..='\u{FAFF}'
        | '\u{20000}'..='\u{2FFFF}'
        | '\u{3005}'
        | '\u{3007}')
}
