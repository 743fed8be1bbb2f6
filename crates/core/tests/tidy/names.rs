//! The code names of ARCHITECTURE.md against the code.
//!
//! # Which spans are name claims
//!
//! A backticked span, a trailing `()` aside, is a name claim when it is Rust identifiers joined
//! by `::` and either has two or more of them (`plan::plan`, `Dialect::build`,
//! `wire::lru::Lru`) or is one CamelCase name (`ToolPlan`: an upper-case first letter and a
//! lower-case one somewhere). A one-word lower-case span (`tool_choice`, `store`) is a word of
//! the protocols or the config, not a claim; so is anything with other characters.
//!
//! # Where a claim must resolve
//!
//! - A path whose first segment is a crate of the workspace's `[workspace.dependencies]` that
//!   is not ours (`serde_json::Value`) or `std` is not checked.
//! - `Type` and `Type::member` (the first segment CamelCase), anywhere in the workspace
//!   (`crates/*`, tests and benches included): some file declares `struct`, `enum`, `trait`,
//!   `type` or `union Type`; for a member, a file declaring or implementing `Type` (an `impl`
//!   line naming it) declares `fn member` or `const member`, or has a line starting with
//!   `member` as a variant (`Member,`, `Member(`, `Member {`) or a field (`member:`).
//! - A module path (the first segment lower-case), `m1::…::mk::item` with an optional
//!   `::member` after a CamelCase item: `toolbridge_NAME::…` from that crate's root;
//!   otherwise, inside a crate's section of the code map (from its `### \`crates/NAME\``
//!   heading to the next heading), some module of that crate whose path ends with `m1::…::mk`
//!   (`request::build` may be any dialect's `request`), else, when `m1` is a crate's folder
//!   name (`wire::lru::Lru` in the core's section), that crate from its root; outside the
//!   sections, any crate by either rule. The item is a child module, or declared in the module
//!   (`fn`, `struct`, `enum`, `trait`, `type`, `union`, `const`, `static`, `mod`,
//!   `macro_rules!`), or bound by one of its `use` statements (a re-export), or declared in a
//!   module it glob-imports; a `::member` is then checked as for `Type::member`.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

use crate::source::{code_of, library_files, rust_files, uses};

const TYPE_KINDS: &[&str] = &["struct", "enum", "trait", "type", "union"];
const ITEM_KINDS: &[&str] = &[
    "fn",
    "struct",
    "enum",
    "trait",
    "type",
    "union",
    "const",
    "static",
    "mod",
    "macro_rules",
];

/// The workspace's code, as the name check reads it.
pub struct Workspace {
    /// Crate folder → module path → code (library modules only).
    crates: BTreeMap<String, BTreeMap<Vec<String>, String>>,
    /// The code of every `.rs` file under `crates/`.
    all: Vec<String>,
    /// Dependencies that are not ours, as Rust names (`serde_json`), and `std`.
    foreign: BTreeSet<String>,
}

impl Workspace {
    pub fn read(root: &Path) -> Self {
        let mut crates = BTreeMap::new();
        let mut all_paths = Vec::new();
        for entry in fs::read_dir(root.join("crates")).unwrap() {
            let dir = entry.unwrap().path();
            if !dir.is_dir() {
                continue;
            }
            let name = dir.file_name().unwrap().to_string_lossy().into_owned();
            let src = dir.join("src");
            if src.is_dir() {
                let modules = library_files(&src)
                    .into_iter()
                    .map(|f| (f.module, f.code))
                    .collect();
                crates.insert(name, modules);
            }
            rust_files(&dir, &mut all_paths);
        }
        let all = all_paths
            .iter()
            .map(|p| code_of(&fs::read_to_string(p).unwrap()))
            .collect();
        let manifest = fs::read_to_string(root.join("Cargo.toml")).unwrap();
        let mut foreign: BTreeSet<String> = manifest
            .split("[workspace.dependencies]")
            .nth(1)
            .unwrap_or_default()
            .split("\n[")
            .next()
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(key, _)| key.trim().replace('-', "_"))
            .filter(|key| {
                !key.is_empty() && !key.starts_with('#') && !key.starts_with("toolbridge")
            })
            .collect();
        foreign.insert("std".to_owned());
        Self {
            crates,
            all,
            foreign,
        }
    }
}

/// The name claims of `doc` that do not resolve, as `line N: \`claim\``.
pub fn missing_names(ws: &Workspace, doc: &str) -> Vec<String> {
    let mut section: Option<String> = None;
    let mut missing = Vec::new();
    for (n, line) in doc.lines().enumerate() {
        if line.starts_with('#') {
            section = line
                .strip_prefix("### `crates/")
                .and_then(|rest| rest.split('`').next())
                .map(str::to_owned);
        }
        for (i, span) in line.split('`').enumerate() {
            if i % 2 == 0 {
                continue;
            }
            let Some(segments) = claim(span) else {
                continue;
            };
            if !resolves(ws, section.as_deref(), &segments) {
                missing.push(format!("line {}: `{span}`", n + 1));
            }
        }
    }
    missing
}

/// The segments of a name claim (see the module doc), `None` when `span` is not one.
pub fn claim(span: &str) -> Option<Vec<String>> {
    let name = span.strip_suffix("()").unwrap_or(span);
    let segments: Vec<String> = name.split("::").map(str::to_owned).collect();
    let ident = |s: &String| {
        !s.is_empty()
            && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !s.starts_with(|c: char| c.is_ascii_digit())
    };
    if !segments.iter().all(ident) {
        return None;
    }
    (segments.len() > 1 || camel(&segments[0])).then_some(segments)
}

fn camel(s: &str) -> bool {
    s.starts_with(|c: char| c.is_ascii_uppercase()) && s.chars().any(|c| c.is_ascii_lowercase())
}

fn resolves(ws: &Workspace, section: Option<&str>, segments: &[String]) -> bool {
    let first = segments[0].as_str();
    if ws.foreign.contains(first) && !ws.crates.contains_key(first) {
        return true;
    }
    if camel(first) {
        return segments.len() <= 2 && type_has(ws, first, segments.get(1).map(String::as_str));
    }
    if let Some(krate) = first.strip_prefix("toolbridge_") {
        return ws
            .crates
            .get(krate)
            .is_some_and(|modules| in_crate(ws, modules, &segments[1..], true));
    }
    let by_crate = || {
        ws.crates
            .get(first)
            .is_some_and(|modules| in_crate(ws, modules, &segments[1..], true))
    };
    match section.and_then(|s| ws.crates.get(s)) {
        Some(modules) => in_crate(ws, modules, segments, false) || by_crate(),
        None => {
            ws.crates
                .values()
                .any(|modules| in_crate(ws, modules, segments, false))
                || by_crate()
        }
    }
}

/// Whether `segments` (`m1::…::mk::item[::member]`) resolves in a crate's `modules`: from its
/// root when `exact`, else in any module whose path ends with `m1::…::mk`.
fn in_crate(
    ws: &Workspace,
    modules: &BTreeMap<Vec<String>, String>,
    segments: &[String],
    exact: bool,
) -> bool {
    // The item is the first CamelCase segment (then at most a member follows), else the last.
    let item_at = segments
        .iter()
        .position(|s| camel(s))
        .unwrap_or(segments.len().saturating_sub(1));
    if segments.is_empty() || segments.len() > item_at + 2 {
        return false;
    }
    let (path, item) = (&segments[..item_at], &segments[item_at]);
    let member = segments.get(item_at + 1).map(String::as_str);
    // The module part may end in modules declared inline (`mod codes { … }`) in a file.
    (0..=path.len()).rev().any(|split| {
        let (file_part, inline) = path.split_at(split);
        if !exact && file_part.is_empty() {
            return false;
        }
        modules.iter().any(|(module, code)| {
            let matches = if exact {
                module.as_slice() == file_part
            } else {
                module.ends_with(file_part)
            };
            let found = if inline.is_empty() {
                has_item(modules, module, item)
            } else {
                inline.iter().all(|m| declares(code, &["mod"], m))
                    && declares(code, ITEM_KINDS, item)
            };
            matches && found && member.is_none_or(|m| type_has(ws, item, Some(m)))
        })
    })
}

/// Whether module `module` has `item`: a child module, a declaration, a `use` binding, or a
/// declaration in a module it glob-imports.
fn has_item(modules: &BTreeMap<Vec<String>, String>, module: &[String], item: &str) -> bool {
    let mut child = module.to_vec();
    child.push(item.to_owned());
    if modules.contains_key(&child) {
        return true;
    }
    let Some(code) = modules.get(module) else {
        return false;
    };
    if declares(code, ITEM_KINDS, item) {
        return true;
    }
    let bindings = uses(code);
    if bindings.iter().any(|(_, name)| name == item) {
        return true;
    }
    bindings.iter().any(|(path, name)| {
        name == "*"
            && crate::imports::absolute(module, &path[..path.len() - 1], &modules_set(modules))
                .and_then(|target| modules.get(&target))
                .is_some_and(|code| declares(code, ITEM_KINDS, item))
    })
}

fn modules_set(modules: &BTreeMap<Vec<String>, String>) -> BTreeSet<Vec<String>> {
    modules.keys().cloned().collect()
}

/// Whether some file declares type `name` and, for a `member`, a file declaring or
/// implementing it has the member.
fn type_has(ws: &Workspace, name: &str, member: Option<&str>) -> bool {
    let declaring = ws
        .all
        .iter()
        .filter(|code| declares(code, TYPE_KINDS, name));
    let Some(member) = member else {
        return declaring.count() > 0;
    };
    let mut files = ws
        .all
        .iter()
        .filter(|code| declares(code, TYPE_KINDS, name) || implements(code, name));
    files.any(|code| {
        declares(code, &["fn", "const", "type"], member)
            || code.lines().any(|line| {
                let line = line.trim_start();
                let line = ["pub(crate) ", "pub(super) ", "pub "]
                    .iter()
                    .find_map(|p| line.strip_prefix(p))
                    .unwrap_or(line);
                line.strip_prefix(member).is_some_and(|rest| {
                    let rest = rest.trim_start();
                    rest.is_empty()
                        || rest.starts_with([',', '(', '{', ':', '=']) && !rest.starts_with("::")
                })
            })
    })
}

/// Whether `code` declares `name` as one of `kinds` (`struct Name`, `fn name`,
/// `macro_rules! name`).
pub fn declares(code: &str, kinds: &[&str], name: &str) -> bool {
    words_before(code, name).any(|before| kinds.contains(&before))
}

/// Whether `code` has an `impl` line naming `name` before its `{`.
fn implements(code: &str, name: &str) -> bool {
    code.lines().any(|line| {
        let line = line.trim_start();
        (line.starts_with("impl") || line.starts_with("unsafe impl"))
            && line
                .split('{')
                .next()
                .unwrap_or_default()
                .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .any(|w| w == name)
    })
}

/// For each whole-word occurrence of `name` in `code`, the identifier before it (skipping
/// whitespace and a `!`).
fn words_before<'a>(code: &'a str, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    code.match_indices(name).filter_map(move |(at, _)| {
        let after = code[at + name.len()..].chars().next();
        let before = code[..at].chars().next_back();
        if after.is_some_and(ident) || before.is_some_and(ident) {
            return None;
        }
        let head = code[..at].trim_end().trim_end_matches('!').trim_end();
        let start = head
            .char_indices()
            .rev()
            .find(|&(_, c)| !ident(c))
            .map_or(0, |(i, c)| i + c.len_utf8());
        Some(&head[start..])
    })
}
