//! `toolbridge-jq-worker`: runs one jq query for the `json` tool's isolated mode.
//!
//! It reads one JSON request from stdin, writes one JSON answer to stdout and exits; the parent
//! (`toolbridge_tools::builtins::IsolatedJson`) starts it under a memory limit and kills it at the
//! deadline. See `toolbridge_tools::builtins::jq_worker_main`.

fn main() {
    std::process::exit(toolbridge_tools::builtins::jq_worker_main());
}
