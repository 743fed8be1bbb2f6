//! The `files` operations that move content — read, write, list, delete — each relative to the
//! sandbox's directory handle. Path checks, the sandbox itself and the dispatch stay in the parent.

use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::Path;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use cap_std::fs::{Dir, OpenOptions};
use serde_json::{Value, json};

use super::{
    DEFAULT_LIST_ENTRIES, MAX_LIST_ENTRIES, MAX_READ_BYTES, MAX_WRITE_BYTES, io_error, kind_of,
    open_regular,
};
use crate::ToolError;
use crate::builtins::common::{Args, cap_len, invalid};

pub(super) fn read(dir: &Dir, path: &Path, args: &Args<'_>) -> Result<Value, ToolError> {
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

pub(super) fn write(dir: &Dir, path: &Path, args: &Args<'_>) -> Result<Value, ToolError> {
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

pub(super) fn list(dir: &Dir, path: &Path, args: &Args<'_>) -> Result<Value, ToolError> {
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

pub(super) fn delete(dir: &Dir, path: &Path, args: &Args<'_>) -> Result<Value, ToolError> {
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
