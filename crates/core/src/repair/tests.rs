//! Repair in isolation: the Lark grammar subset, the matcher and its budget, and whole calls
//! checked, repaired and restored (the corpus and the properties are in `crates/core/tests/`).

use serde_json::json;

use super::lark::Grammar;
use super::matcher::{Verdict, check, line_column};
use super::*;

const PATCH_GRAMMAR: &str = "start: begin_patch hunk+ end_patch\nbegin_patch: \"*** Begin Patch\" LF\nend_patch: \"*** End Patch\" LF?\n\nhunk: add_hunk | delete_hunk | update_hunk\nadd_hunk: \"*** Add File: \" filename LF add_line+\ndelete_hunk: \"*** Delete File: \" filename LF\nupdate_hunk: \"*** Update File: \" filename LF change_move? change?\n\nfilename: /(.+)/\nadd_line: \"+\" /(.*)/ LF -> line\n\nchange_move: \"*** Move to: \" filename LF\nchange: (change_context | change_line)+ eof_line?\nchange_context: (\"@@\" | \"@@ \" /(.+)/) LF\nchange_line: (\"+\" | \"-\" | \" \") /(.*)/ LF\neof_line: \"*** End of File\" LF\n\n%import common.LF\n";

#[test]
fn the_codex_patch_grammar_compiles_and_checks() {
    let g = Grammar::compile(PATCH_GRAMMAR).unwrap();
    let ok =
        "*** Begin Patch\n*** Update File: a.rs\n@@ fn main\n-old\n+new\n context\n*** End Patch\n";
    assert_eq!(check(&g, ok), Verdict::Matches);
    let Verdict::Fails(message) = check(&g, "*** Begin Patch\n*** Frobnicate: a\n*** End Patch\n")
    else {
        panic!("expected a failure");
    };
    assert!(message.contains("line 2, column 1"), "{message}");
    assert!(message.contains("*** Add File: "), "{message}");
}

#[test]
fn alternatives_continue_on_pipe_lines_and_ranges_compile() {
    let g = Grammar::compile("start: item+\n?item: DIGIT\n    | \"a\"..\"c\"\n    | WORD\n%import common.DIGIT\n%import common.WORD\n")
        .unwrap();
    assert_eq!(check(&g, "1b2"), Verdict::Matches);
    assert!(matches!(check(&g, "1-2"), Verdict::Fails(_)));
}

#[test]
fn unsupported_grammar_features_fail_to_compile() {
    for source in [
        "start: WS\n%ignore WS\n%import common.WS\n",
        "start: /(?=a)a/\n",
        "start: undefined_rule\n",
        "rule: \"a\"\n",
        "start: \"a\" ~ 3\n",
        &format!(
            "start: {}\"a\"{}\n",
            "(".repeat(100_000),
            ")".repeat(100_000)
        ),
    ] {
        assert!(Grammar::compile(source).is_err(), "{source}");
    }
}

#[test]
fn left_recursion_is_undecided_not_rejected() {
    let g = Grammar::compile("start: start \"a\" | \"a\"\n").unwrap();
    assert!(matches!(check(&g, "aaa"), Verdict::Undecided(_)));
}

#[test]
fn line_column_counts_characters() {
    assert_eq!(line_column("ab\ncé\nx", 6), (2, 3));
    assert_eq!(line_column("", 0), (1, 1));
}

#[test]
fn outcome_diagnostics_split_syntax_and_coercions() {
    let outcome = Outcome::Repaired {
        text: "{}".to_owned(),
        fixes: vec![
            Fix::whole(FixKind::JsonSyntaxRepaired),
            Fix::at(FixKind::StringToNumber, "/n"),
        ],
    };
    let diags = outcome.diagnostics(Subject::Arguments, "t");
    let codes: Vec<&str> = diags.iter().map(|d| d.code.as_str()).collect();
    assert_eq!(codes, ["arguments_repaired", "arguments_coerced"]);
    assert!(diags[1].message.contains("string_to_number at `/n`"));
}

#[test]
fn tool_schemas_cover_namespaces_and_builtins() {
    let tools: Vec<toolbridge_wire::responses::Tool> = serde_json::from_value(json!([
        {"type": "namespace", "name": "ns", "tools": [
            {"type": "function", "name": "f", "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}}}
        ]},
        {"type": "local_shell"},
        {"type": "custom", "name": "free"}
    ]))
    .unwrap();
    let schemas = ToolSchemas::from_tools(&tools);
    let f = crate::plan::Identity::Function {
        namespace: Some("ns".to_owned()),
        name: "f".to_owned(),
    };
    let outcome = schemas.repair(Some(&f), r#"{"n": "5"}"#);
    assert_eq!(outcome.text(), r#"{"n":5}"#);
    assert!(matches!(
        schemas.get(&crate::plan::Identity::LocalShell),
        Some(ToolCheck::Arguments(_))
    ));
    let free = crate::plan::Identity::Custom {
        namespace: None,
        name: "free".to_owned(),
    };
    assert_eq!(
        schemas.repair(Some(&free), "x"),
        Outcome::Valid("x".to_owned())
    );
    assert!(schemas.diagnostics().is_empty());
}

#[test]
fn a_long_patch_matches_within_the_budget() {
    let g = Grammar::compile(PATCH_GRAMMAR).unwrap();
    let mut patch = String::from("*** Begin Patch\n*** Update File: big.txt\n@@\n");
    for i in 0..5_000 {
        patch.push_str(&format!("-old line {i}\n+new line {i}\n context {i}\n"));
    }
    patch.push_str("*** End Patch\n");
    assert_eq!(check(&g, &patch), Verdict::Matches);
}

#[test]
fn an_ambiguous_grammar_spends_its_budget_and_is_undecided() {
    // Three nested stars over the same letter: every split is a parse, quadratic per star.
    let g = Grammar::compile("start: A* A* A* \"b\"\nA: \"a\"\n").unwrap();
    let input = "a".repeat(5_000);
    assert!(matches!(check(&g, &input), Verdict::Undecided(_)));
    assert!(matches!(
        repair_custom_input(&input, &g),
        Outcome::Unchecked { .. }
    ));
}

#[test]
fn oversized_input_is_unchecked_not_rejected() {
    let g = Grammar::compile(PATCH_GRAMMAR).unwrap();
    let input = "x".repeat(MAX_REPAIR_BYTES + 1);
    assert!(matches!(
        repair_custom_input(&input, &g),
        Outcome::Unchecked { .. }
    ));
    assert!(matches!(
        repair_arguments(&input, None),
        Outcome::Invalid { .. }
    ));
}

fn codex_plan() -> (ToolSchemas, crate::plan::ToolPlan) {
    let tools: Vec<toolbridge_wire::responses::Tool> =
        serde_json::from_str(include_str!("../../tests/fixtures/repair/tools_codex.json")).unwrap();
    let plan = crate::plan::plan(&tools, None, &crate::plan::ToolCapabilities::default()).unwrap();
    (ToolSchemas::from_tools(&tools), plan)
}

fn codes(call: &RepairedCall) -> Vec<&str> {
    call.diagnostics.iter().map(|d| d.code.as_str()).collect()
}

#[test]
fn a_misnamed_call_with_broken_arguments_is_mapped_repaired_and_restored() {
    let (schemas, plan) = codex_plan();
    let got = schemas.restore_repaired(&plan.names, "bash", "{cmd: 'ls', yield_time_ms: '500',}");
    assert_eq!(
        got.call,
        crate::canonical::CallKind::Function {
            namespace: None,
            name: "exec_command".to_owned(),
            arguments: r#"{"cmd":"ls","yield_time_ms":500}"#.to_owned(),
        }
    );
    assert_eq!(
        codes(&got),
        [
            "tool_name_mapped",
            "arguments_repaired",
            "arguments_coerced"
        ]
    );
}

#[test]
fn a_degraded_patch_call_is_unwrapped_then_repaired() {
    let (schemas, plan) = codex_plan();
    let patch = "*** Begin Patch\n*** Add File: a.txt\n+hi\n";
    let arguments = serde_json::to_string(&json!({"input": format!("```\n{patch}```")})).unwrap();
    let got = schemas.restore_repaired(&plan.names, "apply_patch", &arguments);
    let crate::canonical::CallKind::Custom { input, .. } = &got.call else {
        panic!("not restored as a custom call: {:?}", got.call);
    };
    assert_eq!(input, &format!("{patch}*** End Patch\n"));
    assert_eq!(codes(&got), ["custom_input_repaired"]);
}

/// Issue 18: a good patch in a broken `{"input": …}` wrapper was taken whole as the patch, failed
/// the grammar, and was re-asked.
#[test]
fn a_degraded_patch_call_with_a_broken_wrapper_is_repaired_then_unwrapped() {
    let (schemas, plan) = codex_plan();
    let patch = "*** Begin Patch\n*** Add File: a.txt\n+hi\n*** End Patch\n";
    let good = serde_json::to_string(&json!({"input": patch})).unwrap();
    for arguments in [
        format!("{},}}", &good[..good.len() - 1]),
        format!("{{'input': '{}'}}", patch.replace('\n', "\\n")),
    ] {
        let got = schemas.restore_repaired(&plan.names, "apply_patch", &arguments);
        let crate::canonical::CallKind::Custom { input, .. } = &got.call else {
            panic!("not restored as a custom call: {:?}", got.call);
        };
        assert_eq!(input, patch, "{arguments}");
        assert_eq!(codes(&got), ["custom_input_repaired"], "{arguments}");
        assert!(got.diagnostics[0].message.contains("json_syntax_repaired"));
    }
}

#[test]
fn valid_calls_pass_untouched_and_unknown_names_stay_undeclared() {
    let (schemas, plan) = codex_plan();
    let raw = r#"{ "cmd": "ls" }"#;
    let got = schemas.restore_repaired(&plan.names, "exec_command", raw);
    assert!(got.diagnostics.is_empty());
    assert!(
        matches!(&got.call, crate::canonical::CallKind::Function { arguments, .. } if arguments == raw)
    );
    let got = schemas.restore_repaired(&plan.names, "read_file", "{");
    assert_eq!(got.name, Some(NameMatch::NoConfidentMatch));
    assert_eq!(codes(&got), ["undeclared_tool_called"]);
}

#[test]
fn uncheckable_grammars_are_reported_once_per_request() {
    let tools: Vec<toolbridge_wire::responses::Tool> = serde_json::from_value(json!([
        {"type": "custom", "name": "g", "format": {"type": "grammar", "syntax": "lark", "definition": "start: WS\n%ignore WS\n"}}
    ]))
    .unwrap();
    let diags = ToolSchemas::from_tools(&tools).diagnostics();
    assert_eq!(diags.len(), 1);
    assert_eq!(diags[0].code, "custom_input_unchecked");
}

#[test]
fn deeply_nested_arguments_are_invalid_not_a_stack_overflow() {
    for open in ["[", "{\"a\":", "\"{"] {
        let raw = open.repeat(100_000);
        assert!(
            matches!(repair_arguments(&raw, None), Outcome::Invalid { .. }),
            "{open}"
        );
    }
}

#[test]
fn a_missing_end_patch_keeps_the_last_line_byte_for_byte() {
    let g = Grammar::compile(PATCH_GRAMMAR).unwrap();
    let raw = "*** Begin Patch\n*** Add File: a.txt\n+keep trailing spaces   \n";
    let outcome = repair_custom_input(raw, &g);
    assert_eq!(outcome.text(), format!("{raw}*** End Patch\n"));
}

#[test]
fn right_recursion_on_long_input_is_undecided_not_a_stack_overflow() {
    let g = Grammar::compile("start: item\nitem: \"a\" item | \"a\"\n").unwrap();
    assert_eq!(check(&g, "aaa"), Verdict::Matches);
    assert!(matches!(
        check(&g, &"a".repeat(10_000)),
        Verdict::Undecided(_)
    ));
}
