//! The preset files, embedded at build time: `presets/common.toml` (every field of a profile)
//! and one `presets/<name>.toml` per preset (its dialect, and under `[profile]` what differs).
//! The list of preset names is this module's one list of files.

use serde::Deserialize;
use toml::Table;

use super::{ProfileError, ProfilePatch};

/// Declares the preset files once: their names, in `toolbridge providers` order, and their text.
macro_rules! presets {
    ($($name:literal),* $(,)?) => {
        /// Every preset's name.
        pub(super) const NAMES: &[&str] = &[$($name),*];
        /// Every preset file's text, in the order of [`NAMES`].
        const FILES: &[&str] = &[$(include_str!(concat!("../../presets/", $name, ".toml"))),*];
    };
}

presets!(
    "generic",
    "openai",
    "deepseek",
    "glm",
    "kimi",
    "qwen",
    "minimax",
    "mimo",
    "ollama",
    "vllm",
    "anthropic",
    "gemini",
    "responses",
    "deepseek-responses",
    "qwen-responses",
    "mimo-responses",
    "minimax-responses",
    "vllm-responses",
    "ollama-responses",
);

/// The common part every preset starts from.
const COMMON: &str = include_str!("../../presets/common.toml");

/// One preset file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct PresetFile {
    /// The dialect the preset is written for, as a config's `dialect` names it.
    pub dialect: String,
    /// What differs from the common part.
    #[serde(default)]
    pub profile: ProfilePatch,
}

/// The preset file `name`, read.
pub(super) fn file(name: &str) -> Result<PresetFile, ProfileError> {
    let text = NAMES
        .iter()
        .zip(FILES)
        .find(|(n, _)| **n == name)
        .map(|(_, text)| *text)
        .ok_or_else(|| ProfileError::UnknownPreset(name.to_owned()))?;
    toml::from_str(text).map_err(|e| ProfileError::Invalid(format!("preset `{name}`: {e}")))
}

/// The common part, read.
pub(super) fn common() -> Result<Table, ProfileError> {
    toml::from_str(COMMON).map_err(|e| ProfileError::Invalid(format!("presets/common.toml: {e}")))
}

#[cfg(test)]
mod tests;
