//! Tool names: a name the model called that nobody declared, matched to the one declared tool it
//! must have meant.
//!
//! The steps run in order and the first that finds anything decides: exact; the same name in
//! another case or with other separators (`ExecCommand`, `exec-command`); the name behind a
//! prefix models add (`functions.exec_command`, `default_api:exec_command`, a namespace
//! written with a dot where the provider saw `ns__name`); the bare name of a namespace member
//! (`close_agent` for `multi_agent_v1__close_agent`); a known alias ([`ALIASES`], data).
//! Only a unique match maps: two declared tools that fit one step is no match, never a guess.

use crate::plan::NameMap;

/// Why a called name was mapped to a declared one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MatchReason {
    /// The same name in another case or with other separators.
    CaseOrSeparator,
    /// The name behind a prefix (`functions.`, `default_api:`, a namespace).
    PrefixStripped,
    /// The bare name of a namespace member (`close_agent` for `multi_agent_v1__close_agent`).
    NamespaceMember,
    /// A known alias of a declared tool (`bash` for a shell tool).
    Alias,
}

impl MatchReason {
    /// The stable snake_case code of the reason.
    pub fn code(self) -> &'static str {
        match self {
            Self::CaseOrSeparator => "case_or_separator",
            Self::PrefixStripped => "prefix_stripped",
            Self::NamespaceMember => "namespace_member",
            Self::Alias => "alias",
        }
    }
}

/// What a called name resolves to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NameMatch {
    /// A declared name, as called.
    Exact,
    /// The one declared name the call stands for.
    Mapped { name: String, reason: MatchReason },
    /// No declared tool, or more than one, fits.
    NoConfidentMatch,
}

/// A family of names models use for one kind of tool: a call to any of `aliases` maps to the one
/// declared tool named like one of `targets`. Names compare after [`fold`].
#[derive(Debug)]
pub struct AliasGroup {
    pub aliases: &'static [&'static str],
    pub targets: &'static [&'static str],
}

/// The aliases models use, as data.
pub const ALIASES: &[AliasGroup] = &[
    AliasGroup {
        aliases: &[
            "bash",
            "sh",
            "shell",
            "zsh",
            "terminal",
            "run_shell_command",
            "run_shell",
            "shell_command",
            "execute_command",
            "execute_shell",
            "run_command",
            "run_terminal_cmd",
            "run_terminal_command",
            "exec",
            "exec_command",
            "local_shell",
            "container.exec",
        ],
        targets: &["exec_command", "shell", "local_shell", "shell_command"],
    },
    AliasGroup {
        aliases: &[
            "apply_patch",
            "patch",
            "apply_diff",
            "edit_file",
            "applypatch",
        ],
        targets: &["apply_patch"],
    },
];

/// Prefixes models put before a tool name. A namespace prefix is handled apart.
const PREFIXES: &[&str] = &[
    "functions.",
    "functions:",
    "default_api.",
    "default_api:",
    "tools.",
    "tool.",
];

/// Resolves `called` against the declared (provider-side) names.
pub fn resolve_name<'a>(called: &str, declared: impl IntoIterator<Item = &'a str>) -> NameMatch {
    let declared: Vec<&str> = declared.into_iter().collect();
    if declared.contains(&called) {
        return NameMatch::Exact;
    }
    let called = called.trim();
    if called.is_empty() {
        return NameMatch::NoConfidentMatch;
    }
    let steps = [
        (
            MatchReason::CaseOrSeparator,
            folded_matches(called, &declared),
        ),
        (
            MatchReason::PrefixStripped,
            prefixed_matches(called, &declared),
        ),
        (
            MatchReason::NamespaceMember,
            member_matches(called, &declared),
        ),
        (MatchReason::Alias, alias_matches(called, &declared)),
    ];
    for (reason, found) in steps {
        match found.as_slice() {
            [] => continue,
            [one] => {
                return NameMatch::Mapped {
                    name: (*one).to_owned(),
                    reason,
                };
            }
            _ => return NameMatch::NoConfidentMatch,
        }
    }
    NameMatch::NoConfidentMatch
}

/// [`resolve_name`] against the provider names of a plan.
pub fn resolve_provider_name(names: &NameMap, called: &str) -> NameMatch {
    resolve_name(called, names.provider_names())
}

/// A name without case or separators: `Exec-Command` and `exec_command` fold alike.
pub fn fold(name: &str) -> String {
    name.chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

fn folded_matches<'a>(called: &str, declared: &[&'a str]) -> Vec<&'a str> {
    let folded = fold(called);
    if folded.is_empty() {
        return Vec::new();
    }
    declared
        .iter()
        .copied()
        .filter(|d| fold(d) == folded)
        .collect()
}

/// The name behind a known prefix or a namespace: `functions.exec_command` → `exec_command`,
/// `multi_agent_v1.close_agent` → `multi_agent_v1__close_agent` (how the plan flattens
/// namespaces) or `close_agent`.
fn prefixed_matches<'a>(called: &str, declared: &[&'a str]) -> Vec<&'a str> {
    let stripped = strip_prefix(called);
    let mut candidates = Vec::new();
    if let Some((ns, name)) = stripped.rsplit_once(['.', ':', '/']) {
        candidates.push(format!("{ns}__{name}"));
        candidates.push(name.to_owned());
    } else if stripped != called {
        candidates.push(stripped.to_owned());
    }
    for candidate in candidates {
        let found = folded_matches(&candidate, declared);
        if !found.is_empty() {
            return found;
        }
    }
    Vec::new()
}

/// Declared `ns__name` whose `name` is the called name (after any prefix).
fn member_matches<'a>(called: &str, declared: &[&'a str]) -> Vec<&'a str> {
    let folded = fold(strip_prefix(called));
    if folded.is_empty() {
        return Vec::new();
    }
    declared
        .iter()
        .copied()
        .filter(|d| {
            d.rsplit_once("__")
                .is_some_and(|(_, member)| fold(member) == folded)
        })
        .collect()
}

fn strip_prefix(called: &str) -> &str {
    PREFIXES
        .iter()
        .find_map(|p| {
            called
                .get(..p.len())
                .filter(|head| head.eq_ignore_ascii_case(p))
                .map(|_| &called[p.len()..])
        })
        .unwrap_or(called)
}

fn alias_matches<'a>(called: &str, declared: &[&'a str]) -> Vec<&'a str> {
    let stripped = strip_prefix(called);
    let name = stripped
        .rsplit_once(['.', ':', '/'])
        .map_or(stripped, |(_, n)| n);
    let folded = [fold(called), fold(name)];
    for group in ALIASES {
        if !group.aliases.iter().any(|a| folded.contains(&fold(a))) {
            continue;
        }
        let targets: Vec<String> = group.targets.iter().map(|t| fold(t)).collect();
        let found: Vec<&str> = declared
            .iter()
            .copied()
            .filter(|d| targets.contains(&fold(d)))
            .collect();
        if !found.is_empty() {
            return found;
        }
    }
    Vec::new()
}
