//! The `toolbridge` binary: everything it does is [`toolbridge_gateway::cli::main`].
//!
//! Its allocator is mimalloc (`toolbridge_alloc`; see docs/performance.md, "The binary", for the
//! measurement).

#[global_allocator]
static ALLOCATOR: toolbridge_alloc::Mimalloc = toolbridge_alloc::Mimalloc;

fn main() -> std::process::ExitCode {
    toolbridge_gateway::cli::main()
}
