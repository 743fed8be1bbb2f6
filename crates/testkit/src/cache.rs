//! Fake prompt caches that follow each provider's documented rules, so that a test measures a
//! session's cached share the way the provider would bill it.
//!
//! A request is read as the provider lays out its prompt: a list of blocks in cache order (Chat:
//! each tool, then each message or content part; Anthropic: tools, system, then each message's
//! blocks; Gemini: system instruction, tools, then each part; Responses: instructions, tools,
//! then each input item). A block's tokens are its compact JSON's bytes / 4, `cache_control`
//! left out (a mark is not content). A prefix is known by the chain hash of its blocks.
//!
//! - [`Rules::automatic`] (OpenAI, DeepSeek, Kimi, GLM, Gemini, vLLM, Qwen's implicit cache):
//!   every prefix of every request served is kept; a request reads its longest kept prefix,
//!   rounded down to the provider's unit, from its minimum length on. Nothing is reported
//!   written.
//! - [`Rules::breakpoints`] (Anthropic, Qwen's explicit cache): only prefixes ending at a
//!   `cache_control` mark are written (a top-level `cache_control` marks the last block); each
//!   mark reads the longest entry at most `lookback` blocks before it; what lies between that
//!   read and the last mark is reported written. When the provider does both (Qwen), a request
//!   with a mark uses the explicit cache only, one without uses the automatic one.
//!
//! [`CacheSim::ideal_reads`] is what the same provider would serve a client that talks to it
//! directly: each request reads the longest prefix it shares with an earlier one.

use std::collections::HashSet;
use std::hash::{Hash, Hasher};

use serde_json::{Value, json};

use crate::dialects::Wire;

/// How one provider caches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rules {
    /// Automatic prefix caching: `(unit, min_tokens)`.
    pub automatic: Option<(u64, u64)>,
    /// Explicit breakpoints: `(min_tokens, lookback in blocks)`.
    pub breakpoints: Option<(u64, usize)>,
}

impl Rules {
    /// Automatic prefix caching in steps of `unit` tokens from `min_tokens` on.
    pub fn automatic(unit: u64, min_tokens: u64) -> Self {
        Self {
            automatic: Some((unit, min_tokens)),
            breakpoints: None,
        }
    }

    /// Anthropic's: marks only, 20 blocks of lookback, from 1024 tokens.
    pub fn breakpoints() -> Self {
        Self {
            automatic: None,
            breakpoints: Some((1024, 20)),
        }
    }
}

/// Where the provider reports what its cache served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Report {
    /// `usage.prompt_tokens_details.cached_tokens`, writes as `cache_creation_input_tokens`
    /// (OpenAI, GLM, Qwen).
    OpenAi,
    /// `prompt_cache_hit_tokens` / `prompt_cache_miss_tokens` (DeepSeek).
    DeepSeek,
    /// A top-level `usage.cached_tokens` (Moonshot).
    Moonshot,
    /// `cache_read_input_tokens` / `cache_creation_input_tokens`, outside `input_tokens`.
    Anthropic,
    /// `usageMetadata.cachedContentTokenCount`, inside `promptTokenCount`.
    Gemini,
    /// `usage.input_tokens_details.cached_tokens` / `cache_write_tokens`.
    Responses,
}

/// What the cache did for one request, in tokens: `input` is the whole prompt, `read` and
/// `write` parts of it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Served {
    pub input: u64,
    pub read: u64,
    pub write: u64,
}

/// One block of a prompt in cache order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    /// The block's compact JSON without its `cache_control`.
    pub text: String,
    pub tokens: u64,
    pub marked: bool,
}

/// A provider's cache, fed every request it serves.
#[derive(Debug, Clone)]
pub struct CacheSim {
    pub wire: Wire,
    pub rules: Rules,
    pub report: Report,
    kept: HashSet<u64>,
    written: HashSet<u64>,
    /// What each request served got, in order.
    pub served: Vec<Served>,
    /// Each request's prefixes (chain hash, tokens up to there), in order.
    prefixes: Vec<Vec<(u64, u64)>>,
}

impl CacheSim {
    pub fn new(wire: Wire, rules: Rules, report: Report) -> Self {
        Self {
            wire,
            rules,
            report,
            kept: HashSet::new(),
            written: HashSet::new(),
            served: Vec::new(),
            prefixes: Vec::new(),
        }
    }

    /// Serves one request body: what the cache read and wrote for it.
    pub fn serve(&mut self, body: &Value) -> Served {
        let blocks = blocks(self.wire, body);
        let chain = chain(&blocks);
        let mut sums = Vec::with_capacity(blocks.len());
        let mut sum = 0;
        for b in &blocks {
            sum += b.tokens;
            sums.push(sum);
        }
        let mut marks: Vec<usize> = (0..blocks.len()).filter(|&i| blocks[i].marked).collect();
        if body.get("cache_control").is_some() && !blocks.is_empty() {
            marks.push(blocks.len() - 1);
        }
        let served = match (self.rules.breakpoints, self.rules.automatic) {
            (Some((min, lookback)), _) if !marks.is_empty() => {
                self.explicit(&chain, &sums, &marks, min, lookback)
            }
            (_, Some((unit, min))) => self.implicit(&chain, &sums, unit, min),
            _ => Served::default(),
        };
        let served = Served {
            input: sum,
            ..served
        };
        self.served.push(served);
        self.prefixes
            .push(chain.iter().copied().zip(sums.iter().copied()).collect());
        served
    }

    fn implicit(&mut self, chain: &[u64], sums: &[u64], unit: u64, min: u64) -> Served {
        let hit = (0..chain.len())
            .rev()
            .find(|&i| self.kept.contains(&chain[i]))
            .map_or(0, |i| sums[i]);
        let hit = round_down(hit, unit);
        self.kept.extend(chain.iter().copied());
        Served {
            read: if hit >= min.max(1) { hit } else { 0 },
            ..Served::default()
        }
    }

    fn explicit(
        &mut self,
        chain: &[u64],
        sums: &[u64],
        marks: &[usize],
        min: u64,
        lookback: usize,
    ) -> Served {
        let mut read = 0;
        for &p in marks {
            let from = p.saturating_sub(lookback);
            if let Some(j) = (from..=p).rev().find(|&j| self.written.contains(&chain[j])) {
                read = read.max(sums[j]);
            }
        }
        let mut write = 0;
        for &p in marks {
            if sums[p] >= min && self.written.insert(chain[p]) {
                write = write.max(sums[p].saturating_sub(read));
            }
        }
        Served {
            read,
            write,
            ..Served::default()
        }
    }

    /// The cached share over requests 2..N: what was read against what [`ideal_reads`] says a
    /// direct client would have read. `None` with fewer than two requests.
    pub fn share_of_ideal(&self) -> Option<f64> {
        let ideal: u64 = self.ideal_reads().iter().skip(1).sum();
        let read: u64 = self.served.iter().skip(1).map(|s| s.read).sum();
        (self.served.len() >= 2 && ideal > 0).then(|| read as f64 / ideal as f64)
    }

    /// Rewrites the usage a reply's JSON `value` carries to `served`, in the provider's own
    /// fields.
    pub fn patch(&self, served: Served, value: &mut Value) {
        for pointer in [
            "/usage",
            "/message/usage",
            "/response/usage",
            "/usageMetadata",
        ] {
            if let Some(usage) = value.pointer_mut(pointer).filter(|u| u.is_object()) {
                usage_fields(self.report, served, usage);
            }
        }
    }
}

impl CacheSim {
    /// What the same cache serves a client that talks to the provider directly: each request
    /// reads the longest prefix it shares with any earlier one (rounded as the rules round) —
    /// all of the one before when the conversation only grew, less where the client itself
    /// rewrote it (a compaction). Only the prefix property (`prefix_break`) tells whether a
    /// bridge kept what the client kept; this is the share's denominator.
    pub fn ideal_reads(&self) -> Vec<u64> {
        let (unit, min) = match (self.rules.breakpoints, self.rules.automatic) {
            (_, Some((unit, min))) => (unit, min),
            (Some((min, _)), None) => (0, min),
            (None, None) => return vec![0; self.prefixes.len()],
        };
        let shared = |a: &[(u64, u64)], b: &[(u64, u64)]| {
            a.iter()
                .zip(b)
                .take_while(|(x, y)| x.0 == y.0)
                .last()
                .map_or(0, |(x, _)| x.1)
        };
        (0..self.prefixes.len())
            .map(|i| {
                let best = (0..i)
                    .map(|j| shared(&self.prefixes[i], &self.prefixes[j]))
                    .max()
                    .unwrap_or(0);
                let best = round_down(best, unit);
                if best >= min.max(1) { best } else { 0 }
            })
            .collect()
    }
}

/// `tokens` rounded down to a whole number of `unit`s (as they are when `unit` is 0).
fn round_down(tokens: u64, unit: u64) -> u64 {
    tokens
        .checked_div(unit)
        .map_or(tokens, |whole| whole * unit)
}

fn usage_fields(report: Report, s: Served, u: &mut Value) {
    let uncached = s.input - s.read - s.write;
    match report {
        Report::OpenAi | Report::DeepSeek | Report::Moonshot => {
            let completion = u["completion_tokens"].as_u64().unwrap_or(0);
            u["prompt_tokens"] = json!(s.input);
            u["total_tokens"] = json!(s.input + completion);
            if let Some(obj) = u.as_object_mut() {
                obj.remove("prompt_tokens_details");
            }
            match report {
                Report::DeepSeek => {
                    u["prompt_cache_hit_tokens"] = json!(s.read);
                    u["prompt_cache_miss_tokens"] = json!(s.input - s.read);
                }
                Report::Moonshot => u["cached_tokens"] = json!(s.read),
                _ => {
                    u["prompt_tokens_details"] = json!({"cached_tokens": s.read});
                    if s.write > 0 {
                        u["prompt_tokens_details"]["cache_creation_input_tokens"] = json!(s.write);
                    }
                }
            }
        }
        Report::Anthropic => {
            if u.get("input_tokens").is_some() {
                u["input_tokens"] = json!(uncached);
                u["cache_read_input_tokens"] = json!(s.read);
                u["cache_creation_input_tokens"] = json!(s.write);
            }
        }
        Report::Gemini => {
            let out = u["candidatesTokenCount"].as_u64().unwrap_or(0);
            u["promptTokenCount"] = json!(s.input);
            u["cachedContentTokenCount"] = json!(s.read);
            u["totalTokenCount"] = json!(s.input + out);
        }
        Report::Responses => {
            let out = u["output_tokens"].as_u64().unwrap_or(0);
            u["input_tokens"] = json!(s.input);
            u["input_tokens_details"] =
                json!({"cached_tokens": s.read, "cache_write_tokens": s.write});
            u["total_tokens"] = json!(s.input + out);
        }
    }
}

/// The blocks of a request body in the provider's cache order.
pub fn blocks(wire: Wire, body: &Value) -> Vec<Block> {
    let mut out = Vec::new();
    let list = |v: Option<&Value>| v.and_then(Value::as_array).cloned().unwrap_or_default();
    match wire {
        Wire::Chat { .. } => {
            list(body.get("tools"))
                .iter()
                .for_each(|t| push(&mut out, t));
            for m in list(body.get("messages")) {
                split(&mut out, &m, "content");
            }
        }
        Wire::Anthropic => {
            list(body.get("tools"))
                .iter()
                .for_each(|t| push(&mut out, t));
            match body.get("system") {
                Some(Value::Array(blocks)) => blocks.iter().for_each(|b| push(&mut out, b)),
                Some(system @ Value::String(_)) => push(&mut out, system),
                _ => {}
            }
            for m in list(body.get("messages")) {
                split(&mut out, &m, "content");
            }
        }
        Wire::Gemini => {
            if let Some(s) = body
                .get("systemInstruction")
                .or(body.get("system_instruction"))
            {
                push(&mut out, s);
            }
            list(body.get("tools"))
                .iter()
                .for_each(|t| push(&mut out, t));
            for c in list(body.get("contents")) {
                split(&mut out, &c, "parts");
            }
        }
        Wire::Responses => {
            if let Some(i) = body.get("instructions") {
                push(&mut out, i);
            }
            list(body.get("tools"))
                .iter()
                .for_each(|t| push(&mut out, t));
            match body.get("input") {
                Some(Value::Array(items)) => items.iter().for_each(|i| push(&mut out, i)),
                Some(text) => push(&mut out, text),
                None => {}
            }
        }
    }
    out
}

/// A message as its content parts (each a block; the rest of the message rides on the first),
/// or as one block when its content is not a list.
fn split(out: &mut Vec<Block>, message: &Value, field: &str) {
    match message.get(field) {
        Some(Value::Array(parts)) if !parts.is_empty() => {
            let mut head = message.clone();
            if let Some(obj) = head.as_object_mut() {
                obj.remove(field);
            }
            for (i, part) in parts.iter().enumerate() {
                let mut block = part.clone();
                if i == 0
                    && let Some(obj) = block.as_object_mut()
                {
                    obj.insert("_message".to_owned(), head.clone());
                }
                push(out, &block);
            }
        }
        _ => push(out, message),
    }
}

fn push(out: &mut Vec<Block>, value: &Value) {
    let mut v = value.clone();
    let marked = v
        .as_object_mut()
        .and_then(|o| o.remove("cache_control"))
        .is_some();
    let text = v.to_string();
    out.push(Block {
        tokens: (text.len() as u64).div_ceil(4),
        text,
        marked,
    });
}

fn chain(blocks: &[Block]) -> Vec<u64> {
    let mut h = 0u64;
    blocks
        .iter()
        .map(|b| {
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            h.hash(&mut hasher);
            b.text.hash(&mut hasher);
            h = hasher.finish();
            h
        })
        .collect()
}

/// Whether each body begins with the one before it, block for block (`cache_control` marks
/// aside): the prefix a provider's cache keys on. The first request that breaks it, with the
/// first block where it differs, otherwise `None`.
pub fn prefix_break(wire: Wire, bodies: &[Value]) -> Option<(usize, usize)> {
    for (n, pair) in bodies.windows(2).enumerate() {
        let (before, after) = (blocks(wire, &pair[0]), blocks(wire, &pair[1]));
        // The previous request's last message may be followed by new content parts in the
        // same message on some dialects (Anthropic merges consecutive user turns); a block
        // counts as kept when its text is unchanged.
        if let Some(i) = before
            .iter()
            .zip(after.iter())
            .position(|(a, b)| a.text != b.text)
        {
            return Some((n + 1, i));
        }
        if after.len() < before.len() {
            return Some((n + 1, after.len()));
        }
    }
    None
}
