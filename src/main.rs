//! jobwarden: one binary that guards and runs Kubernetes batch/v1 Jobs.

mod cli;

// A review builds and drops a JSON tree of a few hundred small nodes; under callgrind, glibc's
// malloc and free were over a quarter of the server's instructions. mimalloc's thread-local
// free lists cost a fraction of that (BENCHMARKS.md has the before and after).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    cli::main()
}
