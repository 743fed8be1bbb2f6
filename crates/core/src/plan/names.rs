//! Provider-safe tool names and the identity map in both directions.
//!
//! Allocation is deterministic: tools whose declared name is already valid keep it (two such
//! tools claiming one name is the client's error); every other tool (namespaced, built-in types,
//! names with characters the provider rejects, names too long) gets its sanitised name, made
//! unique with `_2`, `_3`, … within the length limit.

// foldhash (hashbrown's default) rather than SipHash: these maps hold a request's few tool
// names, looked up on every request and every restored call.
use hashbrown::HashMap;

use super::{Identity, ToolCapabilities};
use crate::Error;

/// Provider name ↔ identity.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NameMap {
    to_identity: HashMap<String, Identity>,
    to_provider: HashMap<Identity, String>,
}

impl NameMap {
    /// Allocates names for `(request path, identity)` pairs in declaration order.
    pub fn allocate(
        items: impl Iterator<Item = (String, Identity)>,
        caps: &ToolCapabilities,
    ) -> Result<Self, Error> {
        let items: Vec<(String, Identity)> = items.collect();
        let mut map = Self {
            to_identity: HashMap::with_capacity(items.len()),
            to_provider: HashMap::with_capacity(items.len()),
        };
        let mut seen: HashMap<&Identity, &str> = HashMap::with_capacity(items.len());
        for (param, identity) in &items {
            if let Some(first) = seen.insert(identity, param) {
                return Err(Error::DuplicateTool {
                    param: param.clone(),
                    message: format!(
                        "`{}` is declared twice (first at `{first}`)",
                        identity.declared_name()
                    ),
                });
            }
        }
        let keeps_name = |id: &Identity| match id {
            Identity::Function {
                namespace: None,
                name,
            }
            | Identity::Custom {
                namespace: None,
                name,
            } => is_safe(name, caps),
            _ => false,
        };
        for (param, identity) in items.iter().filter(|(_, id)| keeps_name(id)) {
            let name = identity.declared_name().to_owned();
            if let Some(other) = map.to_identity.get(&name) {
                return Err(Error::ToolNameConflict {
                    param: param.clone(),
                    message: format!(
                        "`{name}` names two different tools (a {} and a {})",
                        kind_word(other),
                        kind_word(identity)
                    ),
                });
            }
            map.insert(name, identity.clone());
        }
        for (_, identity) in items.iter().filter(|(_, id)| !keeps_name(id)) {
            let base = sanitize(&identity.desired_name(), caps);
            let name = map.unique(&base, caps.name_max_len);
            map.insert(name, identity.clone());
        }
        Ok(map)
    }

    fn insert(&mut self, name: String, identity: Identity) {
        self.to_provider.insert(identity.clone(), name.clone());
        self.to_identity.insert(name, identity);
    }

    fn unique(&self, base: &str, max_len: usize) -> String {
        if !self.to_identity.contains_key(base) {
            return base.to_owned();
        }
        for n in 2.. {
            let suffix = format!("_{n}");
            let keep = base.floor_char_boundary(max_len.saturating_sub(suffix.len()));
            let candidate = format!("{}{suffix}", &base[..keep]);
            if !self.to_identity.contains_key(&candidate) {
                return candidate;
            }
        }
        base.to_owned()
    }

    /// The provider name of an identity.
    pub fn provider_name(&self, identity: &Identity) -> Option<&str> {
        self.to_provider.get(identity).map(String::as_str)
    }

    /// The identity behind a provider name.
    pub fn identity(&self, provider_name: &str) -> Option<&Identity> {
        self.to_identity.get(provider_name)
    }

    /// Every provider name, in no particular order.
    pub fn provider_names(&self) -> impl Iterator<Item = &str> {
        self.to_identity.keys().map(String::as_str)
    }

    pub fn is_empty(&self) -> bool {
        self.to_identity.is_empty()
    }
}

fn kind_word(identity: &Identity) -> &'static str {
    match identity {
        Identity::Function { .. } => "function",
        Identity::Custom { .. } => "custom tool",
        Identity::LocalShell => "local_shell tool",
        Identity::Shell => "shell tool",
        Identity::ApplyPatch => "apply_patch tool",
        Identity::ToolSearch => "tool_search tool",
        Identity::CallFound => "call_found_tool function",
        Identity::Gateway { .. } => "gateway tool",
    }
}

/// Whether `sanitize` keeps `name` as it is: not empty, within the limit, every character in
/// the provider's charset.
fn is_safe(name: &str, caps: &ToolCapabilities) -> bool {
    !name.is_empty()
        && name.len() <= caps.name_max_len.max(1)
        && name.chars().all(|c| allowed(c, caps))
}

fn allowed(c: char, caps: &ToolCapabilities) -> bool {
    c.is_ascii_alphanumeric() || caps.name_punctuation.contains(c)
}

/// A name in the provider's charset and length: other characters become `_`, and the name is
/// cut to the limit.
pub fn sanitize(name: &str, caps: &ToolCapabilities) -> String {
    let mut out = String::with_capacity(name.len());
    out.extend(name.chars().map(|c| if allowed(c, caps) { c } else { '_' }));
    if out.is_empty() {
        out.push_str("tool");
    }
    // Configured punctuation may be non-ASCII: cut at a character boundary.
    out.truncate(out.floor_char_boundary(caps.name_max_len.max(1)));
    out
}
