//! The `toolbridge` binary's body: parse the command line and run the command. `main.rs` only
//! calls [`main`], so the binary has no code of its own and the library keeps its internals
//! private.

use std::process::ExitCode;

use super::{Cli, Command, KeysCommand, TraceCommand, describe, load};
use crate::config::Dialect;
use clap::Parser;

/// Runs the `toolbridge` command line; the binary's `main`.
pub fn main() -> ExitCode {
    // One TLS crypto provider for the whole process (rustls panics if it must guess).
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let cli = Cli::parse();
    // `serve` installs its subscriber from the config (format, traces); the rest log as text.
    if !matches!(cli.command, Command::Serve { .. }) {
        crate::platform::ops::telemetry::init_default();
    }
    match cli.command {
        Command::Trace {
            command: TraceCommand::Show { request_id, config },
        } => trace_show(config.as_deref(), &request_id),
        // One jq query, JSON over stdin/stdout, for the json tool's isolated mode.
        Command::JqWorker => std::process::exit(toolbridge_tools::builtins::jq_worker_main()),
        Command::Check { config } => match load(config.as_deref(), None) {
            Ok(config) => print_out(&format!("{}config ok\n", describe(&config))),
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::FAILURE
            }
        },
        Command::Keys { command } => keys(command),
        Command::Cache {
            session,
            json,
            config,
        } => cache_report(config.as_deref(), &session, json),
        Command::Healthcheck { url } => match crate::cli::healthcheck(&url) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::FAILURE
            }
        },
        Command::Providers {
            provider,
            model,
            config,
        } => providers(provider.as_deref(), model.as_deref(), config.as_deref()),
        Command::Plan {
            provider,
            model,
            config,
            request,
        } => plan(&provider, model.as_deref(), config.as_deref(), &request),
        Command::Serve { listen, config } => {
            let path = config;
            let config = match load(path.as_deref(), listen.as_deref()) {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("error: {e}");
                    return ExitCode::FAILURE;
                }
            };
            // Before the runtime: the trace exporter's blocking client builds its own.
            let _telemetry = match crate::platform::ops::telemetry::init(&config.ops) {
                Ok(guard) => guard,
                Err(e) => {
                    eprintln!("error: {e}");
                    return ExitCode::FAILURE;
                }
            };
            let loader: crate::launch::reload::Loader =
                std::sync::Arc::new(move || load(path.as_deref(), listen.as_deref()));
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
            match runtime.block_on(crate::launch::run(config, Some(loader))) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("error: {e}");
                    ExitCode::FAILURE
                }
            }
        }
    }
}

/// `toolbridge trace show ID`.
fn trace_show(config: Option<&std::path::Path>, request_id: &str) -> ExitCode {
    store_command(config, |config| async move {
        crate::platform::ops::trace_show(&config, request_id).await
    })
}

/// `toolbridge cache SESSION`: the session's cache report, as text or JSON.
fn cache_report(config: Option<&std::path::Path>, session: &str, json: bool) -> ExitCode {
    store_command(config, |config| async move {
        let report = crate::platform::cache_ledger::read_report(&config, session).await?;
        Ok(if json {
            format!("{report:#}\n")
        } else {
            crate::platform::cache_ledger::report_text(&report)
        })
    })
}

/// A command that reads the configured store: the config loaded, `read` run on a runtime of
/// its own, and its text printed (or its error said).
fn store_command<F, Fut>(config: Option<&std::path::Path>, read: F) -> ExitCode
where
    F: FnOnce(crate::Config) -> Fut,
    Fut: std::future::Future<Output = Result<String, String>>,
{
    let config = match load(config, None) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(read(config)) {
        Ok(text) => print_out(&text),
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `toolbridge keys …`: prints what the command says, or the error.
fn keys(command: KeysCommand) -> ExitCode {
    use crate::platform::auth::{cli, keys};
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match command {
            KeysCommand::Create {
                name,
                models,
                tools,
                daily_tokens,
                monthly_tokens,
                tenant,
                admin,
                config,
            } => {
                let new = cli::NewKey {
                    name,
                    models,
                    tools,
                    daily_tokens,
                    monthly_tokens,
                    tenant,
                    admin,
                };
                cli::create(config.as_deref(), new).await
            }
            KeysCommand::List { config } => cli::list(config.as_deref()).await,
            KeysCommand::Revoke { id, config } => cli::revoke(config.as_deref(), &id).await,
            KeysCommand::Hash => keys::generate_secret().map(|secret| {
                format!(
                    "secret: {secret}\nhash: {}\n\nPut the hash in a [[keys]] entry; give the secret to the client.\n",
                    keys::hash_secret(&secret)
                )
            }),
        }
    });
    match result {
        Ok(text) => print_out(&text),
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn plan(
    provider: &str,
    model: Option<&str>,
    config: Option<&std::path::Path>,
    request: &std::path::Path,
) -> ExitCode {
    let (profile, dialect) = match config {
        Some(path) => match load(Some(path), None) {
            Ok(config) => match config.providers.get(provider) {
                Some(p) => {
                    let p = p.for_model(model.unwrap_or_default());
                    (p.profile_for(model.unwrap_or_default()), p.dialect)
                }
                None => {
                    eprintln!("error: no provider `{provider}` in {}", path.display());
                    return ExitCode::FAILURE;
                }
            },
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::FAILURE;
            }
        },
        None => match toolbridge_providers::profile::Profile::preset(provider) {
            Some(p) => (p, Dialect::of_preset(provider)),
            None => {
                eprintln!(
                    "error: `{provider}` is not a preset (presets: {}); pass --config to name a configured provider",
                    toolbridge_providers::profile::Profile::preset_names().join(", ")
                );
                return ExitCode::FAILURE;
            }
        },
    };
    let body = match std::fs::read(request) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("error: cannot read {}: {e}", request.display());
            return ExitCode::FAILURE;
        }
    };
    match crate::cli::plan_report(&body, &profile, dialect, model) {
        Ok(report) => print_out(&report),
        Err(e) => {
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}

/// `toolbridge providers`: the matrix of every preset, or of the providers of a config file.
fn providers(
    provider: Option<&str>,
    model: Option<&str>,
    config: Option<&std::path::Path>,
) -> ExitCode {
    use toolbridge_providers::profile::Profile;
    let mut profiles = Vec::new();
    let mut gateway = None;
    match config {
        Some(path) => {
            let config = match load(Some(path), None) {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("error: {e}");
                    return ExitCode::FAILURE;
                }
            };
            gateway = config.gateway_tools.clone();
            profiles = crate::http::matrix::configured_profiles(&config, provider, model);
        }
        None => {
            for name in Profile::preset_names() {
                if provider.is_none_or(|wanted| wanted == *name)
                    && let Some(p) = Profile::preset(name)
                {
                    profiles.push((p, Dialect::of_preset(name)));
                }
            }
        }
    }
    if profiles.is_empty() {
        eprintln!(
            "error: no provider `{}` (presets: {}); pass --config to name a configured provider",
            provider.unwrap_or_default(),
            Profile::preset_names().join(", ")
        );
        return ExitCode::FAILURE;
    }
    // The gateway's tools as a request for `model` (or any model) would get them.
    let served = gateway.as_deref().map(|g| (g, model.unwrap_or("*")));
    let reports: Vec<String> = profiles
        .iter()
        .map(|(profile, dialect)| crate::http::matrix::report(profile, *dialect, served))
        .collect();
    print_out(&reports.join("\n"))
}

/// Writes a command's whole output to stdout. A reader that went away (`toolbridge check |
/// head`: EPIPE) is a normal end, not a failure: the rest of the output is not wanted.
/// `print!` would panic there, since Rust ignores SIGPIPE and the write fails instead.
fn print_out(text: &str) -> ExitCode {
    use std::io::Write as _;
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: cannot write the output: {e}");
            ExitCode::FAILURE
        }
    }
}
