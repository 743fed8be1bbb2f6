//! The `toolbridge` binary: everything it does is [`toolbridge_gateway::cli::main`].
//!
//! It keeps the system allocator. mimalloc counted fewer instructions per request (L −3.2 %,
//! SS −0.8 %, `scripts/bench-instructions`), but it reserves address space up front, and the jq
//! worker — this same binary, run under `RLIMIT_AS` — then cannot start its query thread.

fn main() -> std::process::ExitCode {
    toolbridge_gateway::cli::main()
}
