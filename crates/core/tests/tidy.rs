//! Tidy checks of the repository itself, inside `cargo test` (rust-analyzer's tidy test is the
//! model): ARCHITECTURE.md names only paths that exist and code names that exist where it says,
//! its import tables are the code's, and every module opens with a `//!` header. The tests live
//! in `toolbridge-core` only because it builds fastest; they read the whole workspace, found
//! from this crate's `CARGO_MANIFEST_DIR`.
//!
//! # Which spans of ARCHITECTURE.md are path claims
//!
//! A backticked span is a path claim when it has no whitespace, does not start with `/` (a
//! route such as `/v1/responses`) or `..` (outside the repository, such as `../shared`), holds
//! none of `{ } : * ? < > = ( ) , ;` (routes, Rust paths, code), and either contains a `/` or
//! ends in `.rs`, `.md` or `.toml`. A claim resolves, first rule that applies:
//!
//! 1. from the repository root, when its first segment is an entry of the root (`crates/…`,
//!    `docs/…`, `scripts/…`, `deploy/`, `.ci/run`, `README.md`);
//! 2. from `crates/`, when its first segment is a crate folder and its second is `src`, `tests`,
//!    `benches` or `Cargo.toml` (`gateway/tests/binary.rs`, `core/src/assemble/tests.rs`);
//! 3. inside a crate's section of the code map (from its `### \`crates/NAME\`` heading to the next
//!    heading), from that crate: from the crate folder when it starts with `tests/`, `benches/`
//!    or `examples/`, else from the crate's `src/` (`plan/`, `responses/tool_loop`);
//! 4. elsewhere, as rule 3 against any crate: some crate has it (`ops/spans`, `benches/…`);
//! 5. failing those, from the last folder claim (ending in `/`) earlier on the same line that
//!    exists: `http/responses/emit/` then `sse.rs`, `detach.rs`.
//!
//! A claim exists when the path is a file or a folder, or, for a module path without an
//! ending, when `PATH.rs` exists; a claim ending in `/` must be a folder.
//!
//! # Code names and import tables
//!
//! Which backticked spans name code, and where each must be declared: `tidy/names.rs`. What an
//! import table says and how the code's imports are read: `tidy/imports.rs`.
//!
//! # Module headers
//!
//! Every `.rs` file under `crates/*/src` starts (after blank lines) with a `//!` line, test
//! modules and binaries included; the files in [`NO_HEADER_YET`] are the only exceptions.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code fails loudly

// The test's own modules, in `tests/tidy/` so that cargo does not take them for test targets.
#[path = "tidy/imports.rs"]
mod imports;
#[path = "tidy/names.rs"]
mod names;
#[path = "tidy/source.rs"]
mod source;

use std::fs;
use std::path::{Path, PathBuf};

use source::rust_files;

/// Files without a `//!` header that this change could not edit (another change owns them);
/// an entry that gets a header, or goes away, must leave the list.
const NO_HEADER_YET: &[&str] = &[];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The crate folders under `crates/`.
fn crates(root: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(root.join("crates"))
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Whether a backticked span is a path claim (see the module doc).
fn is_claim(span: &str) -> bool {
    if span.is_empty()
        || span.chars().any(char::is_whitespace)
        || span.starts_with('/')
        || span.starts_with("..")
        || span.contains(['{', '}', ':', '*', '?', '<', '>', '=', '(', ')', ',', ';'])
    {
        return false;
    }
    span.contains('/') || [".rs", ".md", ".toml"].iter().any(|e| span.ends_with(e))
}

/// Whether `path` exists as the claim says: a folder for a trailing `/`, else a file, a
/// folder or a module (`PATH.rs`).
fn exists(path: &Path, claim: &str) -> bool {
    if claim.ends_with('/') {
        return path.is_dir();
    }
    let mut module = path.as_os_str().to_owned();
    module.push(".rs");
    path.exists() || Path::new(&module).is_file()
}

/// Where a claim may live inside `krate`, by rule 3.
fn in_crate(root: &Path, krate: &str, claim: &str) -> PathBuf {
    let dir = root.join("crates").join(krate);
    if ["tests/", "benches/", "examples/"]
        .iter()
        .any(|p| claim.starts_with(p))
    {
        dir.join(claim)
    } else {
        dir.join("src").join(claim)
    }
}

/// The path claims of `doc` that do not exist under `root`, as `line N: \`claim\``.
fn missing_paths(root: &Path, doc: &str) -> Vec<String> {
    let crates = crates(root);
    let mut section: Option<String> = None;
    let mut missing = Vec::new();
    for (n, line) in doc.lines().enumerate() {
        if line.starts_with('#') {
            section = line
                .strip_prefix("### `crates/")
                .and_then(|rest| rest.split('`').next())
                .map(str::to_owned);
        }
        // The last folder claim of this line that exists, for rule 5.
        let mut folder: Option<PathBuf> = None;
        for (i, span) in line.split('`').enumerate() {
            if i % 2 == 0 || !is_claim(span) {
                continue;
            }
            let claim = span.trim_start_matches("./");
            let mut segments = claim.split('/');
            let first = segments.next().unwrap_or_default();
            let second = segments.next().unwrap_or_default();
            let candidates: Vec<PathBuf> = if root.join(first).exists() {
                vec![root.join(claim)]
            } else if crates.iter().any(|c| c == first)
                && ["src", "tests", "benches", "Cargo.toml"].contains(&second)
            {
                vec![root.join("crates").join(claim)]
            } else if let Some(krate) = &section {
                vec![in_crate(root, krate, claim)]
            } else {
                crates.iter().map(|k| in_crate(root, k, claim)).collect()
            };
            let found = candidates
                .into_iter()
                .chain(folder.iter().map(|f| f.join(claim)))
                .find(|path| exists(path, claim));
            match found {
                Some(path) if claim.ends_with('/') => folder = Some(path),
                Some(_) => {}
                None => missing.push(format!("line {}: `{claim}`", n + 1)),
            }
        }
    }
    missing
}

#[test]
fn architecture_names_only_paths_that_exist() {
    let root = root();
    let doc = fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let missing = missing_paths(&root, &doc);
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md names paths that do not exist (rules in crates/core/tests/tidy.rs):\n{}",
        missing.join("\n")
    );
}

#[test]
fn the_path_check_catches_a_wrong_path_by_each_rule() {
    let root = root();
    let doc = "\
Root `crates/core/src/lib.rs`, `crates/core/src/nope.rs`, `docs/nope.md`.
Crate `core/src/assemble/`, `core/src/nope/`.
### `crates/core` (toolbridge-core)
Section `assemble/`, `repair/`, `nope/`, `tests/tidy.rs`, `tests/nope.rs`.
Not claims: `/v1/responses`, `../shared/x.rs`, `plan::plan`, `a b/c`.
## Elsewhere
Any crate `responses/`, `nope/again`.
Same line `plan/` then `context.rs`, `nope.rs`;
not across lines: `context.rs`.
";
    assert_eq!(
        missing_paths(&root, doc),
        [
            "line 1: `crates/core/src/nope.rs`",
            "line 1: `docs/nope.md`",
            "line 2: `core/src/nope/`",
            "line 4: `nope/`",
            "line 4: `tests/nope.rs`",
            "line 7: `nope/again`",
            "line 8: `nope.rs`",
            "line 9: `context.rs`",
        ]
    );
}

#[test]
fn every_module_opens_with_a_module_doc() {
    let root = root();
    let mut files = Vec::new();
    for krate in crates(&root) {
        let src = root.join("crates").join(&krate).join("src");
        if src.is_dir() {
            rust_files(&src, &mut files);
        }
    }
    files.sort();
    assert!(files.len() > 50, "found only {} files", files.len());
    let mut bad = Vec::new();
    for file in &files {
        let relative = file
            .strip_prefix(&root)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        let text = fs::read_to_string(file).unwrap();
        let has_header = text
            .lines()
            .find(|l| !l.trim().is_empty())
            .is_some_and(|l| l.starts_with("//!"));
        let exempt = NO_HEADER_YET.contains(&relative.as_str());
        match (has_header, exempt) {
            (false, false) => bad.push(format!("{relative}: no `//!` module doc")),
            (true, true) => bad.push(format!(
                "{relative}: has a header now; remove it from NO_HEADER_YET"
            )),
            _ => {}
        }
    }
    for exempt in NO_HEADER_YET {
        if !root.join(exempt).is_file() {
            bad.push(format!("{exempt}: gone; remove it from NO_HEADER_YET"));
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn architecture_names_only_code_that_exists() {
    let root = root();
    let doc = fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let missing = names::missing_names(&names::Workspace::read(&root), &doc);
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md names code that is not where it says (rules in \
         crates/core/tests/tidy/names.rs):\n{}",
        missing.join("\n")
    );
}

#[test]
fn the_name_check_catches_a_wrong_name_by_each_rule() {
    let root = root();
    let doc = "\
Types `ToolPlan`, `ToolPlann`, `Dialect::build`, `Dialect::buildd`, `UpstreamEvent::WebSearch`.
More `UpstreamEvent::WebSerch`, `ResponseStore::health`, `Outgoing::append_echoes()`.
Crates `toolbridge_core::request::normalize`, `toolbridge_core::request::normalise`.
Foreign `serde_json::Value`, `std::sync::Arc`. Not claims: `tool_choice`, `BUG`, `a b::c`.
### `crates/core` (toolbridge-core)
Section `plan::plan`, `plan::plann`, `repair::cache`, `wire::lru::Lru`, `wire::lru::Lruu`.
Section `plan::ToolPlan::passes_tools_as_declared`, `plan::ToolPlan::passes`, `stream::ResponsesDecoder`.
## Elsewhere
Any crate `stream::ResponsesDecoder`, `request::build`, `stream::ResponsesDecoderr`, `nope::build`.
";
    assert_eq!(
        names::missing_names(&names::Workspace::read(&root), doc),
        [
            "line 1: `ToolPlann`",
            "line 1: `Dialect::buildd`",
            "line 2: `UpstreamEvent::WebSerch`",
            "line 3: `toolbridge_core::request::normalise`",
            "line 6: `plan::plann`",
            "line 6: `wire::lru::Lruu`",
            "line 7: `plan::ToolPlan::passes`",
            "line 7: `stream::ResponsesDecoder`",
            "line 9: `stream::ResponsesDecoderr`",
            "line 9: `nope::build`",
        ]
    );
}

#[test]
fn architecture_import_tables_are_the_code_s() {
    let root = root();
    let doc = fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let tables = imports::tables(&doc);
    assert!(!tables.is_empty(), "ARCHITECTURE.md has no import table");
    let problems: Vec<String> = tables
        .iter()
        .flat_map(|t| imports::problems(&root, t))
        .collect();
    assert!(
        problems.is_empty(),
        "ARCHITECTURE.md's import tables are not the code's (rules in \
         crates/core/tests/tidy/imports.rs):\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_import_check_catches_a_wrong_table() {
    let root = root();
    // The real edges of core's `request` folder, misstated: a missing member, an import
    // that is not there, an import not listed, and layers that put one upside down.
    let doc = "\
```text
imports in crates/core/src/request
layers: turns | content | metadata parameters validate
content ->
metadata -> turns
parameters ->
turns -> content
```
";
    let tables = imports::tables(doc);
    let problems = imports::problems(&root, &tables[0]);
    assert!(
        problems
            .iter()
            .any(|p| p.contains("member `validate` has no line")),
        "{problems:?}"
    );
    assert!(
        problems
            .iter()
            .any(|p| p.contains("says `metadata` imports `turns`; it does not")),
        "{problems:?}"
    );
    let code = imports::imports(&root, "crates/core/src/request").unwrap();
    assert!(code.members.contains("turns") && code.members.contains("content"));
}
