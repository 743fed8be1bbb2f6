//! The import tables of ARCHITECTURE.md against the code.
//!
//! A table is a fenced block whose first line is `imports in crates/NAME/src[/FOLDER]`. Its
//! *members* are the folder's child modules (`x.rs` and `x/` are one member, `x`); the folder's
//! own root (`mod.rs`, `lib.rs`), the binaries and `#[cfg(test)]` modules are not members. The
//! block lists every member once, as `x -> y z` (the members `x` imports; `x ->` for none), and
//! one `layers: a b | c | d e` line: the members in layers, each member in exactly one.
//!
//! Member `x` *imports* member `y` when code outside `#[cfg(test)]` in a file of `x` names a
//! path that reaches `y`: from `crate::`, `super::`, `self::` or a child module of the file,
//! through `y`'s module or through a name the folder's root re-exports from `y` (`pub use
//! y::Name`). The check: the table's imports are exactly the code's, and every import goes from
//! a layer to the same layer or a later one (a circle can only lie inside a layer).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use crate::source::{File, library_files, paths, uses};

/// One table of ARCHITECTURE.md.
pub struct Table {
    /// `crates/NAME/src[/FOLDER]`.
    pub folder: String,
    pub line: usize,
    pub layers: Vec<Vec<String>>,
    pub imports: BTreeMap<String, BTreeSet<String>>,
    /// Lines of the block that are neither an import line nor the layers.
    pub unread: Vec<String>,
}

/// The import tables of `doc`.
pub fn tables(doc: &str) -> Vec<Table> {
    let mut tables = Vec::new();
    let mut lines = doc.lines().enumerate();
    while let Some((n, line)) = lines.next() {
        let Some(folder) = line.trim().strip_prefix("imports in ") else {
            continue;
        };
        let mut table = Table {
            folder: folder.trim().trim_end_matches('/').to_owned(),
            line: n + 1,
            layers: Vec::new(),
            imports: BTreeMap::new(),
            unread: Vec::new(),
        };
        for (_, line) in lines.by_ref() {
            let line = line.trim();
            if line.starts_with("```") {
                break;
            }
            if let Some(layers) = line.strip_prefix("layers:") {
                table.layers = layers
                    .split('|')
                    .map(|l| l.split_whitespace().map(str::to_owned).collect())
                    .collect();
            } else if let Some((from, to)) = line.split_once("->") {
                table.imports.insert(
                    from.trim().to_owned(),
                    to.split_whitespace().map(str::to_owned).collect(),
                );
            } else if !line.is_empty() {
                table.unread.push(line.to_owned());
            }
        }
        tables.push(table);
    }
    tables
}

/// The members of a folder and its imports, each with one place that makes it.
pub struct Imports {
    pub members: BTreeSet<String>,
    /// (from, to) → `file: path`.
    pub imports: BTreeMap<(String, String), String>,
}

/// The imports between the members of `folder` (`crates/NAME/src[/FOLDER]`), from the code.
pub fn imports(root: &Path, folder: &str) -> Option<Imports> {
    let rest = folder.strip_prefix("crates/")?;
    let (krate, rest) = rest.split_once("/src").unwrap_or((rest, ""));
    let base: Vec<String> = rest
        .split('/')
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect();
    let src = root.join("crates").join(krate).join("src");
    if !src.is_dir() {
        return None;
    }
    let files = library_files(&src);
    let modules: BTreeSet<Vec<String>> = files.iter().map(|f| f.module.clone()).collect();
    let member_of = |module: &[String]| -> Option<String> {
        (module.len() > base.len() && module.starts_with(&base)).then(|| module[base.len()].clone())
    };
    let members: BTreeSet<String> = files.iter().filter_map(|f| member_of(&f.module)).collect();
    // Names the folder's root re-exports from a member: `pub use y::Name;` → Name → y.
    let mut reexports: BTreeMap<String, String> = BTreeMap::new();
    if let Some(rootfile) = files.iter().find(|f| f.module == base) {
        for (path, name) in uses(&rootfile.code) {
            if let Some(target) = absolute(&rootfile.module, &path, &modules)
                && let Some(member) = member_of(&target)
            {
                reexports.insert(name, member);
            }
        }
    }
    let mut found = BTreeMap::new();
    for file in &files {
        let Some(from) = member_of(&file.module) else {
            continue;
        };
        for path in paths(&file.code) {
            let Some(target) = absolute(&file.module, &path, &modules) else {
                continue;
            };
            let to = member_of(&target)
                .filter(|m| members.contains(m))
                .or_else(|| {
                    (target.len() > base.len() && target[..base.len()] == base[..])
                        .then(|| reexports.get(&target[base.len()]).cloned())
                        .flatten()
                });
            if let Some(to) = to.filter(|to| *to != from) {
                found
                    .entry((from.clone(), to))
                    .or_insert_with(|| example(file, &path));
            }
        }
    }
    Some(Imports {
        members,
        imports: found,
    })
}

fn example(file: &File, path: &[String]) -> String {
    format!("{} names `{}`", file.relative, path.join("::"))
}

/// The module-absolute form of `path` named in a file of module `module`: from `crate::`,
/// `super::`/`self::`, or a child module of the file; `None` for anything else (another
/// crate, a local name, a type).
pub fn absolute(
    module: &[String],
    path: &[String],
    modules: &BTreeSet<Vec<String>>,
) -> Option<Vec<String>> {
    let first = path.first()?;
    let mut out: Vec<String>;
    let mut rest = path;
    if first == "crate" {
        out = Vec::new();
        rest = &path[1..];
    } else if first == "super" || first == "self" {
        out = module.to_vec();
        while let Some(s) = rest.first() {
            match s.as_str() {
                "super" => {
                    out.pop()?;
                }
                "self" => {}
                _ => break,
            }
            rest = &rest[1..];
        }
    } else {
        let mut child = module.to_vec();
        child.push(first.clone());
        if !modules.contains(&child) {
            return None;
        }
        out = module.to_vec();
    }
    out.extend(rest.iter().cloned());
    Some(out)
}

/// What is wrong with `table` against the code under `root`.
pub fn problems(root: &Path, table: &Table) -> Vec<String> {
    let at = format!("line {}: imports in {}", table.line, table.folder);
    let Some(code) = imports(root, &table.folder) else {
        return vec![format!("{at}: no such crate folder")];
    };
    let mut problems = Vec::new();
    for line in &table.unread {
        problems.push(format!("{at}: cannot read `{line}`"));
    }
    let listed: BTreeSet<String> = table.imports.keys().cloned().collect();
    for m in code.members.difference(&listed) {
        problems.push(format!("{at}: member `{m}` has no line (`{m} -> …`)"));
    }
    for m in listed.difference(&code.members) {
        problems.push(format!("{at}: `{m}` is not a member of the folder"));
    }
    let mut layer_of = BTreeMap::new();
    for (i, layer) in table.layers.iter().enumerate() {
        for m in layer {
            if layer_of.insert(m.clone(), i).is_some() {
                problems.push(format!("{at}: `{m}` is in two layers"));
            }
        }
    }
    for m in &code.members {
        if !layer_of.contains_key(m) {
            problems.push(format!("{at}: member `{m}` is in no layer"));
        }
    }
    let claimed: BTreeSet<(String, String)> = table
        .imports
        .iter()
        .flat_map(|(from, tos)| tos.iter().map(move |to| (from.clone(), to.clone())))
        .collect();
    for ((from, to), example) in &code.imports {
        if !claimed.contains(&(from.clone(), to.clone())) {
            problems.push(format!(
                "{at}: `{from}` imports `{to}`, which the table does not say ({example})"
            ));
        }
        if let (Some(a), Some(b)) = (layer_of.get(from), layer_of.get(to))
            && b < a
        {
            problems.push(format!(
                "{at}: `{from}` imports `{to}`, a layer before its own ({example})"
            ));
        }
    }
    for (from, to) in &claimed {
        if !code.imports.contains_key(&(from.clone(), to.clone())) {
            problems.push(format!(
                "{at}: the table says `{from}` imports `{to}`; it does not (remove it)"
            ));
        }
    }
    problems
}
