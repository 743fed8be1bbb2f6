//! The `files` tool confined to a sandbox: a table of escape attempts (all refused, none touching
//! the file outside), every operation working inside, the limits, and deny-all without a
//! sandbox.
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)]

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine as _;
use serde_json::{Value, json};
use toolbridge_tools::builtins::files::{MAX_LIST_ENTRIES, MAX_PATH_BYTES, MAX_READ_BYTES};
use toolbridge_tools::builtins::{Files, Sandbox};
use toolbridge_tools::{Tool, ToolContext, ToolError};

/// A fresh directory holding `sandbox/` and, beside it, `outside/secret.txt`.
struct Fixture {
    root: PathBuf,
}

impl Fixture {
    fn new(name: &str) -> Self {
        let root = std::env::temp_dir().join(format!(
            "toolbridge-files-{name}-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        ));
        fs::create_dir_all(root.join("sandbox/sub")).unwrap();
        fs::create_dir_all(root.join("outside")).unwrap();
        fs::write(root.join("outside/secret.txt"), "top secret").unwrap();
        fs::write(root.join("sandbox/hello.txt"), "hello").unwrap();
        Self { root }
    }

    fn sandbox(&self) -> PathBuf {
        self.root.join("sandbox")
    }

    fn secret(&self) -> PathBuf {
        self.root.join("outside/secret.txt")
    }

    fn tool(&self) -> Files {
        Files::new(Sandbox::open(&self.sandbox()).unwrap())
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.root);
    }
}

fn ctx() -> ToolContext {
    ToolContext::with_timeout(Duration::from_secs(10), 8 * 1024 * 1024)
}

async fn call(tool: &Files, args: Value) -> Result<Value, ToolError> {
    tool.execute(args, &ctx()).await
}

/// Plants the symlinks the escape table uses.
fn plant_links(fx: &Fixture) {
    let sb = fx.sandbox();
    symlink(fx.secret(), sb.join("abs_link")).unwrap();
    symlink("../outside/secret.txt", sb.join("rel_link")).unwrap();
    symlink("../../outside/secret.txt", sb.join("sub/deep_link")).unwrap();
    symlink(fx.root.join("outside"), sb.join("dir_link")).unwrap();
    symlink("../outside", sb.join("rel_dir_link")).unwrap();
    symlink("/", sb.join("root_link")).unwrap();
    symlink("/etc/passwd", sb.join("passwd_link")).unwrap();
    // A chain: inside → inside → outside.
    symlink("rel_link", sb.join("chain_link")).unwrap();
    symlink("sub/../../outside/secret.txt", sb.join("dotdot_link")).unwrap();
    // Dangling links whose targets would be created outside.
    symlink(fx.root.join("outside/created.txt"), sb.join("dangling_abs")).unwrap();
    symlink("../outside/created.txt", sb.join("dangling_rel")).unwrap();
}

/// Escape attempts: operation, path, and the error code expected.
fn escapes() -> Vec<(&'static str, String, &'static str)> {
    let long = "a/".repeat(MAX_PATH_BYTES / 2 + 1);
    let wide = "b".repeat(300);
    vec![
        ("read", "../outside/secret.txt".into(), "refused"),
        ("read", "../x".into(), "refused"),
        ("read", "a/../../x".into(), "refused"),
        ("read", "sub/../../outside/secret.txt".into(), "refused"),
        ("read", "/etc/passwd".into(), "refused"),
        ("read", "//etc/passwd".into(), "refused"),
        ("read", "\\..\\outside\\secret.txt".into(), "refused"),
        ("read", "..\\outside\\secret.txt".into(), "refused"),
        ("read", "sub\\..\\..\\x".into(), "refused"),
        ("read", "C:\\Windows\\win.ini".into(), "refused"),
        ("read", "hello.txt\0.png".into(), "refused"),
        ("read", "\0".into(), "refused"),
        ("read", "abs_link".into(), "refused"),
        ("read", "rel_link".into(), "refused"),
        ("read", "sub/deep_link".into(), "refused"),
        ("read", "dir_link/secret.txt".into(), "refused"),
        ("read", "rel_dir_link/secret.txt".into(), "refused"),
        ("read", "root_link/etc/passwd".into(), "refused"),
        ("read", "passwd_link".into(), "refused"),
        ("read", "chain_link".into(), "refused"),
        ("read", "dotdot_link".into(), "refused"),
        ("stat", "abs_link".into(), "refused"),
        ("stat", "dir_link".into(), "refused"),
        ("list", "dir_link".into(), "refused"),
        ("list", "rel_dir_link".into(), "refused"),
        ("list", "..".into(), "refused"),
        ("list", "/".into(), "refused"),
        ("write", "abs_link".into(), "refused"),
        ("write", "rel_link".into(), "refused"),
        ("write", "dir_link/new.txt".into(), "refused"),
        ("write", "dangling_abs".into(), "refused"),
        ("write", "dangling_rel".into(), "refused"),
        ("write", "../outside/new.txt".into(), "refused"),
        ("write", "/tmp/new.txt".into(), "refused"),
        ("mkdir", "dir_link/newdir".into(), "refused"),
        ("mkdir", "../outside/newdir".into(), "refused"),
        ("delete", "dir_link/secret.txt".into(), "refused"),
        ("delete", "../outside/secret.txt".into(), "refused"),
        ("delete", ".".into(), "refused"),
        ("exists", "dir_link/secret.txt".into(), "refused"),
        ("exists", "../outside/secret.txt".into(), "refused"),
        ("read", long, "limit_exceeded"),
        ("read", wide, "limit_exceeded"),
    ]
}

#[tokio::test]
async fn every_escape_is_refused() {
    let fx = Fixture::new("escapes");
    plant_links(&fx);
    let tool = fx.tool();
    let table = escapes();
    assert!(table.len() >= 30);
    for (op, path, code) in &table {
        let args = match *op {
            "write" => json!({"operation": op, "path": path, "content": "pwned"}),
            _ => json!({"operation": op, "path": path}),
        };
        let result = call(&tool, args).await;
        match result {
            Err(err) => assert_eq!(err.code(), *code, "{op} {path:?}: {err}"),
            Ok(out) => panic!("{op} {path:?} was allowed: {out}"),
        }
    }
    // Nothing outside was read, written, created or deleted.
    assert_eq!(fs::read_to_string(fx.secret()).unwrap(), "top secret");
    let outside: Vec<_> = fs::read_dir(fx.root.join("outside"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(outside, vec!["secret.txt"]);
}

#[tokio::test]
async fn every_operation_works_inside() {
    let fx = Fixture::new("ops");
    let tool = fx.tool();

    // write, then read back; create refuses to clobber; append appends.
    let out = call(
        &tool,
        json!({"operation": "write", "path": "notes/a.txt", "content": "one", "parents": true}),
    )
    .await
    .unwrap();
    assert_eq!(out["bytes_written"], 3);
    let err = call(
        &tool,
        json!({"operation": "write", "path": "notes/a.txt", "content": "x", "mode": "create"}),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(&err, ToolError::Failed(m) if m.contains("already exists")),
        "{err:?}"
    );
    call(
        &tool,
        json!({"operation": "write", "path": "notes/a.txt", "content": " two", "mode": "append"}),
    )
    .await
    .unwrap();
    let out = call(&tool, json!({"operation": "read", "path": "notes/a.txt"}))
        .await
        .unwrap();
    assert_eq!(out["content"], "one two");
    assert_eq!(out["size"], 7);
    assert_eq!(out["truncated"], false);
    assert_eq!(
        fs::read_to_string(fx.sandbox().join("notes/a.txt")).unwrap(),
        "one two"
    );

    // Partial reads.
    let out = call(
        &tool,
        json!({"operation": "read", "path": "notes/a.txt", "offset": 4, "max_bytes": 2}),
    )
    .await
    .unwrap();
    assert_eq!(out["content"], "tw");
    assert_eq!(out["truncated"], true);

    // Binary data round-trips through base64; utf8 refuses it.
    let bytes = [0u8, 159, 146, 150, 255];
    let b64 = base64::engine::general_purpose::STANDARD.encode(bytes);
    call(
        &tool,
        json!({"operation": "write", "path": "bin.dat", "content": b64, "encoding": "base64"}),
    )
    .await
    .unwrap();
    let out = call(
        &tool,
        json!({"operation": "read", "path": "bin.dat", "encoding": "base64"}),
    )
    .await
    .unwrap();
    assert_eq!(out["content"], b64);
    let err = call(&tool, json!({"operation": "read", "path": "bin.dat"}))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ToolError::Failed(m) if m.contains("base64")),
        "{err:?}"
    );

    // exists and stat.
    let out = call(&tool, json!({"operation": "exists", "path": "notes/a.txt"}))
        .await
        .unwrap();
    assert_eq!(out["exists"], true);
    assert_eq!(out["type"], "file");
    let out = call(&tool, json!({"operation": "exists", "path": "nope"}))
        .await
        .unwrap();
    assert_eq!(out["exists"], false);
    let out = call(&tool, json!({"operation": "stat", "path": "notes"}))
        .await
        .unwrap();
    assert_eq!(out["type"], "directory");
    let out = call(&tool, json!({"operation": "stat", "path": "hello.txt"}))
        .await
        .unwrap();
    assert_eq!(out["size"], 5);
    assert_eq!(out["symlink"], false);
    assert!(out["modified"].as_u64().unwrap() > 0);

    // A symlink that stays inside works.
    symlink("hello.txt", fx.sandbox().join("inner_link")).unwrap();
    let out = call(&tool, json!({"operation": "read", "path": "inner_link"}))
        .await
        .unwrap();
    assert_eq!(out["content"], "hello");
    let out = call(&tool, json!({"operation": "stat", "path": "inner_link"}))
        .await
        .unwrap();
    assert_eq!(out["symlink"], true);
    assert_eq!(out["type"], "file");

    // mkdir and list.
    call(&tool, json!({"operation": "mkdir", "path": "x/y/z"}))
        .await
        .unwrap();
    let err = call(
        &tool,
        json!({"operation": "mkdir", "path": "p/q", "parents": false}),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(&err, ToolError::Failed(m) if m.contains("does not exist")),
        "{err:?}"
    );
    let out = call(&tool, json!({"operation": "list"})).await.unwrap();
    let names: Vec<&str> = out["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        vec!["bin.dat", "hello.txt", "inner_link", "notes", "sub", "x"]
    );
    let hello = &out["entries"][1];
    assert_eq!(hello["type"], "file");
    assert_eq!(hello["size"], 5);
    assert_eq!(out["entries"][2]["type"], "symlink");
    let out = call(&tool, json!({"operation": "list", "path": "x"}))
        .await
        .unwrap();
    assert_eq!(
        out["entries"],
        json!([{"name": "y", "type": "directory", "size": null}])
    );

    // delete: a file, an empty directory, a non-empty one only when recursive, a link without
    // its target.
    call(&tool, json!({"operation": "delete", "path": "bin.dat"}))
        .await
        .unwrap();
    let err = call(&tool, json!({"operation": "delete", "path": "x"}))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ToolError::Failed(m) if m.contains("recursive")),
        "{err:?}"
    );
    call(
        &tool,
        json!({"operation": "delete", "path": "x", "recursive": true}),
    )
    .await
    .unwrap();
    call(&tool, json!({"operation": "delete", "path": "inner_link"}))
        .await
        .unwrap();
    assert!(fx.sandbox().join("hello.txt").exists());
    assert!(!fx.sandbox().join("x").exists());
    let err = call(&tool, json!({"operation": "delete", "path": "bin.dat"}))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ToolError::Failed(m) if m.contains("does not exist")),
        "{err:?}"
    );
}

#[tokio::test]
async fn deleting_a_link_to_outside_removes_only_the_link() {
    let fx = Fixture::new("unlink");
    plant_links(&fx);
    let tool = fx.tool();
    call(&tool, json!({"operation": "delete", "path": "abs_link"}))
        .await
        .unwrap();
    call(
        &tool,
        json!({"operation": "delete", "path": "dir_link", "recursive": true}),
    )
    .await
    .unwrap();
    assert!(!fx.sandbox().join("abs_link").exists());
    assert_eq!(fs::read_to_string(fx.secret()).unwrap(), "top secret");
}

#[tokio::test]
async fn limits_hold() {
    let fx = Fixture::new("limits");
    let tool = fx.tool();
    // Reads stop at the cap and say so.
    fs::write(
        fx.sandbox().join("big.txt"),
        "a".repeat(MAX_READ_BYTES + 10),
    )
    .unwrap();
    let out = call(&tool, json!({"operation": "read", "path": "big.txt"}))
        .await
        .unwrap();
    assert_eq!(out["bytes"], MAX_READ_BYTES);
    assert_eq!(out["truncated"], true);
    // Writes past the cap are refused, as text and as base64.
    let err = call(
        &tool,
        json!({"operation": "write", "path": "w.txt", "content": "a".repeat(MAX_READ_BYTES + 1)}),
    )
    .await
    .unwrap_err();
    assert_eq!(err.code(), "limit_exceeded");
    let b64 = base64::engine::general_purpose::STANDARD.encode(vec![0u8; MAX_READ_BYTES + 1]);
    let err = call(
        &tool,
        json!({"operation": "write", "path": "w.bin", "content": b64, "encoding": "base64"}),
    )
    .await
    .unwrap_err();
    assert_eq!(err.code(), "limit_exceeded");
    assert!(!fx.sandbox().join("w.txt").exists());
    // Listings stop at max_entries.
    for i in 0..30 {
        fs::write(fx.sandbox().join(format!("sub/f{i:02}")), "").unwrap();
    }
    let out = call(
        &tool,
        json!({"operation": "list", "path": "sub", "max_entries": 10}),
    )
    .await
    .unwrap();
    assert_eq!(out["entries"].as_array().unwrap().len(), 10);
    assert_eq!(out["truncated"], true);
    let out = call(&tool, json!({"operation": "list", "path": "sub"}))
        .await
        .unwrap();
    assert_eq!(out["entries"].as_array().unwrap().len(), 30);
    assert_eq!(out["truncated"], false);
    let err = call(
        &tool,
        json!({"operation": "list", "max_entries": MAX_LIST_ENTRIES + 1}),
    )
    .await
    .unwrap_err();
    assert_eq!(err.code(), "invalid_arguments");
    // Reading a directory or writing over one fails cleanly.
    let err = call(&tool, json!({"operation": "read", "path": "sub"}))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "tool_failed");
    let err = call(
        &tool,
        json!({"operation": "write", "path": "sub", "content": "x"}),
    )
    .await
    .unwrap_err();
    assert_eq!(err.code(), "tool_failed");
}

#[tokio::test]
async fn without_a_sandbox_everything_is_refused() {
    let tool = Files::new(Sandbox::none());
    for op in ["read", "write", "list", "exists", "delete", "mkdir", "stat"] {
        let err = call(
            &tool,
            json!({"operation": op, "path": "a.txt", "content": "x"}),
        )
        .await
        .unwrap_err();
        assert!(
            matches!(&err, ToolError::Refused(m) if m.contains("no sandbox")),
            "{op}: {err:?}"
        );
    }
    // A sandbox that does not exist is a configuration error, not a silent deny-all.
    let err = Sandbox::open(Path::new("/nonexistent/toolbridge-sandbox")).unwrap_err();
    assert_eq!(err.code(), "invalid_configuration");
}

#[tokio::test]
async fn the_schema_refuses_unknown_fields_and_operations() {
    let fx = Fixture::new("schema");
    let registry =
        toolbridge_tools::ToolRegistry::with_tools(vec![std::sync::Arc::new(fx.tool()) as _])
            .unwrap();
    for args in [
        json!({"operation": "chmod", "path": "a"}),
        json!({"operation": "read", "path": "a", "follow": true}),
        json!({"operation": "read", "path": ""}),
        json!({"path": "a"}),
    ] {
        let err = registry
            .execute("files", args.clone(), &ctx())
            .await
            .unwrap_err();
        assert_eq!(err.code(), "invalid_arguments", "{args}");
    }
}
