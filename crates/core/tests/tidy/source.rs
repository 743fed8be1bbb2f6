//! Rust source read as text, just well enough for the tidy checks: comments, string and
//! character literals blanked out, `#[cfg(test)]` items removed, and the paths a file names
//! (`use` trees expanded, and every `a::b` path in the code). No parser: what this cannot read
//! (a path split by a comment, a macro building a path) the checks do not see.

use std::fs;
use std::path::{Path, PathBuf};

/// One `.rs` file of a crate's `src`.
pub struct File {
    /// From the crate's `src`, with `/` separators (`http/responses/mod.rs`).
    pub relative: String,
    /// Its module path from the crate root (`["http", "responses"]`).
    pub module: Vec<String>,
    /// Its code, blanked out by [`code_of`] and without `#[cfg(test)]` items.
    pub code: String,
}

/// Every `.rs` file under `dir`, recursively.
pub fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The library files of the crate whose `src` is `src`: every module reachable from `lib.rs`
/// outside `#[cfg(test)]` (the binaries, `main.rs` and `bin/`, are left out), sorted.
pub fn library_files(src: &Path) -> Vec<File> {
    let mut paths = Vec::new();
    rust_files(src, &mut paths);
    let mut files: Vec<File> = Vec::new();
    let mut test_modules: Vec<Vec<String>> = Vec::new();
    for path in paths {
        let relative = path
            .strip_prefix(src)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        if relative == "main.rs" || relative.starts_with("bin/") {
            continue;
        }
        let module = module_path(&relative);
        let blanked = code_of(&fs::read_to_string(&path).unwrap());
        let (code, tests) = without_test_items(&blanked);
        test_modules.extend(tests.into_iter().map(|name| {
            let mut m = module.clone();
            m.push(name);
            m
        }));
        files.push(File {
            relative,
            module,
            code,
        });
    }
    files.retain(|f| !test_modules.iter().any(|t| f.module.starts_with(t)));
    files.sort_by(|a, b| a.relative.cmp(&b.relative));
    files
}

/// The module path of a file from its crate's `src` (`a/b.rs` and `a/b/mod.rs` are `a::b`).
pub fn module_path(relative: &str) -> Vec<String> {
    let mut segments: Vec<String> = relative
        .trim_end_matches(".rs")
        .split('/')
        .map(str::to_owned)
        .collect();
    if matches!(
        segments.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        segments.pop();
    }
    segments
}

/// `text` with comments and the insides of string and character literals replaced by spaces
/// (line breaks kept), so that what is left is code.
pub fn code_of(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(chars[i]));
                    i += 1;
                }
            }
        } else if let Some(hashes) = raw_string_start(&chars, i) {
            // r"…", r#"…"#, br"…": no escapes, ends at a quote followed by as many `#`.
            let open = chars[i..].iter().position(|&c| c == '"').unwrap() + 1;
            out.extend(std::iter::repeat_n(' ', open));
            i += open;
            while i < chars.len() {
                if chars[i] == '"'
                    && chars[i + 1..].iter().take_while(|&&c| c == '#').count() >= hashes
                {
                    out.extend(std::iter::repeat_n(' ', 1 + hashes));
                    i += 1 + hashes;
                    break;
                }
                out.push(blank(chars[i]));
                i += 1;
            }
        } else if c == '"' {
            out.push(' ');
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                if i < chars.len() {
                    out.push(blank(chars[i]));
                    i += 1;
                }
            }
            out.push(' ');
            i += 1;
        } else if c == '\'' && (next == Some('\\') || chars.get(i + 2) == Some(&'\'')) {
            // A character literal ('x', '\n', '\'', '\u{1}'); a lifetime ('a) has no closing
            // quote. The character after a backslash is never the closing one.
            let from = if next == Some('\\') { i + 3 } else { i + 2 };
            let end = chars[from.min(chars.len())..]
                .iter()
                .position(|&c| c == '\'')
                .map_or(chars.len(), |p| from + p + 1);
            out.extend(std::iter::repeat_n(' ', end - i));
            i = end;
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// The number of `#` of a raw string literal starting at `i`, if one does.
fn raw_string_start(chars: &[char], i: usize) -> Option<usize> {
    if i > 0 && is_ident(chars[i - 1]) {
        return None;
    }
    let mut j = i;
    if chars.get(j) == Some(&'b') {
        j += 1;
    }
    if chars.get(j) != Some(&'r') {
        return None;
    }
    j += 1;
    let hashes = chars[j..].iter().take_while(|&&c| c == '#').count();
    (chars.get(j + hashes) == Some(&'"')).then_some(hashes)
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// `code` without its `#[cfg(test)]` items (each up to its `;` or through its `{…}` block),
/// and the names of the modules declared there as files (`#[cfg(test)] mod tests;`).
pub fn without_test_items(code: &str) -> (String, Vec<String>) {
    const ATTRIBUTE: &str = "#[cfg(test)]";
    let mut out = String::with_capacity(code.len());
    let mut modules = Vec::new();
    let mut rest = code;
    while let Some(start) = rest.find(ATTRIBUTE) {
        out.push_str(&rest[..start]);
        let item = &rest[start..];
        let bytes = item.as_bytes();
        let mut end = ATTRIBUTE.len();
        let mut depth = 0usize;
        while end < bytes.len() {
            match bytes[end] {
                b'{' => depth += 1,
                b'}' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        end += 1;
                        break;
                    }
                }
                b';' if depth == 0 => {
                    end += 1;
                    break;
                }
                _ => {}
            }
            end += 1;
        }
        let words: Vec<&str> = item[ATTRIBUTE.len()..end]
            .split(|c: char| !is_ident(c))
            .filter(|w| !w.is_empty())
            .collect();
        if item[..end].trim_end().ends_with(';')
            && let Some(at) = words.iter().position(|&w| w == "mod")
            && let Some(name) = words.get(at + 1)
        {
            modules.push((*name).to_owned());
        }
        out.extend(
            item[..end]
                .chars()
                .map(|c| if c == '\n' { '\n' } else { ' ' }),
        );
        rest = &item[end..];
    }
    out.push_str(rest);
    (out, modules)
}

/// Every path `code` names: each `use` tree expanded into its paths (`a::{b, c::d}` is `a::b`
/// and `a::c::d`; `self` inside braces is the prefix; `as` aliases dropped), and every path of
/// two or more segments elsewhere in the code (`crate::x::y`, `super::z`, `emit::sse::frame`).
pub fn paths(code: &str) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    let mut rest_of_code = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(at) = find_word(rest, "use") {
        rest_of_code.push_str(&rest[..at]);
        let after = &rest[at + 3..];
        let Some(end) = after.find(';') else {
            rest = after;
            break;
        };
        found.extend(expand_use(&after[..end]));
        rest = &after[end + 1..];
    }
    rest_of_code.push_str(rest);
    found.extend(inline_paths(&rest_of_code));
    found
}

/// The position of `word` as a whole word in `text`.
pub fn find_word(text: &str, word: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut from = 0;
    while let Some(p) = text[from..].find(word) {
        let at = from + p;
        let before = at.checked_sub(1).map(|b| bytes[b] as char);
        let after = bytes.get(at + word.len()).map(|&b| b as char);
        if !before.is_some_and(is_ident) && !after.is_some_and(is_ident) {
            return Some(at);
        }
        from = at + word.len();
    }
    None
}

/// The paths of one `use` tree (the text between `use` and `;`).
pub fn expand_use(tree: &str) -> Vec<Vec<String>> {
    use_bindings(tree)
        .into_iter()
        .map(|(path, _)| path)
        .collect()
}

/// The paths of one `use` tree, each with the name it binds (its last segment, or its `as`
/// alias; the prefix's last segment for `self`).
pub fn use_bindings(tree: &str) -> Vec<(Vec<String>, String)> {
    let tree = tree.split_whitespace().collect::<Vec<_>>().join(" ");
    let tree = tree.trim();
    let Some(open) = tree.find('{') else {
        let (path, alias) = match tree.split_once(" as ") {
            Some((path, alias)) => (segments(path), Some(alias.trim().to_owned())),
            None => (segments(tree), None),
        };
        let name = alias.unwrap_or_else(|| path.last().cloned().unwrap_or_default());
        return vec![(path, name)];
    };
    let prefix = segments(tree[..open].trim_end_matches(':'));
    let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0usize, 0);
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    let mut out = Vec::new();
    for part in parts.into_iter().map(str::trim).filter(|p| !p.is_empty()) {
        for (tail, name) in use_bindings(part) {
            let mut path = prefix.clone();
            let name = if tail == ["self"] {
                path.last().cloned().unwrap_or(name)
            } else {
                path.extend(tail);
                name
            };
            out.push((path, name));
        }
    }
    out
}

/// Every `use` statement's bindings in `code`.
pub fn uses(code: &str) -> Vec<(Vec<String>, String)> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(at) = find_word(rest, "use") {
        let after = &rest[at + 3..];
        let Some(end) = after.find(';') else { break };
        out.extend(use_bindings(&after[..end]));
        rest = &after[end + 1..];
    }
    out
}

fn segments(path: &str) -> Vec<String> {
    path.split("::")
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Every path of two or more segments in `code` (`a::b`, `a::b::C`), each taken whole.
pub fn inline_paths(code: &str) -> Vec<Vec<String>> {
    let chars: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let starts = is_ident(chars[i])
            && !chars[i].is_ascii_digit()
            && (i == 0 || !(is_ident(chars[i - 1]) || chars[i - 1] == ':'));
        if !starts {
            i += 1;
            continue;
        }
        let mut path = Vec::new();
        loop {
            let begin = i;
            while i < chars.len() && is_ident(chars[i]) {
                i += 1;
            }
            path.push(chars[begin..i].iter().collect::<String>());
            let more = chars.get(i) == Some(&':')
                && chars.get(i + 1) == Some(&':')
                && chars
                    .get(i + 2)
                    .is_some_and(|&c| is_ident(c) && !c.is_ascii_digit());
            if !more {
                break;
            }
            i += 2;
        }
        if path.len() > 1 {
            out.push(path);
        }
    }
    out
}
