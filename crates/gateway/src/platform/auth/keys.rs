//! Gateway key secrets and scopes: how a secret is made and hashed, and what a key may do.
//!
//! A secret is `tb-` and 32 random bytes in hex (256 bits). Only its SHA-256 is kept anywhere
//! (`sha256:` + hex), in the config file or the store; the secret is shown once, by
//! `toolbridge keys create`. Hashes are compared in constant time.
//!
//! Scopes are data: model globs, tool rules, token budgets, the tenant and the admin flag.
//! [`Scopes`] is how they are written (config `[[keys]]`, or JSON in the store); [`Scope`] is
//! the compiled form a request checks.

use globset::{Glob, GlobSet, GlobSetBuilder};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use toolbridge_tools::ToolError;
use toolbridge_tools::typed::{SealedToolRegistry, ToolSelection};

/// The prefix of every generated secret.
pub(crate) const SECRET_PREFIX: &str = "tb-";
/// The prefix of every stored hash.
pub(crate) const HASH_PREFIX: &str = "sha256:";
/// The most model globs or tool rules one key may carry.
pub(crate) const MAX_RULES: usize = 256;

/// A new random secret: `tb-` and 64 hex digits.
pub(crate) fn generate_secret() -> Result<String, String> {
    let mut bytes = [0u8; 32];
    aws_lc_rs::rand::fill(&mut bytes).map_err(|_| "the system random generator failed")?;
    Ok(format!("{SECRET_PREFIX}{}", hex::encode(bytes)))
}

/// A new key id: `key_` and 16 random hex digits (not secret).
pub(crate) fn generate_id() -> Result<String, String> {
    let mut bytes = [0u8; 8];
    aws_lc_rs::rand::fill(&mut bytes).map_err(|_| "the system random generator failed")?;
    Ok(format!("key_{}", hex::encode(bytes)))
}

/// `sha256:` and the lowercase hex SHA-256 of `secret`.
pub fn hash_secret(secret: &str) -> String {
    format!(
        "{HASH_PREFIX}{}",
        hex::encode(Sha256::digest(secret.as_bytes()))
    )
}

/// Checks a configured hash's form: `sha256:` and 64 hex digits.
pub(crate) fn parse_hash(text: &str) -> Result<String, String> {
    let hex_part = text
        .strip_prefix(HASH_PREFIX)
        .ok_or_else(|| format!("a key hash starts with `{HASH_PREFIX}`"))?;
    if hex_part.len() != 64 || !hex_part.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err("a key hash is `sha256:` and 64 hex digits".to_owned());
    }
    Ok(format!("{HASH_PREFIX}{}", hex_part.to_ascii_lowercase()))
}

/// Compares without an early exit on the first differing byte.
pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A key's scopes as written: in config `[[keys]]` and, as JSON, in the store. Absent lists
/// allow everything; an empty list allows nothing.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scopes {
    /// Model names or globs (`gpt-*`) the key may request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub models: Option<Vec<String>>,
    /// Tool rules: a type (`function`, `web_search`, `mcp`), or `type:name-glob`
    /// (`function:get_*`, `mcp:github`), or `*`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
    /// Tokens (input plus output) per UTC day.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub daily_tokens: Option<u64>,
    /// Tokens per UTC calendar month.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub monthly_tokens: Option<u64>,
    /// The tenant owning what the key stores and seeing what it may read; keys naming one
    /// tenant share their history. Absent: the key is its own tenant (its id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    /// Reads every tenant's stored objects (support); writes as its own tenant.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub admin: bool,
}

/// The longest tenant name.
pub(crate) const MAX_TENANT_LEN: usize = 128;

/// A compiled tool rule.
#[derive(Debug, Clone)]
struct ToolRule {
    /// `*` matches every type.
    kind: String,
    /// `None`: every name of the type.
    name: Option<globset::GlobMatcher>,
}

/// Compiled scopes, checked on every request.
#[derive(Debug, Clone, Default)]
pub struct Scope {
    models: Option<GlobSet>,
    tools: Option<Vec<ToolRule>>,
    pub daily_tokens: Option<u64>,
    pub monthly_tokens: Option<u64>,
    /// The shared tenant, if the key names one.
    pub tenant: Option<String>,
    pub admin: bool,
    /// As written, for messages and `keys list`.
    pub written: Scopes,
}

impl Scope {
    /// Everything allowed, no budget: a plain `api_keys` entry.
    pub fn unrestricted() -> Self {
        Self::default()
    }

    /// Compiles written scopes; the error names the bad entry.
    pub fn compile(written: &Scopes) -> Result<Self, String> {
        let models = match &written.models {
            None => None,
            Some(globs) => {
                if globs.len() > MAX_RULES {
                    return Err(format!("at most {MAX_RULES} model globs"));
                }
                let mut set = GlobSetBuilder::new();
                for (i, g) in globs.iter().enumerate() {
                    set.add(Glob::new(g).map_err(|e| format!("models[{i}]: {e}"))?);
                }
                Some(set.build().map_err(|e| e.to_string())?)
            }
        };
        let tools = match &written.tools {
            None => None,
            Some(rules) => {
                if rules.len() > MAX_RULES {
                    return Err(format!("at most {MAX_RULES} tool rules"));
                }
                let mut out = Vec::with_capacity(rules.len());
                for (i, rule) in rules.iter().enumerate() {
                    let (kind, name) = match rule.split_once(':') {
                        Some((kind, name)) => (kind, Some(name)),
                        None => (rule.as_str(), None),
                    };
                    if kind.is_empty() {
                        return Err(format!("tools[{i}]: `{rule}` has no tool type"));
                    }
                    let name = name
                        .map(|n| Glob::new(n).map(|g| g.compile_matcher()))
                        .transpose()
                        .map_err(|e| format!("tools[{i}]: {e}"))?;
                    out.push(ToolRule {
                        kind: kind.to_owned(),
                        name,
                    });
                }
                Some(out)
            }
        };
        if let Some(tenant) = &written.tenant
            && (tenant.is_empty()
                || tenant.len() > MAX_TENANT_LEN
                || tenant.chars().any(char::is_control))
        {
            return Err(format!(
                "tenant: must be 1 to {MAX_TENANT_LEN} printable characters"
            ));
        }
        Ok(Self {
            models,
            tools,
            daily_tokens: written.daily_tokens,
            monthly_tokens: written.monthly_tokens,
            tenant: written.tenant.clone(),
            admin: written.admin,
            written: written.clone(),
        })
    }

    /// True when the key may request `model`.
    pub fn allows_model(&self, model: &str) -> bool {
        self.models.as_ref().is_none_or(|set| set.is_match(model))
    }

    /// True when the key may expose a tool of type `kind` named `name` (`None` for tools
    /// without a name, such as `web_search`).
    pub fn allows_tool(&self, kind: &str, name: Option<&str>) -> bool {
        let Some(rules) = &self.tools else {
            return true;
        };
        rules.iter().any(|rule| {
            (rule.kind == "*" || rule.kind == kind)
                && match (&rule.name, name) {
                    (None, _) => true,
                    (Some(glob), Some(name)) => glob.is_match(name),
                    (Some(_), None) => false,
                }
        })
    }

    /// The tools of one stage this key may expose, as the typed tool source's selection:
    /// `candidates` are tool ids of `source`, each with the `(type, name)` the key's tool rules
    /// match it by (`None`: a tool no rule governs). An id `source` lacks is its
    /// `unknown_tool` error.
    pub fn tool_view<'a, O>(
        &self,
        source: &SealedToolRegistry<O>,
        candidates: impl IntoIterator<Item = (&'a str, Option<(&'a str, Option<&'a str>)>)>,
    ) -> Result<ToolSelection<O>, ToolError> {
        source.select(candidates.into_iter().filter_map(|(id, rule)| {
            rule.is_none_or(|(kind, name)| self.allows_tool(kind, name))
                .then_some(id)
        }))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A typed tool with an open object schema.
    fn open(
        registry: toolbridge_tools::typed::ModelToolRegistry<()>,
        id: &str,
    ) -> toolbridge_tools::typed::ModelToolRegistry<()> {
        let schema = toolbridge_tools::typed::define_schema(
            serde_json::json!({"type": "object"}),
            |_: &serde_json::Value| Ok(()),
        );
        registry.schema_tool(id, id, schema, |()| ())
    }

    #[test]
    fn a_secret_is_prefixed_random_and_hashes_to_a_parsable_hash() {
        let a = generate_secret().unwrap();
        let b = generate_secret().unwrap();
        assert!(a.starts_with("tb-") && a.len() == 67);
        assert_ne!(a, b);
        let hash = hash_secret(&a);
        assert_eq!(parse_hash(&hash).unwrap(), hash);
        assert_eq!(
            hash_secret("abc"),
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert!(parse_hash("md5:00").is_err());
        assert!(parse_hash("sha256:zz").is_err());
    }

    #[test]
    fn scopes_allow_models_and_tools_by_glob_and_type() {
        let scope = Scope::compile(&Scopes {
            models: Some(vec!["gpt-*".into(), "glm-4.6".into()]),
            tools: Some(vec!["function:get_*".into(), "web_search".into()]),
            ..Scopes::default()
        })
        .unwrap();
        assert!(scope.allows_model("gpt-5"));
        assert!(scope.allows_model("glm-4.6"));
        assert!(!scope.allows_model("claude-sonnet"));
        assert!(scope.allows_tool("function", Some("get_weather")));
        assert!(!scope.allows_tool("function", Some("delete_all")));
        assert!(scope.allows_tool("web_search", None));
        assert!(!scope.allows_tool("mcp", Some("github")));
        let mut registry = toolbridge_tools::typed::ModelToolRegistry::new();
        for id in ["get_a", "rm", "x", "found"] {
            registry = open(registry, id);
        }
        let source = registry.seal().unwrap();
        let view = scope
            .tool_view(
                &source,
                [
                    ("get_a", Some(("function", Some("get_a")))),
                    ("rm", Some(("function", Some("rm")))),
                    ("x", Some(("mcp", Some("x")))),
                    ("found", None),
                ],
            )
            .unwrap();
        assert_eq!(view.ids().collect::<Vec<_>>(), ["found", "get_a"]);
        assert_eq!(
            scope
                .tool_view(&source, [("nope", None)])
                .unwrap_err()
                .code(),
            "unknown_tool"
        );
        let open = Scope::unrestricted();
        assert!(open.allows_model("anything") && open.allows_tool("mcp", None));
        let none = Scope::compile(&Scopes {
            tools: Some(vec![]),
            ..Scopes::default()
        })
        .unwrap();
        assert!(!none.allows_tool("function", Some("f")));
        assert!(
            Scope::compile(&Scopes {
                tools: Some(vec![":x".into()]),
                ..Scopes::default()
            })
            .is_err()
        );
    }
}
