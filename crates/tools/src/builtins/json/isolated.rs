//! The json tool's isolated jq mode: each query runs in a short-lived child process.
//!
//! In process, a filter that grows work or memory without a generator step (`"x" * 1e10`,
//! repeated `. + .`) can use CPU and memory until the whole process dies (see [`super::jq`]). Here
//! the query runs in a worker process started per query — a program whose run is
//! [`crate::builtins::jq_worker_main`], such as the `toolbridge-jq-worker` binary or
//! `toolbridge jq-worker`:
//!
//! - started directly — no shell, so it runs where there is none, as in the distroless image —
//!   with its address-space limit in its environment (`TOOLBRIDGE_JQ_MEMORY_LIMIT_BYTES`):
//!   [`JqIsolation::memory_limit_bytes`] plus the query thread's reserved stack
//!   ([`super::jq::STACK_BYTES`], address space the worker maps up front). The worker sets the
//!   limit on itself (`RLIMIT_AS`, soft and hard) before it reads the request, and exits with
//!   status 125 without running anything when it cannot (the query then fails rather than running
//!   unlimited). The workspace forbids `unsafe`, which rules out `pre_exec` + `setrlimit` here;
//!   the worker's own `setrlimit` goes through rustix's safe wrapper;
//! - with a cleared environment (the limit's variable and [`ALLOCATOR_ENV`] aside), `/` as its
//!   directory, stdin and stdout piped and stderr discarded, and `kill_on_drop`, so a dropped call
//!   kills it too;
//! - under the context's deadline and cancellation: at either the worker is killed (`SIGKILL`)
//!   and reaped before its slot is given back;
//! - with the request capped (the largest document and filter plus the envelope) and the answer
//!   read up to the caller's output limit plus [`ANSWER_MARGIN`];
//! - at most [`JqIsolation::max_concurrent`] at once per tool.
//!
//! A worker that dies without an answer — killed by a signal, as an allocation failure under the
//! limit aborts it — is reported as `limit_exceeded` ("the jq query used more memory than
//! allowed …").

use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, Command};
use tokio::sync::Semaphore;

use super::jq::{self, STACK_BYTES};
use super::worker::{self, Answer, EXIT_NO_LIMIT, MAX_REQUEST_BYTES, MEMORY_LIMIT_VAR, Request};
use crate::builtins::common::check_live;
use crate::{ToolContext, ToolError};

/// Bytes the answer's envelope may add to the caller's output limit.
pub const ANSWER_MARGIN: usize = 64 * 1024;
/// The worker's allocator setting: mimalloc (the `toolbridge` binary's allocator) must not
/// reserve its 1 GiB arena of address space up front. Reserved before the worker sets its
/// address-space limit, it would leave no room under that limit: not even for the query
/// thread's stack. Without the reserve, mimalloc maps memory as it needs it. The system
/// allocator ignores the variable.
pub const ALLOCATOR_ENV: (&str, &str) = ("MIMALLOC_ARENA_RESERVE", "0");
/// How much longer than the caller the worker lets itself run, so that the caller's deadline
/// (which kills it) comes first and a late query reads as `timeout` either way.
const WORKER_GRACE: Duration = Duration::from_millis(250);
/// How long to wait for a killed worker to be reaped.
const REAP_WAIT: Duration = Duration::from_secs(2);

/// How to run jq queries out of process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JqIsolation {
    /// The worker program: one whose run is [`crate::builtins::jq_worker_main`], such as the
    /// `toolbridge-jq-worker` binary, or the gateway's own binary with `args` `["jq-worker"]`.
    pub program: PathBuf,
    /// Arguments given to the program.
    pub args: Vec<String>,
    /// The address space a worker may use besides its query thread's reserved stack
    /// ([`super::jq::STACK_BYTES`], added on top). Default [`Self::DEFAULT_MEMORY_LIMIT_BYTES`].
    pub memory_limit_bytes: u64,
    /// How many workers one tool runs at once (at least one). Default
    /// [`Self::DEFAULT_MAX_CONCURRENT`].
    pub max_concurrent: usize,
}

impl JqIsolation {
    /// 256 MiB.
    pub const DEFAULT_MEMORY_LIMIT_BYTES: u64 = 256 * 1024 * 1024;
    /// Four workers at once.
    pub const DEFAULT_MAX_CONCURRENT: usize = 4;

    /// Runs `program` with no arguments and the default limits.
    pub fn new(program: impl Into<PathBuf>) -> Self {
        Self {
            program: program.into(),
            args: Vec::new(),
            memory_limit_bytes: Self::DEFAULT_MEMORY_LIMIT_BYTES,
            max_concurrent: Self::DEFAULT_MAX_CONCURRENT,
        }
    }

    /// The same with these arguments.
    pub fn with_args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.args = args.into_iter().map(Into::into).collect();
        self
    }

    /// The worker's address-space limit, in bytes: the memory limit plus the query thread's
    /// reserved stack.
    fn limit_bytes(&self) -> u64 {
        let stack = u64::try_from(STACK_BYTES).unwrap_or(u64::MAX);
        self.memory_limit_bytes.saturating_add(stack)
    }

    fn command(&self) -> Command {
        let mut command = Command::new(&self.program);
        command
            .args(&self.args)
            .env_clear()
            .env(MEMORY_LIMIT_VAR, self.limit_bytes().to_string())
            .env(ALLOCATOR_ENV.0, ALLOCATOR_ENV.1)
            .current_dir("/")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true);
        command
    }
}

/// Runs queries in workers, a limited number at once.
#[derive(Debug, Clone)]
pub(crate) struct Runner {
    config: Arc<JqIsolation>,
    slots: Arc<Semaphore>,
}

impl Runner {
    pub(crate) fn new(config: JqIsolation) -> Self {
        let slots = Arc::new(Semaphore::new(config.max_concurrent.max(1)));
        Self {
            config: Arc::new(config),
            slots,
        }
    }

    pub(crate) fn config(&self) -> &JqIsolation {
        &self.config
    }

    /// Runs a jq filter on a document in a worker under the context's deadline, cancellation and
    /// output limit.
    pub(crate) async fn query(
        &self,
        filter: &str,
        input: Value,
        ctx: &ToolContext,
    ) -> Result<Vec<Value>, ToolError> {
        check_live(ctx)?;
        jq::check_filter_len(filter)?;
        let remaining = ctx
            .deadline
            .saturating_duration_since(tokio::time::Instant::now());
        let request = Request {
            filter: filter.to_owned(),
            input,
            max_output_bytes: ctx.max_output_bytes,
            timeout_ms: u64::try_from((remaining + WORKER_GRACE).as_millis()).unwrap_or(u64::MAX),
        };
        let request = serde_json::to_vec(&request)
            .map_err(|e| ToolError::Failed(format!("could not encode the jq request: {e}")))?;
        if request.len() > MAX_REQUEST_BYTES {
            return Err(ToolError::LimitExceeded(format!(
                "the jq request is larger than {MAX_REQUEST_BYTES} bytes"
            )));
        }

        // The slot is held until the worker is gone (or, if this future is dropped, killed).
        let _permit = tokio::select! {
            permit = tokio::time::timeout_at(ctx.deadline, self.slots.acquire()) => permit
                .map_err(|_| ToolError::Timeout)?
                .map_err(|_| ToolError::Failed("the jq workers are shut down".to_owned()))?,
            () = cancelled(ctx) => return Err(ToolError::Cancelled),
        };
        check_live(ctx)?;
        let mut child = self
            .config
            .command()
            .spawn()
            .map_err(|e| ToolError::Failed(format!("could not start the jq worker: {e}")))?;
        let cap = ctx.max_output_bytes.saturating_add(ANSWER_MARGIN);
        let outcome = tokio::select! {
            done = tokio::time::timeout_at(
                ctx.deadline,
                exchange(&mut child, &request, cap, ctx.max_output_bytes),
            ) => done.unwrap_or(Err(ToolError::Timeout)),
            () = cancelled(ctx) => Err(ToolError::Cancelled),
        };
        match outcome {
            Ok((status, answer)) => self.interpret(status, &answer, ctx.max_output_bytes),
            Err(error) => {
                // SIGKILL, then reap, so no worker outlives its call or its slot.
                let _ = child.start_kill();
                let _ = tokio::time::timeout(REAP_WAIT, child.wait()).await;
                Err(error)
            }
        }
    }

    /// The outcome of a worker that ended by itself.
    fn interpret(
        &self,
        status: ExitStatus,
        answer: &[u8],
        max_output: usize,
    ) -> Result<Vec<Value>, ToolError> {
        if let Ok(answer) = worker::from_wire::<Answer>(answer) {
            return answer.into_result(max_output);
        }
        match status.code() {
            // Killed by a signal: an allocation failure under the limit aborts the worker (a
            // stack overflow or the kernel's OOM killer look the same).
            None => Err(ToolError::LimitExceeded(format!(
                "the jq query used more memory than allowed ({} MiB) and was stopped",
                self.config.memory_limit_bytes / (1024 * 1024)
            ))),
            Some(EXIT_NO_LIMIT) => {
                tracing::warn!(
                    "the jq worker's memory limit could not be set (`setrlimit` failed)"
                );
                Err(ToolError::Failed(
                    "the jq worker could not be given its memory limit".to_owned(),
                ))
            }
            Some(code) => Err(ToolError::Failed(format!(
                "the jq worker ended without an answer (exit status {code})"
            ))),
        }
    }
}

/// Writes the request, reads the answer (at most `cap` bytes) and waits for the worker to end.
async fn exchange(
    child: &mut Child,
    request: &[u8],
    cap: usize,
    max_output: usize,
) -> Result<(ExitStatus, Vec<u8>), ToolError> {
    let stdin = child.stdin.take();
    let stdout = child.stdout.take();
    let write = async move {
        if let Some(mut stdin) = stdin {
            // A worker that died early closed its end; its exit status says why.
            let _ = stdin.write_all(request).await;
            let _ = stdin.shutdown().await;
        }
    };
    let read = async move {
        let mut answer = Vec::new();
        if let Some(stdout) = stdout {
            let limit = u64::try_from(cap).unwrap_or(u64::MAX).saturating_add(1);
            stdout
                .take(limit)
                .read_to_end(&mut answer)
                .await
                .map_err(|e| ToolError::Failed(format!("could not read the jq worker: {e}")))?;
        }
        Ok::<_, ToolError>(answer)
    };
    let ((), answer) = tokio::join!(write, read);
    let answer = answer?;
    if answer.len() > cap {
        return Err(ToolError::OutputTooLarge { limit: max_output });
    }
    let status = child
        .wait()
        .await
        .map_err(|e| ToolError::Failed(format!("could not wait for the jq worker: {e}")))?;
    Ok((status, answer))
}

/// Resolves once the caller cancels; never when the sender is gone without cancelling.
async fn cancelled(ctx: &ToolContext) {
    let mut rx = ctx.cancelled.clone();
    loop {
        if *rx.borrow_and_update() {
            return;
        }
        if rx.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 15: the distroless image has no `/bin/sh`, so the worker must be started directly,
    /// with its limit and its allocator setting in its (otherwise empty) environment.
    #[test]
    fn the_worker_is_started_without_a_shell() {
        let config = JqIsolation::new("/opt/toolbridge").with_args(["jq-worker"]);
        let command = config.command();
        let command = command.as_std();
        assert_eq!(command.get_program(), "/opt/toolbridge");
        let args: Vec<_> = command.get_args().collect();
        assert_eq!(args, ["jq-worker"]);
        let envs: Vec<_> = command.get_envs().collect();
        let limit = (256 * 1024 * 1024 + STACK_BYTES).to_string();
        assert_eq!(
            envs,
            [
                (
                    std::ffi::OsStr::new(ALLOCATOR_ENV.0),
                    Some(std::ffi::OsStr::new(ALLOCATOR_ENV.1))
                ),
                (
                    std::ffi::OsStr::new(MEMORY_LIMIT_VAR),
                    Some(std::ffi::OsStr::new(&limit))
                ),
            ]
        );
        assert_eq!(command.get_current_dir(), Some(std::path::Path::new("/")));
    }
}
