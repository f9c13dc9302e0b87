//! Tests of the pure audit and the periodic audit, read like the spec: Jobs described in a line
//! with `builder::job`, the violations expected beside them; the conformance corpus as a set of
//! stored Jobs; fakes for the snapshot and the event sink.

mod builder;
mod corpus;
mod periodic;
mod planted;
