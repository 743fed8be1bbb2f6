//! The `toolbridge` binary: everything it does is [`toolbridge_gateway::cli::main`].

fn main() -> std::process::ExitCode {
    toolbridge_gateway::cli::main()
}
