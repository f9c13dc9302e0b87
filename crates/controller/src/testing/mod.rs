//! What tests build with, behind the `testing` feature so that the fake cluster's tests and
//! benchmark can use it too: [`builders`] of Jobs and pods, and [`plan_table`], the runner of
//! the table tests over `plan`. Nothing here runs in a build of the binary.

pub mod builders;
pub mod plan_table;

pub use builders::*;
