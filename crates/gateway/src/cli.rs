//! The `toolbridge` command line: `serve`, `check`, `--version`.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::config::Config;

#[derive(Debug, Parser)]
#[command(
    name = "toolbridge",
    version,
    about = "A Responses API gateway for every model provider"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the gateway.
    Serve {
        /// The address to listen on (default 127.0.0.1:8080, or TOOLBRIDGE_LISTEN).
        #[arg(long)]
        listen: Option<String>,
        /// A TOML config file. Without it, TOOLBRIDGE_UPSTREAM_URL names the one upstream.
        #[arg(long, env = "TOOLBRIDGE_CONFIG")]
        config: Option<PathBuf>,
    },
    /// Validate a config and print its routes.
    Check {
        #[arg(long, env = "TOOLBRIDGE_CONFIG")]
        config: Option<PathBuf>,
    },
}

/// Loads a config with the process environment, `--listen` winning over both.
pub fn load(path: Option<&std::path::Path>, listen: Option<&str>) -> Result<Config, String> {
    let env = |k: &str| {
        if k == "TOOLBRIDGE_LISTEN"
            && let Some(l) = listen
        {
            return Some(l.to_owned());
        }
        std::env::var(k).ok()
    };
    Config::load(path, &env).map_err(|e| e.to_string())
}

/// What `toolbridge check` prints.
pub fn describe(config: &Config) -> String {
    let mut out = String::new();
    out.push_str(&format!("listen: {}\n", config.listen));
    out.push_str(&format!(
        "gateway keys: {}\n",
        if config.api_keys.is_empty() {
            "none (no authentication)".to_owned()
        } else {
            format!("{} configured", config.api_keys.len())
        }
    ));
    out.push_str("providers:\n");
    for p in config.providers.values() {
        out.push_str(&format!(
            "  {}: {} (preset {}, key {})\n",
            p.name,
            p.base_url,
            p.profile.name,
            if p.api_key.is_some() {
                "set"
            } else {
                "not set"
            }
        ));
    }
    out.push_str("routes:\n");
    for r in &config.routes {
        out.push_str(&format!(
            "  {} -> {} ({})\n",
            r.pattern,
            r.provider,
            r.upstream_model
                .as_deref()
                .map(|m| format!("as {m}"))
                .unwrap_or_else(|| "same model name".to_owned())
        ));
    }
    out
}
