//! A tour of the tool library with its built-in tools: "compute 1+1" and "sha256 of 'abc'" as
//! direct calls through the bridge, calls planned from an intent, an unknown name answered with
//! suggestions, and a two-step plan (compute, then hash the result) with output binding.
//!
//! Run with `cargo run -p toolbridge-tools --example demo`.

use std::sync::Arc;

use serde_json::{Value, json};
use toolbridge_tools::planner::{
    Bridge, CapabilityDef, ExecutionPlan, MemoryEvidenceStore, PlanStep, Planner, ToolTraits,
    ValueType,
};
use toolbridge_tools::{ToolContext, ToolError, ToolRegistry, builtins};

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
    let registry = Arc::new(ToolRegistry::with_tools(builtins::all())?);
    let planner = Planner::builder(Arc::clone(&registry))
        .capability(
            CapabilityDef::new("math", ["calculator"])
                .input("expression", ValueType::String)
                .output(ValueType::Object)
                .text_argument("expression"),
        )
        .capability(
            CapabilityDef::new("hash", ["hash"])
                .input("operation", ValueType::String)
                .input("input", ValueType::String)
                .output(ValueType::Object),
        )
        .tool_traits("calculator", ToolTraits::pure())
        .tool_traits("hash", ToolTraits::pure())
        .evidence(Arc::new(MemoryEvidenceStore::default()))
        .build()?;
    let planner = Arc::new(planner);
    let bridge = Bridge::with_planner(Arc::clone(&planner), true);
    let ctx = ToolContext::default();

    println!("tools:");
    for tool in registry.list() {
        println!(
            "  {:<11} {}",
            tool.name,
            tool.description.lines().next().unwrap_or_default()
        );
    }
    println!();

    // Direct calls: validated against the schema, then executed.
    let out = bridge
        .execute("calculator", json!({"expression": "1+1"}), &ctx)
        .await;
    show("compute 1+1", &out.map(|o| o.output));
    let out = bridge
        .execute("hash", json!({"operation": "sha256", "input": "abc"}), &ctx)
        .await;
    show("sha256 of 'abc'", &out.map(|o| o.output));
    let out = bridge
        .execute("calculator", json!({"expression": 1}), &ctx)
        .await;
    show("calculator with a bad argument", &out.map(|o| o.output));

    // An unknown name: structured error with close matches.
    let out = bridge
        .execute("calculater", json!({"expression": "1+1"}), &ctx)
        .await;
    show("unknown tool `calculater`", &out.map(|o| o.output));

    // Planned from text: "compute" asks for the math capability; the rest is the expression.
    let out = bridge.execute_intent("compute 6*7", &ctx).await;
    show("intent: compute 6*7", &out.map(|o| o.output));
    let out = bridge.execute_intent("计算 2+2", &ctx).await;
    show("intent: 计算 2+2", &out.map(|o| o.output));

    // A two-step plan: compute, then hash the result (the second step binds the first's output).
    let plan = ExecutionPlan::new(vec![
        PlanStep::new(
            "fingerprint",
            "hash",
            json!({"operation": "sha256", "input": "$steps.sum.output/text"}),
        )
        .input("input", ValueType::String),
        planner
            .step("sum", "math", json!({"expression": "20+22"}))
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
        PlanStep::new(
            "a",
            "calculator",
            json!({"expression": "$steps.b.output/text"}),
        ),
        PlanStep::new(
            "b",
            "calculator",
            json!({"expression": "$steps.a.output/text"}),
        ),
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
