//! The controller's loop on the fake cluster: reconciling (`reconcile_loop`) and crashing at
//! every write and restarting (`crash`). One binary, linked once (`cargo test -p
//! jobwarden-fake-cluster --test it`).

mod crash;
mod reconcile_loop;
