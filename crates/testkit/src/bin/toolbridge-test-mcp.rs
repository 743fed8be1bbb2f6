//! `toolbridge-test-mcp --stdio | --http`: the test kit's MCP server as a process. With `--http`
//! it serves streamable HTTP on 127.0.0.1:0 and prints the URL as the first stdout line.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test code fails loudly

use std::io::Write;

#[tokio::main]
async fn main() -> std::io::Result<()> {
    match std::env::args().nth(1).as_deref() {
        Some("--stdio") => toolbridge_testkit::mcp::serve_stdio().await,
        Some("--http") => {
            let (url, _server) = toolbridge_testkit::mcp::serve_http().await;
            let mut stdout = std::io::stdout();
            writeln!(stdout, "{url}")?;
            stdout.flush()?;
            // Serve until killed.
            std::future::pending::<()>().await;
            Ok(())
        }
        _ => {
            eprintln!("usage: toolbridge-test-mcp --stdio | --http");
            std::process::exit(2);
        }
    }
}
