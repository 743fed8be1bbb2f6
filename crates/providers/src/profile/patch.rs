//! A profile as written, and how written profiles are laid over each other.
//!
//! A [`ProfilePatch`] is any subset of a [`Profile`]'s fields in the profile's own TOML shape:
//! a preset's `[profile]` and a user's `providers.<name>.profile` are the same type, so there is
//! no hand-written mirror of the profile to keep in step. Patches are merged table by table
//! (a nested table such as `tools`, `tools.tool_types`, `extra_body` or `finish_reasons` keeps
//! the keys a patch does not name; any other value is replaced), and only the merged whole is
//! checked, by deserialising it into a [`Profile`]: a field a profile does not have, or a value
//! of the wrong kind, is refused there with serde's message and the key's path.
//!
//! Not here: the embedded preset files (`presets`).

use serde::{Deserialize, Serialize};
use toml::{Table, Value};

use super::Profile;

/// A profile as written: any subset of [`Profile`]'s fields (all optional), in its shape.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ProfilePatch(Table);

impl ProfilePatch {
    /// Reads a patch from TOML text (a preset's or a test's).
    pub fn parse(text: &str) -> Result<Self, ProfileError> {
        toml::from_str(text).map_err(|e| ProfileError::Invalid(e.to_string()))
    }

    /// The patch as a table, in the profile's shape.
    pub fn as_table(&self) -> &Table {
        &self.0
    }
}

impl From<Table> for ProfilePatch {
    fn from(table: Table) -> Self {
        Self(table)
    }
}

/// Why a profile could not be resolved.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ProfileError {
    /// No preset file has this name.
    #[error("`{0}` is not a preset")]
    UnknownPreset(String),
    /// The merged profile is not a profile (an unknown field, a value of the wrong kind).
    #[error("{0}")]
    Invalid(String),
}

/// `base` (every field) with `layers` merged over it in order, checked as a whole.
pub(super) fn resolve(mut base: Table, layers: &[&ProfilePatch]) -> Result<Profile, ProfileError> {
    for layer in layers {
        if layer.0.contains_key("name") {
            return Err(ProfileError::Invalid(
                "`name` is the preset's own and cannot be patched".to_owned(),
            ));
        }
        merge(&mut base, &layer.0);
    }
    serde_path_to_error::deserialize(Value::Table(base)).map_err(|e| {
        let message = e.inner().message().to_owned();
        match e.path().to_string() {
            path if path == "." => ProfileError::Invalid(message),
            path => ProfileError::Invalid(format!("`{path}`: {message}")),
        }
    })
}

/// Merges `over` into `base`: tables key by key (a new key goes after the ones there), any other
/// value replaced.
fn merge(base: &mut Table, over: &Table) {
    for (key, value) in over {
        match (base.get_mut(key), value) {
            (Some(Value::Table(inner)), Value::Table(patch)) => merge(inner, patch),
            _ => {
                base.insert(key.clone(), value.clone());
            }
        }
    }
}

/// Serde for an ordered list of pairs written as a TOML table (`finish_reasons`,
/// `context_windows`): the table's order is kept.
pub(super) mod pairs {
    use std::fmt;
    use std::marker::PhantomData;

    use serde::de::{MapAccess, Visitor};
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[allow(clippy::ptr_arg)] // serde's `with` passes the field itself
    pub fn serialize<K: Serialize, V: Serialize, S: Serializer>(
        pairs: &Vec<(K, V)>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        s.collect_map(pairs.iter().map(|(k, v)| (k, v)))
    }

    pub fn deserialize<'de, K, V, D>(d: D) -> Result<Vec<(K, V)>, D::Error>
    where
        K: Deserialize<'de>,
        V: Deserialize<'de>,
        D: Deserializer<'de>,
    {
        struct Pairs<K, V>(PhantomData<(K, V)>);
        impl<'de, K: Deserialize<'de>, V: Deserialize<'de>> Visitor<'de> for Pairs<K, V> {
            type Value = Vec<(K, V)>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a table")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut out = Vec::with_capacity(map.size_hint().unwrap_or(0));
                while let Some(pair) = map.next_entry()? {
                    out.push(pair);
                }
                Ok(out)
            }
        }
        d.deserialize_map(Pairs(PhantomData))
    }
}
