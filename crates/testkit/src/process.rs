//! A `toolbridge serve` child process for ring-3 tests: spawned with a cleared environment (PATH
//! kept, plus the variables the test gives), ready once it prints
//! `toolbridge listening on http://ADDR` on stderr, its stderr drained and kept for failure
//! messages, and killed when dropped.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// The bound on the binary printing its listening line.
const STARTUP_LIMIT: Duration = Duration::from_secs(20);
/// The bound on reaping the process after [`GatewayProcess::kill`].
const KILL_LIMIT: Duration = Duration::from_secs(10);
/// The stderr line that announces the listening address.
const LISTENING: &str = "toolbridge listening on http://";

/// A running `toolbridge serve`, killed when dropped.
pub struct GatewayProcess {
    child: Child,
    addr: SocketAddr,
    stderr: Arc<Mutex<Vec<String>>>,
}

impl GatewayProcess {
    /// Spawns `binary serve` with a cleared environment: PATH is kept, then `envs` are set, and
    /// `TOOLBRIDGE_LISTEN=127.0.0.1:0` unless `envs` names it. Waits for the listening line on
    /// stderr; stderr keeps being drained (and kept, see [`Self::stderr`]) afterwards.
    ///
    /// Panics, with the stderr seen so far, when the process exits or stays silent too long.
    pub async fn start(binary: &Path, envs: &[(&str, String)]) -> Self {
        Self::start_within(binary, envs, STARTUP_LIMIT).await
    }

    /// [`Self::start`] waiting up to `limit` for the listening line: for a binary started
    /// under a slow wrapper (valgrind, for the instruction benchmarks).
    pub async fn start_within(binary: &Path, envs: &[(&str, String)], limit: Duration) -> Self {
        let mut cmd = Command::new(binary);
        cmd.arg("serve")
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default());
        if !envs.iter().any(|(name, _)| *name == "TOOLBRIDGE_LISTEN") {
            cmd.env("TOOLBRIDGE_LISTEN", "127.0.0.1:0");
        }
        if !envs.iter().any(|(name, _)| *name == "TOOLBRIDGE_STORE_URL") {
            // A store of its own, never a file in the working tree.
            cmd.env("TOOLBRIDGE_STORE_URL", crate::temp_store_url());
        }
        for (name, value) in envs {
            cmd.env(name, value);
        }
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot spawn {} serve: {e}", binary.display()));

        let mut lines = BufReader::new(child.stderr.take().expect("piped stderr")).lines();
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let seen = stderr.clone();
        let addr = tokio::time::timeout(limit, async {
            while let Some(line) = lines.next_line().await.expect("read stderr") {
                seen.lock().unwrap().push(line.clone());
                if let Some(rest) = line.strip_prefix(LISTENING) {
                    return Some(rest.trim().parse::<SocketAddr>().expect("a socket address"));
                }
            }
            None
        })
        .await;
        let addr = match addr {
            Ok(Some(addr)) => addr,
            Ok(None) => panic!(
                "toolbridge exited before listening; stderr:\n{}",
                stderr.lock().unwrap().join("\n")
            ),
            Err(_) => panic!(
                "toolbridge did not print its listening line in {limit:?}; stderr:\n{}",
                stderr.lock().unwrap().join("\n")
            ),
        };
        // Keep draining the log so the gateway never blocks on a full pipe.
        let seen = stderr.clone();
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                seen.lock().unwrap().push(line);
            }
        });
        Self {
            child,
            addr,
            stderr,
        }
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://ADDR` followed by `path` (which should start with `/`).
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Everything it has written to stderr so far, one line per line.
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().join("\n")
    }

    /// Its process id; panics once it has been reaped.
    pub fn pid(&self) -> u32 {
        self.child.id().expect("the process is still running")
    }

    /// Waits for the process to exit on its own; panics, with its stderr, after `limit`.
    pub async fn wait(&mut self, limit: Duration) -> ExitStatus {
        match tokio::time::timeout(limit, self.child.wait()).await {
            Ok(status) => status.expect("wait for toolbridge"),
            Err(_) => panic!(
                "toolbridge did not exit within {limit:?}; stderr:\n{}",
                self.stderr()
            ),
        }
    }

    /// Kills the process and reaps it.
    pub async fn kill(mut self) {
        let _ = self.child.start_kill();
        let _ = tokio::time::timeout(KILL_LIMIT, self.child.wait()).await;
    }
}
