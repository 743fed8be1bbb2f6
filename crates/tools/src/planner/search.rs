//! Tool search: the top-k tools of a [`ToolProvider`] for a query text, ranked by the intent
//! analyser and the evidence scorer. This is the library half of a hosted `tool_search`: the
//! caller (the gateway, for deferred tools) hands over the tool descriptions and the query and
//! gets the ranked names back.
//!
//! A tool's relevance is the score of every analyser match whose capability the tool carries
//! (its tags, inferred from name and description for sources without tags) plus half a point
//! per distinct query word found in its name or description. Tools with no relevance are left
//! out. Equal relevance is broken by the evidence scorer's total (success rate, latency, cost,
//! traits), then by name, so the order is deterministic. `k` is capped at
//! [`MAX_SEARCH_RESULTS`]. Nothing is executed.

use std::collections::BTreeSet;
use std::sync::Arc;

use super::Planner;
use super::capability::CapabilityCatalog;
use super::evidence::{EvidenceScorer, EvidenceStore, MemoryEvidenceStore};
use super::intent::{IntentAnalyzer, RuleBasedAnalyzer};
use crate::provider::ToolProvider;
use crate::tool::ToolError;

/// The most results one search returns, whatever `k` asks.
pub const MAX_SEARCH_RESULTS: usize = 50;

/// One tool found by a search.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolHit {
    /// The tool's name.
    pub name: String,
    /// Its description.
    pub description: String,
    /// Its category, when it has one.
    pub category: Option<String>,
    /// The relevance to the query (analyser matches plus word overlap).
    pub relevance: f64,
    /// The evidence scorer's total for the tool.
    pub evidence: f64,
    /// The capabilities of the tool the query asked for.
    pub capabilities: Vec<String>,
}

/// Ranks a provider's tools for a query; cheap to clone.
#[derive(Clone)]
pub struct ToolSearch {
    analyzer: Arc<dyn IntentAnalyzer>,
    scorer: EvidenceScorer,
    evidence: Arc<dyn EvidenceStore>,
    catalog: CapabilityCatalog,
}

impl std::fmt::Debug for ToolSearch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolSearch")
            .field("scorer", &self.scorer)
            .finish_non_exhaustive()
    }
}

impl Default for ToolSearch {
    fn default() -> Self {
        Self::new(
            Arc::new(RuleBasedAnalyzer::with_default_rules()),
            EvidenceScorer::default(),
            Arc::new(MemoryEvidenceStore::default()),
        )
    }
}

impl ToolSearch {
    /// A search with this analyser, scorer and evidence store; tools have default traits.
    pub fn new(
        analyzer: Arc<dyn IntentAnalyzer>,
        scorer: EvidenceScorer,
        evidence: Arc<dyn EvidenceStore>,
    ) -> Self {
        Self {
            analyzer,
            scorer,
            evidence,
            catalog: CapabilityCatalog::default(),
        }
    }

    /// The `k` most relevant tools of `tools` for `query`, best first (`k` capped at
    /// [`MAX_SEARCH_RESULTS`]).
    pub async fn top_k(
        &self,
        tools: &dyn ToolProvider,
        query: &str,
        k: usize,
    ) -> Result<Vec<ToolHit>, ToolError> {
        let k = k.min(MAX_SEARCH_RESULTS);
        if k == 0 {
            return Ok(Vec::new());
        }
        let matches = self.analyzer.analyze(query).await?;
        let query_words = distinct_words(query);
        let mut hits = Vec::new();
        for tool in tools.list_tools() {
            let asked: Vec<&_> = matches
                .iter()
                .filter(|m| tool.capabilities.contains(&m.capability))
                .collect();
            let mut relevance: f64 = asked.iter().map(|m| m.score).sum();
            let own = distinct_words(&format!(
                "{} {}",
                tool.name.replace(['_', '-'], " "),
                tool.description
            ));
            relevance += 0.5 * query_words.intersection(&own).count() as f64;
            if relevance <= 0.0 {
                continue;
            }
            let records = self.evidence.recent(&tool.name, self.scorer.window).await?;
            let evidence = self
                .scorer
                .score(&tool.name, self.catalog.traits(&tool.name), &records)
                .total;
            hits.push(ToolHit {
                capabilities: asked.iter().map(|m| m.capability.clone()).collect(),
                name: tool.name,
                description: tool.description,
                category: tool.category,
                relevance,
                evidence,
            });
        }
        hits.sort_by(|a, b| {
            b.relevance
                .total_cmp(&a.relevance)
                .then(b.evidence.total_cmp(&a.evidence))
                .then_with(|| a.name.cmp(&b.name))
        });
        hits.truncate(k);
        Ok(hits)
    }
}

/// Lowercase words of three or more letters or digits (short words like `a`, `of`, `to` carry
/// no signal).
fn distinct_words(text: &str) -> BTreeSet<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.chars().count() >= 3)
        .map(str::to_lowercase)
        .collect()
}

impl Planner {
    /// A [`ToolSearch`] with this planner's analyser, scorer, evidence store and tool traits.
    pub fn tool_search(&self) -> ToolSearch {
        ToolSearch {
            analyzer: Arc::clone(&self.analyzer),
            scorer: self.scorer,
            evidence: Arc::clone(&self.evidence),
            catalog: self.catalog.clone(),
        }
    }

    /// The `k` tools of the planner's own provider most relevant to `query`.
    pub async fn search_tools(&self, query: &str, k: usize) -> Result<Vec<ToolHit>, ToolError> {
        self.tool_search()
            .top_k(self.provider.as_ref(), query, k)
            .await
    }
}
