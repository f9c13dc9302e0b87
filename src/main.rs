//! jobwarden: one binary that guards and runs Kubernetes batch/v1 Jobs.

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
