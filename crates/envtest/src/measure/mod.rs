//! What the scale benchmarks measure on real control planes, read from outside the processes
//! they measure: a process's CPU and memory from `/proc` ([`usage`]), the requests each client
//! sent from kube-apiserver's audit log ([`requests`]), and what a process serves on
//! `/metrics` ([`exposition`]); and what a benchmark's command line picks ([`command_line`]).
//! Never used to assert on time: the tests assert on what
//! happened, the benchmarks report how long it took.

pub mod command_line;
pub mod exposition;
pub mod requests;
pub mod usage;

pub use exposition::Exposition;
pub use requests::Requests;
pub use usage::Usage;
