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

use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::time::UNIX_EPOCH;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use cap_std::ambient_authority;
use cap_std::fs::{Dir, Metadata, OpenOptions};
use serde_json::{Value, json};

use super::common::{Args, bounded, cap_len, check_live, invalid, operation_schema, run_blocking};
use crate::tool::BoxFuture;
use crate::{Tool, ToolContext, ToolError, ToolOutput};

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

fn read(dir: &Dir, path: &Path, args: &Args<'_>) -> Result<Value, ToolError> {
    let max = args
        .opt_int("max_bytes", 1, MAX_READ_BYTES as i64)?
        .map_or(MAX_READ_BYTES, |n| n as usize);
    let offset = args.opt_int("offset", 0, i64::MAX)?.unwrap_or(0) as u64;
    let encoding = args.opt_str("encoding")?.unwrap_or("utf8");
    let (mut file, size) = open_regular(dir, path)?;
    file.seek(SeekFrom::Start(offset))
        .map_err(|e| io_error(path, &e))?;
    let mut bytes = Vec::with_capacity(max.min(size.saturating_sub(offset) as usize));
    file.take(max as u64)
        .read_to_end(&mut bytes)
        .map_err(|e| io_error(path, &e))?;
    let end = offset.saturating_add(bytes.len() as u64);
    let content = match encoding {
        "base64" => BASE64.encode(&bytes),
        "utf8" => String::from_utf8(bytes.clone()).map_err(|_| {
            ToolError::Failed(format!(
                "`{}` is not UTF-8 text; read it with encoding base64",
                path.display()
            ))
        })?,
        other => return Err(invalid("/encoding", format!("unknown encoding `{other}`"))),
    };
    Ok(json!({
        "path": path.to_string_lossy(),
        "content": content,
        "encoding": encoding,
        "offset": offset,
        "bytes": bytes.len(),
        "size": size,
        "truncated": end < size,
    }))
}

fn write(dir: &Dir, path: &Path, args: &Args<'_>) -> Result<Value, ToolError> {
    if path == Path::new(".") {
        return Err(ToolError::Failed("cannot write to the sandbox root".into()));
    }
    let content = args.str("content")?;
    let encoding = args.opt_str("encoding")?.unwrap_or("utf8");
    let bytes = match encoding {
        "utf8" => {
            cap_len("content", content.len(), MAX_WRITE_BYTES)?;
            content.as_bytes().to_vec()
        }
        "base64" => {
            // Four characters of base64 carry three bytes: refuse before decoding a huge input.
            cap_len("content", content.len(), MAX_WRITE_BYTES / 3 * 4 + 4)?;
            let bytes = BASE64
                .decode(content.trim())
                .map_err(|e| invalid("/content", format!("is not valid base64: {e}")))?;
            cap_len("content", bytes.len(), MAX_WRITE_BYTES)?;
            bytes
        }
        other => return Err(invalid("/encoding", format!("unknown encoding `{other}`"))),
    };
    let mode = args.opt_str("mode")?.unwrap_or("overwrite");
    if args.opt_bool("parents")?.unwrap_or(false)
        && let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty())
    {
        dir.create_dir_all(parent)
            .map_err(|e| io_error(parent, &e))?;
    }
    // An existing non-file (a FIFO would block the writer, a directory cannot be written).
    match dir.metadata(path) {
        Ok(meta) if !meta.is_file() => {
            return Err(ToolError::Failed(format!(
                "`{}` is a {}, not a file",
                path.display(),
                kind_of(&meta)
            )));
        }
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(io_error(path, &e)),
    }
    let mut options = OpenOptions::new();
    options.write(true);
    match mode {
        "create" => options.create_new(true),
        "overwrite" => options.create(true).truncate(true),
        "append" => options.create(true).append(true),
        other => return Err(invalid("/mode", format!("unknown mode `{other}`"))),
    };
    let mut file = dir
        .open_with(path, &options)
        .map_err(|e| io_error(path, &e))?;
    file.write_all(&bytes).map_err(|e| io_error(path, &e))?;
    file.flush().map_err(|e| io_error(path, &e))?;
    let size = file.metadata().map(|m| m.len()).unwrap_or_default();
    Ok(json!({
        "path": path.to_string_lossy(),
        "bytes_written": bytes.len(),
        "size": size,
        "mode": mode,
    }))
}

fn list(dir: &Dir, path: &Path, args: &Args<'_>) -> Result<Value, ToolError> {
    let max = args
        .opt_int("max_entries", 1, MAX_LIST_ENTRIES as i64)?
        .map_or(DEFAULT_LIST_ENTRIES, |n| n as usize);
    let mut entries = Vec::new();
    let mut truncated = false;
    for entry in dir.read_dir(path).map_err(|e| io_error(path, &e))? {
        if entries.len() == max {
            truncated = true;
            break;
        }
        let entry = entry.map_err(|e| io_error(path, &e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let file_type = entry.file_type().map_err(|e| io_error(path, &e))?;
        let kind = if file_type.is_symlink() {
            "symlink"
        } else if file_type.is_dir() {
            "directory"
        } else if file_type.is_file() {
            "file"
        } else {
            "other"
        };
        let size = if file_type.is_file() {
            entry.metadata().ok().map(|m| m.len())
        } else {
            None
        };
        entries.push(json!({"name": name, "type": kind, "size": size}));
    }
    entries.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
    Ok(json!({
        "path": path.to_string_lossy(),
        "entries": entries,
        "truncated": truncated,
    }))
}

fn delete(dir: &Dir, path: &Path, args: &Args<'_>) -> Result<Value, ToolError> {
    if path == Path::new(".") {
        return Err(ToolError::Refused(
            "the sandbox root cannot be deleted".into(),
        ));
    }
    let recursive = args.opt_bool("recursive")?.unwrap_or(false);
    // The link itself, never its target: deleting a symlink removes only the link.
    let meta = dir.symlink_metadata(path).map_err(|e| io_error(path, &e))?;
    let kind = kind_of(&meta);
    let removed = if meta.is_dir() {
        if recursive {
            dir.remove_dir_all(path)
        } else {
            dir.remove_dir(path)
        }
    } else {
        dir.remove_file(path)
    };
    removed.map_err(|e| match e.kind() {
        io::ErrorKind::DirectoryNotEmpty => ToolError::Failed(format!(
            "`{}` is not empty; pass recursive: true to delete it with its contents",
            path.display()
        )),
        _ => io_error(path, &e),
    })?;
    Ok(json!({"path": path.to_string_lossy(), "deleted": true, "type": kind}))
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
mod tests {
    use super::*;

    #[test]
    fn lexical_checks() {
        assert_eq!(check_path("a/./b/").unwrap(), PathBuf::from("a/b"));
        assert_eq!(check_path(".").unwrap(), PathBuf::from("."));
        assert_eq!(check_path("./").unwrap(), PathBuf::from("."));
        for bad in ["../x", "a/../b", "/etc", "a\\b", "C:x", "a\0b"] {
            assert_eq!(check_path(bad).unwrap_err().code(), "refused", "{bad}");
        }
        assert_eq!(check_path("").unwrap_err().code(), "invalid_arguments");
        let long = "a/".repeat(MAX_PATH_BYTES);
        assert_eq!(check_path(&long).unwrap_err().code(), "limit_exceeded");
        let wide = "a".repeat(MAX_COMPONENT_BYTES + 1);
        assert_eq!(check_path(&wide).unwrap_err().code(), "limit_exceeded");
    }
}
