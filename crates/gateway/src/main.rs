//! The `toolbridge` binary: everything it does is [`toolbridge_gateway::cli::main`].
//!
//! Its allocator is mimalloc (see ARCHITECTURE.md, "Entry points", for the measurement).

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    toolbridge_gateway::cli::main()
}
