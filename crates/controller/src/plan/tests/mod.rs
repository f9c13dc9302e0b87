//! The table tests over `plan`: a Job in one line, its pods in the next, the expected plan
//! after; one `#[test]` a concern, one row a case. The runner is `testing::plan_table`.

mod lifecycle;
mod pods;
mod policy;
mod start_timeout;
mod success_policy;
