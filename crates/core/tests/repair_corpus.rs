//! The repair corpus: malformed model output of the kinds models really produce, one case per
//! line of `fixtures/repair/corpus.jsonl` (written by `gen_corpus.py` beside it), each with the
//! declared tools it was produced against, the expected outcome and the expected fix codes.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code fails loudly

use std::collections::HashMap;
use std::path::Path;

use serde_json::Value;
use toolbridge_core::plan::{Identity, ToolCapabilities, plan};
use toolbridge_core::repair::{NameMatch, Outcome, ToolSchemas, resolve_provider_name};
use toolbridge_wire::responses::Tool;

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/repair");

struct ToolSet {
    tools: Vec<Tool>,
    schemas: ToolSchemas,
}

fn tool_set(name: &str) -> ToolSet {
    let path = Path::new(DIR).join(format!("tools_{name}.json"));
    let text = std::fs::read_to_string(&path).unwrap();
    let tools: Vec<Tool> = serde_json::from_str(&text).unwrap();
    let schemas = ToolSchemas::from_tools(&tools);
    ToolSet { tools, schemas }
}

fn cases() -> Vec<Value> {
    let text = std::fs::read_to_string(Path::new(DIR).join("corpus.jsonl")).unwrap();
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn str_of<'a>(case: &'a Value, key: &str) -> &'a str {
    case[key]
        .as_str()
        .unwrap_or_else(|| panic!("case {case} lacks `{key}`"))
}

/// `code` or `code@/pointer`, as the fixtures write fixes.
fn fix_codes(outcome: &Outcome) -> Vec<String> {
    outcome
        .fixes()
        .iter()
        .map(|f| {
            if f.pointer.is_empty() {
                f.kind.code().to_owned()
            } else {
                format!("{}@{}", f.kind.code(), f.pointer)
            }
        })
        .collect()
}

fn outcome_word(outcome: &Outcome) -> &'static str {
    match outcome {
        Outcome::Valid(_) => "valid",
        Outcome::Repaired { .. } => "repaired",
        Outcome::Invalid { .. } => "invalid",
        Outcome::Unchecked { .. } => "unchecked",
    }
}

fn identity(set: &ToolSet, kind: &str, tool: &str) -> Option<Identity> {
    let declared = set.tools.iter().any(|t| match t {
        Tool::Function(f) => f.name == tool,
        Tool::Custom(c) => c.name == tool,
        _ => false,
    });
    declared.then(|| match kind {
        "custom" => Identity::Custom {
            namespace: None,
            name: tool.to_owned(),
        },
        _ => Identity::Function {
            namespace: None,
            name: tool.to_owned(),
        },
    })
}

/// Runs one payload case; `Err` says what differed.
fn check_payload(case: &Value, set: &ToolSet) -> Result<(), String> {
    let kind = str_of(case, "kind");
    let input = str_of(case, "input");
    let id = identity(set, kind, str_of(case, "tool"));
    let outcome = set.schemas.repair(id.as_ref(), input);
    let expect = str_of(case, "expect");
    if outcome_word(&outcome) != expect {
        return Err(format!("expected {expect}, got {outcome:?}"));
    }
    if let Some(fixes) = case.get("fixes").and_then(Value::as_array) {
        let want: Vec<&str> = fixes.iter().filter_map(Value::as_str).collect();
        if fix_codes(&outcome) != want {
            return Err(format!(
                "fixes {:?}, expected {want:?}",
                fix_codes(&outcome)
            ));
        }
    }
    match &outcome {
        Outcome::Valid(text) | Outcome::Unchecked { text, .. } if text != input => {
            return Err("valid or unchecked output was changed".to_owned());
        }
        Outcome::Invalid { message, .. } => {
            let want = case["message_contains"].as_str().unwrap_or("");
            if !message.contains(want) {
                return Err(format!("message `{message}` lacks `{want}`"));
            }
        }
        _ => {}
    }
    if let Some(want) = case.get("output") {
        check_output(kind, outcome.text(), want)?;
    }
    Ok(())
}

fn check_output(kind: &str, text: &str, want: &Value) -> Result<(), String> {
    if kind == "arguments" {
        let got: Value = serde_json::from_str(text).map_err(|e| format!("output not JSON: {e}"))?;
        return (got == *want)
            .then_some(())
            .ok_or_else(|| format!("output {got}, expected {want}"));
    }
    (want.as_str() == Some(text))
        .then_some(())
        .ok_or_else(|| format!("output {text:?}, expected {want}"))
}

fn check_name(case: &Value, set: &ToolSet) -> Result<(), String> {
    let caps = ToolCapabilities::default();
    let plan = plan(&set.tools, None, &caps).map_err(|e| e.to_string())?;
    let got = resolve_provider_name(&plan.names, str_of(case, "input"));
    let ok = match (&got, str_of(case, "expect")) {
        (NameMatch::Exact, "exact") | (NameMatch::NoConfidentMatch, "no_match") => true,
        (NameMatch::Mapped { name, reason }, "mapped") => {
            Some(name.as_str()) == case["mapped_to"].as_str()
                && case["reason"].as_str().is_none_or(|r| r == reason.code())
        }
        _ => false,
    };
    ok.then_some(()).ok_or_else(|| format!("got {got:?}"))
}

#[test]
fn every_corpus_case_gets_its_expected_outcome() {
    let cases = cases();
    let mut sets: HashMap<String, ToolSet> = HashMap::new();
    let mut failures = Vec::new();
    let mut counts: HashMap<String, usize> = HashMap::new();
    for case in &cases {
        let set_name = str_of(case, "tools").to_owned();
        let set = sets
            .entry(set_name.clone())
            .or_insert_with(|| tool_set(&set_name));
        let kind = str_of(case, "kind");
        *counts.entry(kind.to_owned()).or_default() += 1;
        let result = match kind {
            "name" => check_name(case, set),
            _ => check_payload(case, set),
        };
        if let Err(why) = result {
            failures.push(format!("{}: {why}", str_of(case, "id")));
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(cases.len() >= 50, "the corpus has {} cases", cases.len());
    for kind in ["arguments", "name", "custom"] {
        assert!(
            counts.get(kind).copied().unwrap_or(0) >= 10,
            "few `{kind}` cases"
        );
    }
}

#[test]
fn repaired_outcomes_pass_their_check_when_checked_again() {
    let mut sets: HashMap<String, ToolSet> = HashMap::new();
    for case in cases().iter().filter(|c| c["kind"] != "name") {
        let set_name = str_of(case, "tools").to_owned();
        let set = sets
            .entry(set_name.clone())
            .or_insert_with(|| tool_set(&set_name));
        let id = identity(set, str_of(case, "kind"), str_of(case, "tool"));
        let first = set.schemas.repair(id.as_ref(), str_of(case, "input"));
        if let Outcome::Repaired { text, .. } = &first {
            let again = set.schemas.repair(id.as_ref(), text);
            assert!(
                matches!(again, Outcome::Valid(_)),
                "{}: {again:?}",
                case["id"]
            );
        }
    }
}
