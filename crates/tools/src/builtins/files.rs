//! The `files` tool — read, write, list, exists, delete, mkdir, stat — confined to one sandbox
//! directory, and the [`Sandbox`] handle the `pdf` tool reads through too.
//!
//! The sandbox is opened once with cap-std (`Dir::open_ambient_dir`); every operation after that
//! is relative to that directory handle, so the operating system resolves each path beneath it
//! (`openat2(RESOLVE_BENEATH)` on Linux, a checked component walk elsewhere). `..` past the root,
//! absolute paths and symlinks that lead outside are refused by that resolution itself, not by a
//! check made before the open, so there is no check-then-open race. Paths are also checked
//! lexically first ([`check_path`]) for clear error messages: no `..` at all, no absolute paths,
//! no backslashes, no NUL bytes, bounded length. Symlinks that stay inside the sandbox work.
//!
//! Without a configured sandbox every operation is refused (deny-all). Limits: reads and writes
//! of at most [`MAX_READ_BYTES`] / [`MAX_WRITE_BYTES`], listings of at most [`MAX_LIST_ENTRIES`],
//! paths of at most [`MAX_PATH_BYTES`]. The tool does not cap the sandbox's total size, and it
//! offers no rename, copy or permission changes.

use std::io;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::time::UNIX_EPOCH;

use cap_std::ambient_authority;
use cap_std::fs::{Dir, Metadata};
use serde_json::{Value, json};

use super::common::{Args, bounded, check_live, invalid, operation_schema, run_blocking};
use crate::tool::BoxFuture;
use crate::{Tool, ToolContext, ToolError, ToolOutput};

mod ops;

use ops::{delete, list, read, write};

/// The most bytes one `read` returns.
pub const MAX_READ_BYTES: usize = 1024 * 1024;
/// The most bytes one `write` writes (after decoding).
pub const MAX_WRITE_BYTES: usize = 1024 * 1024;
/// The most entries one `list` returns.
pub const MAX_LIST_ENTRIES: usize = 1000;
/// The entries `list` returns when the call does not say.
pub const DEFAULT_LIST_ENTRIES: usize = 200;
/// The longest path accepted, in bytes.
pub const MAX_PATH_BYTES: usize = 1024;
/// The longest path component accepted, in bytes.
pub const MAX_COMPONENT_BYTES: usize = 255;

const OPERATIONS: &[&str] = &["read", "write", "list", "exists", "delete", "mkdir", "stat"];

/// A directory the file tools are confined to, or none (every operation refused).
#[derive(Clone, Default)]
pub struct Sandbox {
    dir: Option<Arc<Dir>>,
}

impl std::fmt::Debug for Sandbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sandbox")
            .field("configured", &self.dir.is_some())
            .finish()
    }
}

impl Sandbox {
    /// No sandbox: every file operation is refused.
    pub fn none() -> Self {
        Self::default()
    }

    /// Opens `path` once as the sandbox root; it must be an existing directory.
    pub fn open(path: &Path) -> Result<Self, ToolError> {
        let dir = Dir::open_ambient_dir(path, ambient_authority()).map_err(|e| {
            ToolError::InvalidConfiguration(format!(
                "cannot open the sandbox directory `{}`: {e}",
                path.display()
            ))
        })?;
        Ok(Self {
            dir: Some(Arc::new(dir)),
        })
    }

    /// True when a directory is configured.
    pub fn is_configured(&self) -> bool {
        self.dir.is_some()
    }

    /// The directory handle, or the deny-all refusal.
    pub(crate) fn dir(&self) -> Result<Arc<Dir>, ToolError> {
        self.dir.clone().ok_or_else(|| {
            ToolError::Refused("no sandbox directory is configured; file access is disabled".into())
        })
    }
}

/// Checks a model-supplied path lexically and returns it relative and normalised (`.` for the
/// root). The capability handle enforces confinement either way; this gives clear errors.
pub fn check_path(path: &str) -> Result<PathBuf, ToolError> {
    if path.is_empty() {
        return Err(invalid("/path", "must not be empty"));
    }
    if path.len() > MAX_PATH_BYTES {
        return Err(ToolError::LimitExceeded(format!(
            "the path is {} bytes; the limit is {MAX_PATH_BYTES}",
            path.len()
        )));
    }
    let refuse = |why: &str| ToolError::Refused(format!("path `{}`: {why}", path.escape_debug()));
    if path.contains('\0') {
        return Err(refuse("contains a NUL byte"));
    }
    if path.contains('\\') {
        return Err(refuse(
            "contains a backslash; use `/` to separate components",
        ));
    }
    if path.starts_with('/') {
        return Err(refuse("is absolute; paths are relative to the sandbox"));
    }
    let bytes = path.as_bytes();
    if bytes.len() >= 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':' {
        return Err(refuse("starts with a drive letter"));
    }
    let mut clean = PathBuf::new();
    for component in Path::new(path).components() {
        match component {
            Component::Normal(part) => {
                if part.len() > MAX_COMPONENT_BYTES {
                    return Err(ToolError::LimitExceeded(format!(
                        "a path component is {} bytes; the limit is {MAX_COMPONENT_BYTES}",
                        part.len()
                    )));
                }
                clean.push(part);
            }
            Component::CurDir => {}
            Component::ParentDir => return Err(refuse("contains `..`")),
            Component::RootDir | Component::Prefix(_) => return Err(refuse("is absolute")),
        }
    }
    if clean.as_os_str().is_empty() {
        clean.push(".");
    }
    Ok(clean)
}

/// Maps an I/O error on `path`; escapes (cap-std reports them as permission errors) are refusals.
fn io_error(path: &Path, err: &io::Error) -> ToolError {
    let shown = path.display();
    match err.kind() {
        io::ErrorKind::NotFound => ToolError::Failed(format!("`{shown}` does not exist")),
        io::ErrorKind::AlreadyExists => ToolError::Failed(format!("`{shown}` already exists")),
        io::ErrorKind::PermissionDenied => ToolError::Refused(format!("`{shown}`: {err}")),
        _ => ToolError::Failed(format!("`{shown}`: {err}")),
    }
}

fn kind_of(meta: &Metadata) -> &'static str {
    let ft = meta.file_type();
    if ft.is_symlink() {
        "symlink"
    } else if ft.is_dir() {
        "directory"
    } else if ft.is_file() {
        "file"
    } else {
        "other"
    }
}

fn modified_secs(meta: &Metadata) -> Option<u64> {
    meta.modified()
        .ok()
        .and_then(|t| t.into_std().duration_since(UNIX_EPOCH).ok())
        .map(|d| d.as_secs())
}

/// Opens a regular file for reading through the handle, refusing anything else (a FIFO would
/// block the reader). The type is checked again on the open file, so a swap in between is seen.
pub(crate) fn open_regular(dir: &Dir, path: &Path) -> Result<(cap_std::fs::File, u64), ToolError> {
    let meta = dir.metadata(path).map_err(|e| io_error(path, &e))?;
    if !meta.is_file() {
        return Err(ToolError::Failed(format!(
            "`{}` is a {}, not a file",
            path.display(),
            kind_of(&meta)
        )));
    }
    let file = dir.open(path).map_err(|e| io_error(path, &e))?;
    let meta = file.metadata().map_err(|e| io_error(path, &e))?;
    if !meta.is_file() {
        return Err(ToolError::Failed(format!(
            "`{}` is not a file",
            path.display()
        )));
    }
    Ok((file, meta.len()))
}

/// File operations inside a sandbox directory.
#[derive(Debug, Clone, Default)]
pub struct Files {
    sandbox: Sandbox,
}

impl Files {
    /// A files tool over `sandbox` ([`Sandbox::none`] refuses everything).
    pub fn new(sandbox: Sandbox) -> Self {
        Self { sandbox }
    }

    fn run(dir: &Dir, args: &Value) -> Result<Value, ToolError> {
        let args = Args::new(args)?;
        let op = args.operation()?;
        let raw_path = match op {
            "list" => args.opt_str("path")?.unwrap_or("."),
            _ => args.str("path")?,
        };
        let path = check_path(raw_path)?;
        match op {
            "read" => read(dir, &path, &args),
            "write" => write(dir, &path, &args),
            "list" => list(dir, &path, &args),
            "exists" => match dir.symlink_metadata(&path) {
                Ok(meta) => Ok(json!({"path": raw_path, "exists": true, "type": kind_of(&meta)})),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    Ok(json!({"path": raw_path, "exists": false, "type": null}))
                }
                Err(e) => Err(io_error(&path, &e)),
            },
            "delete" => delete(dir, &path, &args),
            "mkdir" => {
                let parents = args.opt_bool("parents")?.unwrap_or(true);
                let made = if parents {
                    dir.create_dir_all(&path)
                } else {
                    dir.create_dir(&path)
                };
                made.map_err(|e| io_error(&path, &e))?;
                Ok(json!({"path": raw_path, "created": true}))
            }
            "stat" => {
                let link = dir
                    .symlink_metadata(&path)
                    .map_err(|e| io_error(&path, &e))?;
                // Following the link goes through the handle too: a link out is refused.
                let meta = if link.file_type().is_symlink() {
                    dir.metadata(&path).map_err(|e| io_error(&path, &e))?
                } else {
                    link.clone()
                };
                Ok(json!({
                    "path": raw_path,
                    "type": kind_of(&meta),
                    "symlink": link.file_type().is_symlink(),
                    "size": meta.len(),
                    "modified": modified_secs(&meta),
                    "readonly": meta.permissions().readonly(),
                }))
            }
            other => Err(invalid(
                "/operation",
                format!("unknown operation `{other}`"),
            )),
        }
    }
}

impl Tool for Files {
    fn name(&self) -> &str {
        "files"
    }

    fn description(&self) -> &str {
        "Reads, writes, lists, checks, deletes, creates directories and stats files inside the configured sandbox directory. Paths are relative to the sandbox; `..`, absolute paths and links leading outside are refused."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "operation": operation_schema(OPERATIONS, "read, write, list, exists, delete, mkdir or stat."),
                "path": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": MAX_PATH_BYTES,
                    "description": "A path relative to the sandbox, `/`-separated (`.` is the sandbox itself; list defaults to it).",
                },
                "content": {
                    "type": "string",
                    "description": "write: the data, per `encoding`. At most 1 MiB.",
                },
                "encoding": {
                    "type": "string",
                    "enum": ["utf8", "base64"],
                    "description": "read/write: utf8 (default) or base64 for binary data.",
                },
                "mode": {
                    "type": "string",
                    "enum": ["overwrite", "create", "append"],
                    "description": "write: overwrite (default), create (fail if it exists) or append.",
                },
                "parents": {
                    "type": "boolean",
                    "description": "mkdir: create missing parents (default true); write: create missing parent directories (default false).",
                },
                "recursive": {
                    "type": "boolean",
                    "description": "delete: also delete a non-empty directory's contents (default false).",
                },
                "offset": {
                    "type": "integer",
                    "minimum": 0,
                    "description": "read: the byte offset to start at (default 0).",
                },
                "max_bytes": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_READ_BYTES,
                    "description": "read: the most bytes to return (default and limit 1 MiB).",
                },
                "max_entries": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_LIST_ENTRIES,
                    "description": "list: the most entries to return (default 200, limit 1000).",
                },
            },
            "required": ["operation"],
            "additionalProperties": false,
        })
    }

    fn capabilities(&self) -> &[&str] {
        &["files", "file", "filesystem", "read", "write", "directory"]
    }

    fn execute<'a>(
        &'a self,
        args: Value,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
            check_live(ctx)?;
            let dir = self.sandbox.dir()?;
            // cap-std is synchronous: the work runs on the blocking pool under the deadline.
            let output = run_blocking(ctx, move |_stop| Self::run(&dir, &args)).await?;
            bounded(output, ctx)
        })
    }
}

#[cfg(test)]
mod tests;
