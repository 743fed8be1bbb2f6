//! The `pdf` tool on PDFs written here by hand (objects, a correct xref table, a trailer):
//! per-page text, page caps, sandboxed files and base64 input, byte caps, and malformed
//! documents — truncated, garbage, a page pdf-extract panics on, a cyclic page tree, self-invoking
//! form XObjects, decompression bombs — each an error, never a crash of the test process.
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)]

use std::fs;
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use base64::Engine as _;
use serde_json::{Value, json};
use toolbridge_tools::builtins::pdf::{MAX_PAGES, MAX_PDF_BYTES};
use toolbridge_tools::builtins::{Pdf, Sandbox};
use toolbridge_tools::{Tool, ToolContext, ToolError};

/// Assembles a PDF from object bodies (object `i + 1` is `objects[i]`), with a correct xref.
fn build_pdf(objects: &[Vec<u8>]) -> Vec<u8> {
    let mut out = b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n".to_vec();
    let mut offsets = Vec::new();
    for (i, body) in objects.iter().enumerate() {
        offsets.push(out.len());
        writeln!(out, "{} 0 obj", i + 1).unwrap();
        out.extend_from_slice(body);
        out.extend_from_slice(b"\nendobj\n");
    }
    let xref = out.len();
    write!(out, "xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1).unwrap();
    for offset in offsets {
        writeln!(out, "{offset:010} 00000 n ").unwrap();
    }
    write!(
        out,
        "trailer\n<< /Size {} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n",
        objects.len() + 1
    )
    .unwrap();
    out
}

fn dict(text: &str) -> Vec<u8> {
    text.as_bytes().to_vec()
}

fn stream(extra: &str, data: &[u8]) -> Vec<u8> {
    let mut body = format!("<< /Length {} {extra} >>\nstream\n", data.len()).into_bytes();
    body.extend_from_slice(data);
    body.extend_from_slice(b"\nendstream");
    body
}

/// A document with one page per text: catalog 1, pages 2, font 3, then page/content pairs.
fn text_pdf(texts: &[&str]) -> Vec<u8> {
    let kids: Vec<String> = (0..texts.len())
        .map(|i| format!("{} 0 R", 4 + 2 * i))
        .collect();
    let mut objects = vec![
        dict("<< /Type /Catalog /Pages 2 0 R >>"),
        dict(&format!(
            "<< /Type /Pages /Kids [{}] /Count {} >>",
            kids.join(" "),
            texts.len()
        )),
        dict("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>"),
    ];
    for (i, text) in texts.iter().enumerate() {
        objects.push(dict(&format!(
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] \
             /Resources << /Font << /F1 3 0 R >> >> /Contents {} 0 R >>",
            5 + 2 * i
        )));
        let content = format!("BT /F1 24 Tf 72 700 Td ({text}) Tj ET");
        objects.push(stream("", content.as_bytes()));
    }
    build_pdf(&objects)
}

fn ctx() -> ToolContext {
    ToolContext::with_timeout(Duration::from_secs(20), 16 * 1024 * 1024)
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

async fn extract(tool: &Pdf, bytes: &[u8], extra: Value) -> Result<Value, ToolError> {
    let mut args = json!({"data": b64(bytes)});
    if let (Some(map), Value::Object(more)) = (args.as_object_mut(), extra) {
        map.extend(more);
    }
    tool.execute(args, &ctx()).await
}

fn zlib(data: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
    encoder.write_all(data).unwrap();
    encoder.finish().unwrap()
}

#[tokio::test]
async fn text_is_extracted_per_page() {
    let tool = Pdf::default();
    let out = extract(&tool, &text_pdf(&["Hello PDF world"]), json!({}))
        .await
        .unwrap();
    assert_eq!(out["page_count"], 1);
    assert_eq!(out["pages"][0]["page"], 1);
    assert_eq!(out["pages"][0]["text"], "Hello PDF world");
    assert_eq!(out["more_pages"], false);

    let three = text_pdf(&["First page", "Second page", "Third page"]);
    let out = extract(&tool, &three, json!({})).await.unwrap();
    let texts: Vec<&str> = out["pages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["text"].as_str().unwrap())
        .collect();
    assert_eq!(texts, ["First page", "Second page", "Third page"]);
    let out = extract(&tool, &three, json!({"operation": "page_count"}))
        .await
        .unwrap();
    assert_eq!(out, json!({"page_count": 3}));
}

#[tokio::test]
async fn the_page_cap_and_window_hold() {
    let tool = Pdf::default();
    let three = text_pdf(&["First page", "Second page", "Third page"]);
    let out = extract(&tool, &three, json!({"max_pages": 2}))
        .await
        .unwrap();
    assert_eq!(out["pages"].as_array().unwrap().len(), 2);
    assert_eq!(out["more_pages"], true);
    let out = extract(&tool, &three, json!({"first_page": 3}))
        .await
        .unwrap();
    assert_eq!(
        out["pages"],
        json!([{"page": 3, "text": "Third page", "truncated": false}])
    );
    let err = extract(&tool, &three, json!({"first_page": 4}))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ToolError::InvalidArguments { path, .. } if path == "/first_page"),
        "{err:?}"
    );
    let err = extract(&tool, &three, json!({"max_pages": MAX_PAGES + 1}))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "invalid_arguments");
    // More pages than one call returns.
    let texts: Vec<String> = (1..=MAX_PAGES + 5).map(|i| format!("Page {i}")).collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let out = extract(&tool, &text_pdf(&refs), json!({"max_pages": MAX_PAGES}))
        .await
        .unwrap();
    assert_eq!(out["pages"].as_array().unwrap().len(), MAX_PAGES);
    assert_eq!(out["page_count"], MAX_PAGES + 5);
    assert_eq!(out["more_pages"], true);
}

#[tokio::test]
async fn malformed_pdfs_are_errors() {
    let tool = Pdf::default();
    let good = text_pdf(&["Hello"]);
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("truncated", good[..good.len() / 2].to_vec()),
        ("header only", b"%PDF-1.4\n".to_vec()),
        ("garbage", b"this is not a pdf at all".to_vec()),
        (
            "random",
            (0..4096u32)
                .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
                .collect(),
        ),
        ("empty", Vec::new()),
        (
            "header and garbage",
            [b"%PDF-1.7\n".as_slice(), &[0xff; 2000], b"trailer <<>>"].concat(),
        ),
        (
            "no pages",
            build_pdf(&[
                dict("<< /Type /Catalog /Pages 2 0 R >>"),
                dict("<< /Type /Pages /Kids [] /Count 0 >>"),
            ]),
        ),
        (
            // pdf-extract panics on a page without a MediaBox: the panic becomes an error.
            "no media box",
            build_pdf(&[
                dict("<< /Type /Catalog /Pages 2 0 R >>"),
                dict("<< /Type /Pages /Kids [3 0 R] /Count 1 >>"),
                dict("<< /Type /Page /Parent 2 0 R /Contents 4 0 R >>"),
                stream("", b"BT ET"),
            ]),
        ),
        ("encrypted", {
            let mut pdf = text_pdf(&["x"]);
            let at = pdf.windows(7).rposition(|w| w == b"/Root 1").unwrap();
            pdf.splice(at..at, b"/Encrypt 99 0 R ".iter().copied());
            pdf
        }),
    ];
    for (name, bytes) in cases {
        let err = extract(&tool, &bytes, json!({})).await.unwrap_err();
        assert!(
            matches!(err, ToolError::Failed(_)),
            "{name}: expected tool_failed, got {err:?}"
        );
    }
    let err = tool
        .execute(json!({"data": "%%% not base64"}), &ctx())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ToolError::InvalidArguments { path, .. } if path == "/data"),
        "{err:?}"
    );
}

#[tokio::test]
async fn recursion_that_would_overflow_the_stack_is_refused() {
    let tool = Pdf::default();
    // A page without Resources whose parent chain is a cycle: pdf-extract's inheritance lookup
    // would recurse forever.
    let cyclic_parents = build_pdf(&[
        dict("<< /Type /Catalog /Pages 2 0 R >>"),
        dict("<< /Type /Pages /Kids [3 0 R] /Count 1 /MediaBox [0 0 10 10] >>"),
        dict("<< /Type /Page /Parent 5 0 R /Contents 4 0 R >>"),
        stream("", b"BT ET"),
        dict("<< /Type /Pages /Parent 6 0 R >>"),
        dict("<< /Type /Pages /Parent 5 0 R >>"),
    ]);
    // A form XObject that invokes itself: `Do` would recurse forever.
    let self_invoking = build_pdf(&[
        dict("<< /Type /Catalog /Pages 2 0 R >>"),
        dict("<< /Type /Pages /Kids [3 0 R] /Count 1 >>"),
        dict(
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 10 10] \
             /Resources << /XObject << /X1 5 0 R >> >> /Contents 4 0 R >>",
        ),
        stream("", b"/X1 Do"),
        stream("/Type /XObject /Subtype /Form /BBox [0 0 10 10]", b"/X1 Do"),
    ]);
    // Two forms that invoke each other through their own resources.
    let mutual = build_pdf(&[
        dict("<< /Type /Catalog /Pages 2 0 R >>"),
        dict("<< /Type /Pages /Kids [3 0 R] /Count 1 >>"),
        dict(
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 10 10] \
             /Resources << /XObject << /A 5 0 R >> >> /Contents 4 0 R >>",
        ),
        stream("", b"/A Do"),
        stream(
            "/Type /XObject /Subtype /Form /BBox [0 0 10 10] /Resources << /XObject << /B 6 0 R >> >>",
            b"/B Do",
        ),
        stream(
            "/Type /XObject /Subtype /Form /BBox [0 0 10 10] /Resources << /XObject << /A 5 0 R >> >>",
            b"/A Do",
        ),
    ]);
    for (name, bytes) in [
        ("cyclic parents", cyclic_parents),
        ("self-invoking form", self_invoking),
        ("mutually invoking forms", mutual),
    ] {
        let err = extract(&tool, &bytes, json!({})).await.unwrap_err();
        assert!(
            matches!(&err, ToolError::Failed(m) if m.contains("cycle") || m.contains("nest")),
            "{name}: {err:?}"
        );
    }
    // A legitimate form is extracted.
    let with_form = build_pdf(&[
        dict("<< /Type /Catalog /Pages 2 0 R >>"),
        dict("<< /Type /Pages /Kids [3 0 R] /Count 1 >>"),
        dict(
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] \
             /Resources << /XObject << /X1 5 0 R >> /Font << /F1 6 0 R >> >> /Contents 4 0 R >>",
        ),
        stream("", b"/X1 Do"),
        stream(
            "/Type /XObject /Subtype /Form /BBox [0 0 612 792]",
            b"BT /F1 12 Tf 72 700 Td (Inside a form) Tj ET",
        ),
        dict("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>"),
    ]);
    let out = extract(&tool, &with_form, json!({})).await.unwrap();
    assert_eq!(out["pages"][0]["text"], "Inside a form");
}

#[tokio::test]
async fn decompression_bombs_are_refused() {
    let tool = Pdf::default();
    // 40 MiB of spaces in ~40 KiB, once and (smaller still) twice compressed.
    let spaces = vec![b' '; 40 * 1024 * 1024];
    let once = zlib(&spaces);
    let twice = zlib(&once);
    for (name, filter, data) in [
        ("flate", "/Filter /FlateDecode", once),
        (
            "flate of flate",
            "/Filter [/FlateDecode /FlateDecode]",
            twice,
        ),
    ] {
        let bomb = build_pdf(&[
            dict("<< /Type /Catalog /Pages 2 0 R >>"),
            dict("<< /Type /Pages /Kids [3 0 R] /Count 1 >>"),
            dict("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 10 10] /Contents 4 0 R >>"),
            stream(filter, &data),
        ]);
        assert!(bomb.len() < 100 * 1024, "{name}: {}", bomb.len());
        let err = extract(&tool, &bomb, json!({})).await.unwrap_err();
        assert_eq!(err.code(), "limit_exceeded", "{name}: {err:?}");
    }
    // A compressed page within the caps is read.
    let content = zlib(b"BT /F1 24 Tf 72 700 Td (Compressed) Tj ET");
    let ok = build_pdf(&[
        dict("<< /Type /Catalog /Pages 2 0 R >>"),
        dict("<< /Type /Pages /Kids [3 0 R] /Count 1 >>"),
        dict(
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] \
             /Resources << /Font << /F1 5 0 R >> >> /Contents 4 0 R >>",
        ),
        stream("/Filter /FlateDecode", &content),
        dict("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>"),
    ]);
    let out = extract(&tool, &ok, json!({})).await.unwrap();
    assert_eq!(out["pages"][0]["text"], "Compressed");
}

/// A sandbox directory for the file tests.
struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Self {
        let path = std::env::temp_dir().join(format!(
            "toolbridge-pdf-{name}-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        ));
        fs::create_dir_all(path.join("box")).unwrap();
        Self(path)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

#[tokio::test]
async fn files_come_from_the_sandbox_only() {
    let dir = Dir::new("files");
    fs::write(dir.0.join("box/doc.pdf"), text_pdf(&["From a file"])).unwrap();
    fs::write(dir.0.join("outside.pdf"), text_pdf(&["Outside"])).unwrap();
    std::os::unix::fs::symlink(dir.0.join("outside.pdf"), dir.0.join("box/link.pdf")).unwrap();
    let tool = Pdf::new(Sandbox::open(&dir.0.join("box")).unwrap());

    let out = tool
        .execute(json!({"path": "doc.pdf"}), &ctx())
        .await
        .unwrap();
    assert_eq!(out["pages"][0]["text"], "From a file");
    for path in ["../outside.pdf", "/etc/passwd", "link.pdf"] {
        let err = tool
            .execute(json!({"path": path}), &ctx())
            .await
            .unwrap_err();
        assert_eq!(err.code(), "refused", "{path}: {err:?}");
    }
    let err = tool
        .execute(json!({"path": "missing.pdf"}), &ctx())
        .await
        .unwrap_err();
    assert_eq!(err.code(), "tool_failed");

    // Path and data together, or neither, are invalid.
    let err = tool
        .execute(json!({"path": "doc.pdf", "data": "JVBERi0="}), &ctx())
        .await
        .unwrap_err();
    assert_eq!(err.code(), "invalid_arguments");
    let err = tool.execute(json!({}), &ctx()).await.unwrap_err();
    assert_eq!(err.code(), "invalid_arguments");

    // Without a sandbox a path is refused; base64 still works.
    let bare = Pdf::default();
    let err = bare
        .execute(json!({"path": "doc.pdf"}), &ctx())
        .await
        .unwrap_err();
    assert_eq!(err.code(), "refused");
}

#[tokio::test]
async fn the_byte_cap_holds() {
    let dir = Dir::new("cap");
    let mut big = text_pdf(&["Big"]);
    big.resize(MAX_PDF_BYTES + 1, b' ');
    fs::write(dir.0.join("box/big.pdf"), &big).unwrap();
    let tool = Pdf::new(Sandbox::open(&dir.0.join("box")).unwrap());
    let err = tool
        .execute(json!({"path": "big.pdf"}), &ctx())
        .await
        .unwrap_err();
    assert_eq!(err.code(), "limit_exceeded");
    let err = extract(&tool, &big, json!({})).await.unwrap_err();
    assert_eq!(err.code(), "limit_exceeded");
    // A call whose deadline has passed does not start.
    let late = ToolContext::with_timeout(Duration::ZERO, 1024);
    let err = tool
        .execute(json!({"data": b64(&text_pdf(&["x"]))}), &late)
        .await
        .unwrap_err();
    assert_eq!(err, ToolError::Timeout);
}
