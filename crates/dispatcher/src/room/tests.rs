//! The room's tables: quantities, requests, filters, fits and reservations, and the
//! property that no sequence of fits and reservations overcommits a node.

mod builders;
mod filters;
mod fitting;
mod overcommit;
mod quantities;
mod views;
