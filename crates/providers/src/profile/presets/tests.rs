//! The preset files: each parses and resolves, the name list is the file list, patches merge.

use super::*;
use crate::profile::Profile;

/// Every preset file parses, names a dialect and resolves over the common part.
#[test]
fn every_preset_file_parses_and_resolves() {
    for name in NAMES {
        let file = file(name).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(
            ["chat", "anthropic", "gemini", "responses"].contains(&file.dialect.as_str()),
            "{name}: dialect {}",
            file.dialect
        );
        let profile = Profile::resolve(name, &[]).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(profile.name, *name);
    }
    // The common part alone is a whole profile.
    let table = common().unwrap();
    assert!(super::super::patch::resolve(table, &[]).is_ok());
}

/// The list of names is the list of files: a file left out of `presets!` fails here.
#[test]
fn every_file_in_presets_is_a_preset() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/presets");
    let mut files: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter_map(|n| n.strip_suffix(".toml").map(str::to_owned))
        .filter(|n| n != "common")
        .collect();
    files.sort();
    let mut names: Vec<String> = NAMES.iter().map(|n| (*n).to_owned()).collect();
    names.sort();
    assert_eq!(files, names);
}

/// A patch is laid over the preset: tables merge key by key, `"none"` turns a native form off,
/// a list of pairs keeps its order and grows, and a field no profile has is refused.
#[test]
fn patches_merge_over_the_preset_and_unknown_fields_are_refused() {
    let patch = ProfilePatch::parse(
        r#"
temperature_range = [0.0, 0.5]
finish_reasons = { odd = "stop" }
[tools]
web_search = "none"
[tools.tool_types]
apply_patch = "native"
"#,
    )
    .unwrap();
    let glm = Profile::resolve("glm", &[&patch]).unwrap();
    assert_eq!(glm.temperature_range, [0.0, 0.5]);
    assert_eq!(glm.tools.web_search, None);
    assert!(
        glm.tools.mcp.is_some(),
        "tools the patch does not name stay"
    );
    assert!(!glm.tools.choice_named);
    let reasons: Vec<&str> = glm.finish_reasons.iter().map(|(r, _)| r.as_str()).collect();
    assert_eq!(
        reasons,
        [
            "sensitive",
            "network_error",
            "model_context_window_exceeded",
            "odd"
        ]
    );
    assert_eq!(
        glm.tools.tool_types.apply_patch,
        toolbridge_core::plan::ToolTypeDecision::Native
    );
    assert_eq!(
        glm.tools.tool_types.custom,
        toolbridge_core::plan::ToolTypeDecision::Degraded
    );

    for bad in [
        "developer_rol = true",
        "[tools]\nweb_search = \"bing\"",
        "[tools.tool_types]\ncomputer = \"native\"",
        "[tools.tool_types]\ncustom = \"gateway\"",
        "name = \"mine\"",
    ] {
        let patch = ProfilePatch::parse(bad).unwrap();
        assert!(
            matches!(
                Profile::resolve("generic", &[&patch]),
                Err(ProfileError::Invalid(_))
            ),
            "{bad} was accepted"
        );
    }
    let patch = ProfilePatch::parse("[tools.tool_types]\nshell = \"gateway\"").unwrap();
    let Err(ProfileError::Invalid(message)) = Profile::resolve("generic", &[&patch]) else {
        panic!("a gateway decision for shell was accepted");
    };
    assert!(
        message.starts_with("`tools.tool_types.shell`: "),
        "{message}"
    );
    assert_eq!(
        Profile::resolve("nope", &[]),
        Err(ProfileError::UnknownPreset("nope".to_owned()))
    );
}

/// An effort table is whole: a preset that says any effort says all eight Codex can send, and
/// in its dialect's terms (a budget for Messages and Gemini, request fields for Chat).
#[test]
fn effort_tables_cover_every_effort_in_their_dialects_terms() {
    use crate::profile::EFFORTS;
    for name in NAMES {
        let profile = Profile::resolve(name, &[]).unwrap();
        if profile.efforts.is_empty() {
            continue;
        }
        let dialect = file(name).unwrap().dialect;
        for effort in EFFORTS {
            let say = profile
                .effort(effort)
                .unwrap_or_else(|| panic!("{name}: no row for {effort}"));
            match dialect.as_str() {
                "anthropic" | "gemini" => assert!(say.budget.is_some(), "{name}: {effort}"),
                _ => assert!(!say.fields.is_empty(), "{name}: {effort}"),
            }
        }
        assert_eq!(
            profile.efforts.len(),
            EFFORTS.len(),
            "{name}: an unknown effort"
        );
    }
    // DeepSeek's top level is its own `max`, not `high`.
    let deepseek = Profile::resolve("deepseek", &[]).unwrap();
    for effort in ["xhigh", "max", "ultra"] {
        assert_eq!(
            deepseek.effort(effort).unwrap().fields["reasoning_effort"],
            "max"
        );
    }
}
