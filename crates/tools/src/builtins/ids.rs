//! The `ids` tool: random UUIDs (v4), time-ordered UUIDs (v7), ULIDs, and nanoids with a
//! custom size and alphabet.
//!
//! Randomness comes from the operating system through the id crates; nothing here is seedable or
//! reproducible, and no id is remembered. Work is bounded by [`MAX_COUNT`] ids of at most
//! [`MAX_NANOID_SIZE`] characters. Nanoid alphabets are limited to printable ASCII without
//! repeats: repeats would bias the output, and the nanoid crate counts bytes, not characters.

use serde_json::{Value, json};

use super::common::{Args, bounded, check_live, invalid, operation_schema};
use crate::tool::BoxFuture;
use crate::{Tool, ToolContext, ToolError, ToolOutput};

/// The most ids one call may generate.
pub const MAX_COUNT: usize = 100;
/// The longest nanoid.
pub const MAX_NANOID_SIZE: usize = 256;
/// The default nanoid size.
pub const DEFAULT_NANOID_SIZE: usize = 21;

const OPERATIONS: &[&str] = &["uuid_v4", "uuid_v7", "ulid", "nanoid"];

/// Generates identifiers.
#[derive(Debug, Clone, Copy, Default)]
pub struct Ids;

fn alphabet(args: &Args<'_>) -> Result<Vec<char>, ToolError> {
    let Some(text) = args.opt_str("alphabet")? else {
        return Ok(nanoid::alphabet::SAFE.to_vec());
    };
    let chars: Vec<char> = text.chars().collect();
    if chars.len() < 2 {
        return Err(invalid("/alphabet", "needs at least 2 characters"));
    }
    if let Some(c) = chars.iter().find(|c| !(c.is_ascii_graphic() || **c == ' ')) {
        return Err(invalid(
            "/alphabet",
            format!("only printable ASCII characters are allowed, not {c:?}"),
        ));
    }
    for (i, c) in chars.iter().enumerate() {
        if chars[..i].contains(c) {
            return Err(invalid(
                "/alphabet",
                format!("`{c}` appears twice (repeats would bias the ids)"),
            ));
        }
    }
    Ok(chars)
}

impl Ids {
    /// Generates the ids one call asks for.
    pub fn run(args: &Value) -> Result<Value, ToolError> {
        let args = Args::new(args)?;
        let op = args.operation()?;
        let max = i64::try_from(MAX_COUNT).unwrap_or(i64::MAX);
        let count = args
            .opt_int("count", 1, max)?
            .and_then(|n| usize::try_from(n).ok())
            .unwrap_or(1);
        if op != "nanoid" {
            for field in ["size", "alphabet"] {
                if args.get(field).is_some() {
                    return Err(invalid(format!("/{field}"), "is only used by `nanoid`"));
                }
            }
        }
        let ids: Vec<String> = match op {
            "uuid_v4" => (0..count)
                .map(|_| uuid::Uuid::new_v4().hyphenated().to_string())
                .collect(),
            "uuid_v7" => (0..count)
                .map(|_| uuid::Uuid::now_v7().hyphenated().to_string())
                .collect(),
            "ulid" => (0..count)
                .map(|_| ulid::Ulid::generate().to_string())
                .collect(),
            "nanoid" => {
                let size = args
                    .opt_int(
                        "size",
                        1,
                        i64::try_from(MAX_NANOID_SIZE).unwrap_or(i64::MAX),
                    )?
                    .and_then(|n| usize::try_from(n).ok())
                    .unwrap_or(DEFAULT_NANOID_SIZE);
                let alphabet = alphabet(&args)?;
                (0..count)
                    .map(|_| nanoid::format(nanoid::rngs::default, &alphabet, size))
                    .collect()
            }
            other => {
                return Err(invalid(
                    "/operation",
                    format!("unknown operation `{other}`"),
                ));
            }
        };
        Ok(json!({"operation": op, "ids": ids}))
    }
}

impl Tool for Ids {
    fn name(&self) -> &str {
        "ids"
    }

    fn description(&self) -> &str {
        "Generates unique identifiers: uuid_v4 (random), uuid_v7 (time-ordered), ulid (time-ordered, Crockford base32), or nanoid (URL-safe by default; custom `size` and `alphabet`). Returns `count` ids (default 1, at most 100)."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "operation": operation_schema(OPERATIONS, "The kind of identifier."),
                "count": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_COUNT,
                    "description": "How many ids to generate (default 1).",
                },
                "size": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_NANOID_SIZE,
                    "description": "nanoid only: characters per id (default 21).",
                },
                "alphabet": {
                    "type": "string",
                    "minLength": 2,
                    "maxLength": 95,
                    "description": "nanoid only: the characters to draw from, printable ASCII without repeats (default A-Za-z0-9_-).",
                },
            },
            "required": ["operation"],
            "additionalProperties": false,
        })
    }

    fn capabilities(&self) -> &[&str] {
        &["id", "uuid", "ulid", "nanoid", "random"]
    }

    fn execute<'a>(
        &'a self,
        args: Value,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
            check_live(ctx)?;
            bounded(Self::run(&args)?, ctx)
        })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    fn ids(args: Value) -> Vec<String> {
        let out = Ids::run(&args).unwrap();
        out["ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_owned())
            .collect()
    }

    #[test]
    fn uuids_have_the_right_version_and_are_unique() {
        for (op, version) in [("uuid_v4", 4), ("uuid_v7", 7)] {
            let list = ids(json!({"operation": op, "count": 50}));
            assert_eq!(list.len(), 50);
            assert_eq!(list.iter().collect::<HashSet<_>>().len(), 50);
            for id in &list {
                let parsed = uuid::Uuid::parse_str(id).unwrap();
                assert_eq!(parsed.get_version_num(), version, "{id}");
                assert_eq!(id.len(), 36);
            }
        }
        // v7 ids are time-ordered: one made later never sorts before an earlier one's millisecond.
        let a = ids(json!({"operation": "uuid_v7"})).remove(0);
        std::thread::sleep(std::time::Duration::from_millis(2));
        let b = ids(json!({"operation": "uuid_v7"})).remove(0);
        assert!(a < b);
    }

    #[test]
    fn ulids_parse_and_default_to_one() {
        let list = ids(json!({"operation": "ulid"}));
        assert_eq!(list.len(), 1);
        assert_eq!(list[0].len(), 26);
        assert!(ulid::Ulid::from_string(&list[0]).is_ok());
    }

    #[test]
    fn nanoids_respect_size_and_alphabet() {
        let list = ids(json!({"operation": "nanoid", "count": 3}));
        for id in &list {
            assert_eq!(id.chars().count(), DEFAULT_NANOID_SIZE);
            assert!(
                id.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            );
        }
        let list = ids(json!({"operation": "nanoid", "size": 7, "alphabet": "abc", "count": 20}));
        for id in &list {
            assert_eq!(id.len(), 7);
            assert!(id.chars().all(|c| "abc".contains(c)));
        }
        let list = ids(json!({"operation": "nanoid", "size": MAX_NANOID_SIZE}));
        assert_eq!(list[0].len(), MAX_NANOID_SIZE);
    }

    #[test]
    fn limits_and_bad_arguments() {
        let path_of = |args: Value| match Ids::run(&args).unwrap_err() {
            ToolError::InvalidArguments { path, .. } => path,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            ids(json!({"operation": "ulid", "count": MAX_COUNT})).len(),
            MAX_COUNT
        );
        assert_eq!(
            path_of(json!({"operation": "ulid", "count": MAX_COUNT + 1})),
            "/count"
        );
        assert_eq!(path_of(json!({"operation": "ulid", "count": 0})), "/count");
        assert_eq!(
            path_of(json!({"operation": "nanoid", "size": MAX_NANOID_SIZE + 1})),
            "/size"
        );
        assert_eq!(
            path_of(json!({"operation": "nanoid", "alphabet": "a"})),
            "/alphabet"
        );
        assert_eq!(
            path_of(json!({"operation": "nanoid", "alphabet": "aba"})),
            "/alphabet"
        );
        assert_eq!(
            path_of(json!({"operation": "nanoid", "alphabet": "aé"})),
            "/alphabet"
        );
        assert_eq!(path_of(json!({"operation": "uuid_v4", "size": 3})), "/size");
        assert_eq!(path_of(json!({"operation": "snowflake"})), "/operation");
    }

    #[tokio::test]
    async fn execute_applies_the_output_limit() {
        let ctx = ToolContext::with_timeout(std::time::Duration::from_secs(5), 100);
        let err = Ids
            .execute(json!({"operation": "uuid_v4", "count": 10}), &ctx)
            .await
            .unwrap_err();
        assert_eq!(err, ToolError::OutputTooLarge { limit: 100 });
        let out = Ids
            .execute(json!({"operation": "uuid_v4"}), &ToolContext::default())
            .await
            .unwrap();
        assert_eq!(out["ids"].as_array().unwrap().len(), 1);
    }
}
