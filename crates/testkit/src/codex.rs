//! One `codex exec` run against a gateway: Codex's `config.toml` for a provider named `gateway`
//! and the process, in its own scratch folders (`home`, `codex-home`, `work`, `tmp`), with a
//! clean environment. The Codex tests differ only in the config lines they add and the prompt.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::process::Command;

/// How long one Codex run may take.
const RUN_LIMIT: Duration = Duration::from_secs(180);

/// A Codex run to make: the binary, the scratch folder and what its config adds.
#[derive(Debug, Clone)]
pub struct CodexExec {
    codex: PathBuf,
    scratch: PathBuf,
    base_url: String,
    /// `model = …`: the slug Codex asks for.
    pub model: String,
    /// Top-level keys (before any table).
    pub top: String,
    /// Lines in `[features]` beside `plugins = false`.
    pub features: String,
    /// Lines in `[model_providers.gateway]` (after the base URL, key and retry settings).
    pub provider: String,
    /// Tables after the provider's (`[mcp_servers.…]`).
    pub tables: String,
    /// `-s`: Codex's sandbox mode.
    pub sandbox: String,
}

/// What one run left: its last message (`-o`), its output and the folder it worked in.
#[derive(Debug, Clone)]
pub struct CodexRun {
    pub last_message: String,
    pub stdout: String,
    pub stderr: String,
    pub work: PathBuf,
}

impl CodexExec {
    /// A run of `codex` against the gateway at `base_url` (its `/v1`), in `scratch`.
    pub fn new(codex: &Path, scratch: &Path, base_url: String) -> Self {
        Self {
            codex: codex.to_owned(),
            scratch: scratch.to_owned(),
            base_url,
            model: "gpt-5.5".to_owned(),
            top: String::new(),
            features: String::new(),
            provider: "stream_max_retries = 0".to_owned(),
            tables: String::new(),
            sandbox: "workspace-write".to_owned(),
        }
    }

    /// The folder Codex works in.
    pub fn work(&self) -> PathBuf {
        self.scratch.join("work")
    }

    /// Codex's `config.toml` for this run.
    pub fn config(&self) -> String {
        format!(
            r#"model = "{model}"
model_provider = "gateway"
check_for_update_on_startup = false
{top}

[analytics]
enabled = false

[features]
plugins = false
{features}

# /tmp is not a writable root: another Codex's protected `/tmp/.agents` must not race this
# sandbox's mounts (TMPDIR, in the scratch folder, stays writable).
[sandbox_workspace_write]
exclude_slash_tmp = true

[model_providers.gateway]
name = "gateway"
base_url = "{base_url}"
wire_api = "responses"
env_key = "GATEWAY_API_KEY"
request_max_retries = 0
{provider}
{tables}
"#,
            model = self.model,
            top = self.top,
            features = self.features,
            base_url = self.base_url,
            provider = self.provider,
            tables = self.tables,
        )
    }

    /// Writes the config and runs `codex exec --json PROMPT`; panics when Codex cannot start or
    /// outlives [`RUN_LIMIT`].
    pub async fn run(&self, prompt: &str) -> CodexRun {
        let home = self.scratch.join("home");
        let codex_home = self.scratch.join("codex-home");
        let work = self.work();
        let tmp = self.scratch.join("tmp");
        for dir in [&home, &codex_home, &work, &tmp] {
            std::fs::create_dir_all(dir).expect("scratch folders");
        }
        std::fs::write(codex_home.join("config.toml"), self.config()).expect("Codex config");
        let last = self.scratch.join("last-message.txt");
        let output = tokio::time::timeout(
            RUN_LIMIT,
            Command::new(&self.codex)
                .args(["exec", "--skip-git-repo-check", "--color", "never", "-s"])
                .arg(&self.sandbox)
                .arg("-C")
                .arg(&work)
                .arg("-o")
                .arg(&last)
                .args(["--json", prompt])
                .env_clear()
                .env("PATH", std::env::var("PATH").unwrap_or_default())
                .env("HOME", &home)
                .env("CODEX_HOME", &codex_home)
                .env("TMPDIR", &tmp)
                .env("GATEWAY_API_KEY", "gateway-key")
                .stdin(Stdio::null())
                .kill_on_drop(true)
                .output(),
        )
        .await
        .expect("codex finishes in time")
        .expect("codex runs");
        CodexRun {
            last_message: std::fs::read_to_string(&last).unwrap_or_default(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
            work,
        }
    }
}
