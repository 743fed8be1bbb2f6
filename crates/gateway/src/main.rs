//! The `toolbridge` binary: everything it does is [`toolbridge_gateway::cli::main`].

/// mimalloc rather than the system allocator: fewer instructions per request (see
/// `scripts/bench-instructions`).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    toolbridge_gateway::cli::main()
}
