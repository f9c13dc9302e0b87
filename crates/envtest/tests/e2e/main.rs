//! The harness on real control planes: the dispatcher's fleet (`fleet`) and a worker with
//! kube-scheduler (`scheduler`). One binary, linked once (`cargo test -p jobwarden-envtest
//! --test e2e`); without the binaries every test skips with one line.

mod fleet;
mod scheduler;
