//! The `toolbridge` binary.

use std::process::ExitCode;

use clap::Parser;
use toolbridge_gateway::cli::{Cli, Command, describe, load};

fn main() -> ExitCode {
    // One TLS crypto provider for the whole process (rustls panics if it must guess).
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let cli = Cli::parse();
    init_logging();
    match cli.command {
        Command::Check { config } => match load(config.as_deref(), None) {
            Ok(config) => {
                print!("{}", describe(&config));
                println!("config ok");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::FAILURE
            }
        },
        Command::Serve { listen, config } => {
            let config = match load(config.as_deref(), listen.as_deref()) {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("error: {e}");
                    return ExitCode::FAILURE;
                }
            };
            let runtime = match tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
            {
                Ok(r) => r,
                Err(e) => {
                    eprintln!("error: cannot start the runtime: {e}");
                    return ExitCode::FAILURE;
                }
            };
            match runtime.block_on(toolbridge_gateway::serve::run(config)) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("error: {e}");
                    ExitCode::FAILURE
                }
            }
        }
    }
}

/// Logs to stderr: `RUST_LOG` filters (default `info`), `TOOLBRIDGE_LOG_FORMAT=json` for JSON.
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    if std::env::var("TOOLBRIDGE_LOG_FORMAT").as_deref() == Ok("json") {
        builder.json().init();
    } else {
        builder.init();
    }
}
