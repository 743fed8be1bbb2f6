//! What the cache breakpoint tests of the dialects share: a tool loop's second request, and its
//! translation by a preset with a profile patch.

use serde_json::{Value, json};
use toolbridge_core::plan::plan;
use toolbridge_core::request::{Limits, normalize};
use toolbridge_wire::responses::CreateResponse;

use crate::profile::{Profile, ProfilePatch};

/// A tool loop's second request: instructions, a tool, the task, a call and its result.
pub(crate) fn tool_loop() -> Value {
    json!({"model": "m", "instructions": "Be terse.",
    "tools": [{"type": "function", "name": "exec", "parameters": {"type": "object"}}],
    "input": [
        {"role": "user", "content": "List the files."},
        {"type": "function_call", "call_id": "c1", "name": "exec", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "a.txt"}
    ]})
}

/// `body` translated for `preset` patched with `patch` (TOML), as JSON.
pub(crate) fn translate(preset: &str, patch: &str, body: Value) -> Value {
    let req: CreateResponse = serde_json::from_value(body).unwrap();
    let canonical = normalize(&req, &Limits::default()).unwrap();
    let patch = ProfilePatch::parse(patch).unwrap();
    let profile = Profile::resolve(preset, &[&patch]).unwrap();
    let plan = plan(&canonical.tools, None, &profile.tools).unwrap();
    let dialect = crate::dialect::Dialect::of_preset(preset);
    let mut diagnostics = Vec::new();
    match dialect {
        crate::dialect::Dialect::Anthropic => serde_json::to_value(
            crate::anthropic::request::build(&canonical, &plan, &profile, "m", &mut diagnostics),
        ),
        _ => serde_json::to_value(crate::chat::request::build(
            &canonical,
            &plan,
            &profile,
            "m",
            &mut diagnostics,
        )),
    }
    .unwrap()
}
