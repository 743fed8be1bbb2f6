//! A tour of the tool library with two tiny closure tools defined here (the real built-ins are
//! elsewhere): direct calls through the bridge, a call planned from an intent, an unknown name
//! answered with suggestions, and a two-step plan with output binding.
//!
//! Run with `cargo run -p toolbridge-tools --example demo`.

use std::sync::Arc;

use serde_json::{Value, json};
use toolbridge_tools::planner::{
    Bridge, CapabilityDef, ExecutionPlan, MemoryEvidenceStore, PlanStep, Planner, ToolTraits,
    ValueType,
};
use toolbridge_tools::{FnTool, Tool, ToolContext, ToolError, ToolRegistry};

/// `add`: the sum of two integers, with the expression written out.
fn add_tool() -> Arc<dyn Tool> {
    Arc::new(
        FnTool::new(
            "add",
            "Adds two integers; returns the sum and the expression.",
            json!({
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                "required": ["a", "b"],
                "additionalProperties": false
            }),
            |args: Value, _ctx| async move {
                let a = args["a"].as_i64().unwrap_or_default();
                let b = args["b"].as_i64().unwrap_or_default();
                let sum = a
                    .checked_add(b)
                    .ok_or_else(|| ToolError::Failed("the sum overflows".into()))?;
                Ok(json!({"sum": sum, "expression": format!("{a}+{b}={sum}")}))
            },
        )
        .with_capabilities(&["math"]),
    )
}

/// `digest`: a sha256-like echo — a 64-bit FNV-1a of the text in hex (a toy, not a real hash).
fn digest_tool() -> Arc<dyn Tool> {
    Arc::new(
        FnTool::new(
            "digest",
            "Returns a short hex digest of the text.",
            json!({
                "type": "object",
                "properties": {"text": {"type": "string", "maxLength": 4096}},
                "required": ["text"],
                "additionalProperties": false
            }),
            |args: Value, _ctx| async move {
                let text = args["text"].as_str().unwrap_or_default().to_owned();
                let hash = text.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, byte| {
                    (h ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
                });
                Ok(json!({"text": text, "digest": format!("{hash:016x}")}))
            },
        )
        .with_capabilities(&["hash"]),
    )
}

fn show(label: &str, result: &Result<Value, ToolError>) {
    match result {
        Ok(value) => println!("{label:<38} → {value}"),
        Err(ToolError::UnknownTool { name, suggestions }) => {
            println!("{label:<38} → error unknown_tool: `{name}`, did you mean {suggestions:?}?")
        }
        Err(err) => println!("{label:<38} → error {}: {err}", err.code()),
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), ToolError> {
    let registry = Arc::new(ToolRegistry::with_tools([add_tool(), digest_tool()])?);
    let planner = Planner::builder(Arc::clone(&registry))
        .capability(
            CapabilityDef::new("math", ["add"])
                .input("a", ValueType::Number)
                .input("b", ValueType::Number)
                .output(ValueType::Object),
        )
        .capability(
            CapabilityDef::new("hash", ["digest"])
                .input("text", ValueType::String)
                .output(ValueType::Object)
                .text_argument("text"),
        )
        .tool_traits("add", ToolTraits::pure())
        .tool_traits("digest", ToolTraits::pure())
        .evidence(Arc::new(MemoryEvidenceStore::default()))
        .build()?;
    let planner = Arc::new(planner);
    let bridge = Bridge::with_planner(Arc::clone(&planner), true);
    let ctx = ToolContext::default();

    println!("tools:");
    for tool in registry.list() {
        println!("  {:<8} {}", tool.name, tool.description);
    }
    println!();

    // Direct calls: validated against the schema, then executed.
    let out = bridge.execute("add", json!({"a": 1, "b": 1}), &ctx).await;
    show("compute 1+1 (add)", &out.map(|o| o.output));
    let out = bridge.execute("digest", json!({"text": "abc"}), &ctx).await;
    show("digest of 'abc'", &out.map(|o| o.output));
    let out = bridge
        .execute("add", json!({"a": 1, "b": "one"}), &ctx)
        .await;
    show("add with a bad argument", &out.map(|o| o.output));

    // An unknown name: structured error with close matches (the fallback finds no intent).
    let out = bridge.execute("ad", json!({"a": 1, "b": 1}), &ctx).await;
    show("unknown tool `ad`", &out.map(|o| o.output));

    // Planned from text: "hash" asks for the hash capability; the rest is the text.
    let out = bridge.execute_intent("hash hello world", &ctx).await;
    show("intent: hash hello world", &out.map(|o| o.output));
    let out = bridge.execute_intent("计算 2+2", &ctx).await;
    show(
        "intent: 计算 2+2 (no text argument)",
        &out.map(|o| o.output),
    );

    // A two-step plan: the digest step binds a part of the sum step's output.
    let plan = ExecutionPlan::new(vec![
        PlanStep::new(
            "fingerprint",
            "digest",
            json!({"text": "$steps.sum.output/expression"}),
        )
        .input("text", ValueType::String),
        planner
            .step("sum", "math", json!({"a": 20, "b": 22}))
            .await?,
    ])?;
    let run = bridge.run_plan(&plan, &ctx).await?;
    println!();
    println!("plan order: {}", run.order.join(" → "));
    for (step, output) in &run.outputs {
        println!("  {step:<12} {output}");
    }

    // Plans are validated before anything runs.
    let cyclic = ExecutionPlan::new(vec![
        PlanStep::new("a", "add", json!({"a": "$steps.b.output/sum", "b": 1})),
        PlanStep::new("b", "add", json!({"a": "$steps.a.output/sum", "b": 1})),
    ]);
    if let Err(err) = cyclic {
        println!("cyclic plan rejected: {} ({})", err, err.code());
    }

    // Evidence was recorded for every execution and now ranks the tools.
    println!();
    for capability in ["math", "hash"] {
        for score in planner.rank(capability).await? {
            println!(
                "evidence {capability:<5} {:<7} samples {} success {:.2} total {:.3}",
                score.tool, score.samples, score.success_rate, score.total
            );
        }
    }
    Ok(())
}
