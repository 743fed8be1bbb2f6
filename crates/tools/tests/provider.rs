//! The planner over any [`ToolProvider`]: an MCP tool set, the sealed typed source, a
//! request's declared tools; capability lookup and categories; and the tool-search ranking.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use toolbridge_tools::mcp::McpToolSpec;
use toolbridge_tools::planner::{
    CapabilityDef, EvidenceRecord, EvidenceScorer, EvidenceStore, MAX_SEARCH_RESULTS,
    MemoryEvidenceStore, Planner, RuleBasedAnalyzer, ToolSearch,
};
use toolbridge_tools::provider::{DeclaredTools, McpToolSet};
use toolbridge_tools::typed::ModelToolRegistry;
use toolbridge_tools::{FnTool, ToolError, ToolProvider, ToolRegistry};

fn mcp_set() -> McpToolSet {
    McpToolSet::from_listing(
        "calc",
        &json!({"tools": [
            {"name": "evaluate", "description": "Evaluates an arithmetic expression.",
             "inputSchema": {"type": "object", "properties": {"expression": {"type": "string"}},
                             "required": ["expression"]}},
            {"name": "sha256_hex", "description": "Gives the checksum of a text.",
             "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
             "annotations": {"readOnlyHint": true}}
        ]}),
    )
    .expect("a tools/list result")
}

#[tokio::test]
async fn the_planner_plans_over_an_mcp_tool_set_through_the_trait() {
    let tools: Arc<dyn ToolProvider> = Arc::new(mcp_set());
    assert_eq!(tools.capabilities("sha256_hex").expect("known"), ["hash"]);
    assert_eq!(tools.category("evaluate").as_deref(), Some("calc"));
    let err = tools.capabilities("evaluat").expect_err("unknown");
    assert_eq!(
        err,
        ToolError::UnknownTool {
            name: "evaluat".into(),
            suggestions: vec!["evaluate".into()]
        }
    );

    let planner = Planner::builder(Arc::clone(&tools))
        .capability(CapabilityDef::new("math", ["evaluate"]).text_argument("expression"))
        .capabilities_from_tool_tags()
        .build()
        .expect("checked against the MCP schemas");
    let planned = planner
        .plan_intent("compute 2*21", None)
        .await
        .expect("plans");
    assert_eq!(planned.plan.steps()[0].tool, "evaluate");
    assert_eq!(planned.plan.steps()[0].args, json!({"expression": "2*21"}));
    // The inferred tags make the hash tool plannable without a hand-written capability.
    let planned = planner
        .plan_intent("checksum of abc", None)
        .await
        .expect("plans");
    assert_eq!(planned.plan.steps()[0].tool, "sha256_hex");

    // A capability naming an argument the MCP schema does not have is refused at build time.
    let err = Planner::builder(tools)
        .capability(CapabilityDef::new("math", ["evaluate"]).text_argument("expr"))
        .build()
        .expect_err("no such argument");
    assert_eq!(err.code(), "invalid_configuration");
}

#[derive(Deserialize, JsonSchema)]
struct Expression {
    /// The arithmetic to do.
    expression: String,
}

#[derive(Deserialize, JsonSchema)]
struct Empty {}

#[derive(Debug, PartialEq)]
enum Action {
    Calculate(String),
    Greet,
}

#[tokio::test]
async fn the_planner_plans_over_the_typed_source_through_the_trait() {
    let typed = ModelToolRegistry::new()
        .tool("calculate", "Does arithmetic.", |e: Expression| {
            Action::Calculate(e.expression)
        })
        .with_capabilities(["math"])
        .with_category("arithmetic")
        .tool("greet", "Says hello.", |_: Empty| Action::Greet)
        .seal()
        .expect("seals");
    let tools: Arc<dyn ToolProvider> = Arc::new(typed.clone());
    let listed: Vec<_> = tools.list_tools().into_iter().map(|t| t.name).collect();
    assert_eq!(listed, ["calculate", "greet"]);
    assert_eq!(tools.category("calculate").as_deref(), Some("arithmetic"));

    let planner = Planner::builder(tools)
        .capability(CapabilityDef::new("math", ["calculate"]).text_argument("expression"))
        .build()
        .expect("builds over the typed source");
    let planned = planner
        .plan_intent("compute 3+4", None)
        .await
        .expect("plans");
    let step = &planned.plan.steps()[0];
    assert_eq!(
        (step.tool.as_str(), &step.args),
        ("calculate", &json!({"expression": "3+4"}))
    );
    // The typed source resolves what was planned; it has no registry, so the planner's is empty.
    let selection = toolbridge_tools::typed::ModelSelection::new(&step.tool, step.args.clone());
    let action = toolbridge_tools::typed::ModelToolSource::resolve(&typed, &selection, "plan")
        .expect("resolves");
    assert_eq!(action, Action::Calculate("3+4".into()));
    assert!(planner.registry().is_empty());
}

#[test]
fn declared_tools_read_both_function_shapes_and_skip_other_types() {
    let tools = DeclaredTools::from_request_tools(&json!([
        {"type": "function", "name": "get_weather", "description": "Weather for a city.",
         "parameters": {"type": "object"}, "strict": true},
        {"type": "function", "function": {"name": "md5_text", "description": "Hash a text.",
         "category": "crypto"}},
        {"type": "web_search_preview"},
        {"type": "custom", "name": "raw"}
    ]))
    .expect("reads");
    let names: Vec<_> = tools.list_tools().into_iter().map(|t| t.name).collect();
    assert_eq!(names, ["get_weather", "md5_text"]);
    assert_eq!(tools.category("md5_text").as_deref(), Some("crypto"));
    assert_eq!(tools.capabilities("md5_text").expect("known"), ["hash"]);

    let err = DeclaredTools::from_request_tools(&json!([{"type": "function", "function": {}}]))
        .expect_err("no name");
    assert_eq!(
        err,
        ToolError::InvalidArguments {
            path: "/tools/0/function/name".into(),
            message: "`name` must be a string".into()
        }
    );
    let many: Vec<_> = (0..1025).map(|_| json!({"type": "web_search"})).collect();
    let err = DeclaredTools::from_request_tools(&json!(many)).expect_err("too many");
    assert_eq!(err.code(), "limit_exceeded");
}

#[test]
fn the_registry_answers_capabilities_and_categories_by_name() {
    let mut registry = ToolRegistry::empty();
    let tool = FnTool::new("add", "Adds.", json!({"type": "object"}), |_, _| async {
        Ok(json!(0))
    })
    .with_capabilities(&["math"])
    .with_category("arithmetic");
    registry.register(Arc::new(tool)).expect("registers");
    assert_eq!(registry.capabilities("add").expect("known"), ["math"]);
    assert_eq!(
        ToolProvider::category(&registry, "add").as_deref(),
        Some("arithmetic")
    );
    assert_eq!(registry.list()[0].category.as_deref(), Some("arithmetic"));
    assert_eq!(
        registry.capabilities("sub").expect_err("unknown").code(),
        "unknown_tool"
    );
}

#[tokio::test]
async fn tool_search_ranks_by_intent_then_evidence_with_a_bounded_k() {
    let tools = DeclaredTools::from_request_tools(&json!([
        {"type": "function", "name": "sha256_a", "description": "Computes a digest."},
        {"type": "function", "name": "sha256_b", "description": "Computes a digest."},
        {"type": "function", "name": "get_weather", "description": "Current weather for a city."},
        {"type": "function", "name": "calculator", "description": "Evaluates arithmetic."}
    ]))
    .expect("reads");
    let evidence = Arc::new(MemoryEvidenceStore::default());
    // `sha256_b` has a record of successes, `sha256_a` of failures: evidence breaks the tie.
    for _ in 0..3 {
        let ok: Result<(), ToolError> = Ok(());
        let failed: Result<(), ToolError> = Err(ToolError::Timeout);
        evidence
            .record(EvidenceRecord::new(
                "sha256_b",
                Duration::from_millis(5),
                &ok,
            ))
            .await
            .expect("records");
        evidence
            .record(EvidenceRecord::new(
                "sha256_a",
                Duration::from_millis(5),
                &failed,
            ))
            .await
            .expect("records");
    }
    let search = ToolSearch::new(
        Arc::new(RuleBasedAnalyzer::with_default_rules()),
        EvidenceScorer::default(),
        evidence,
    );
    let hits = search
        .top_k(&tools, "sha256 digest of a file", 10)
        .await
        .expect("ranks");
    let names: Vec<_> = hits.iter().map(|h| h.name.as_str()).collect();
    assert_eq!(names, ["sha256_b", "sha256_a"]);
    assert_eq!(hits[0].capabilities, ["hash"]);
    assert!(hits[0].evidence > hits[1].evidence);

    let hits = search
        .top_k(&tools, "weather in Paris", 10)
        .await
        .expect("ranks");
    assert_eq!(
        hits.iter().map(|h| h.name.as_str()).collect::<Vec<_>>(),
        ["get_weather"]
    );
    assert!(
        search
            .top_k(&tools, "sha256", 0)
            .await
            .expect("ranks")
            .is_empty()
    );
    let one = search.top_k(&tools, "sha256", 1).await.expect("ranks");
    assert_eq!(one.len(), 1);
    let huge = ToolSearch::default()
        .top_k(&tools, "digest", usize::MAX)
        .await
        .expect("ranks");
    assert!(huge.len() <= MAX_SEARCH_RESULTS);
}

#[test]
fn an_mcp_listing_without_a_name_is_reported_with_its_pointer() {
    let err = McpToolSet::from_listing("s", &json!({"tools": [{"description": "x"}]}))
        .expect_err("no name");
    assert_eq!(
        err,
        ToolError::InvalidArguments {
            path: "/tools/0/name".into(),
            message: "`name` must be a string".into()
        }
    );
    let set = McpToolSet::new(
        "s",
        vec![McpToolSpec {
            name: "t".into(),
            description: String::new(),
            input_schema: json!({"type": "object"}),
        }],
    );
    assert_eq!(set.list_tools()[0].category.as_deref(), Some("s"));
}
