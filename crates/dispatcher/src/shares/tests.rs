//! The shares' tables: teams, the DRF arithmetic, the order, the holds, the summary, and the
//! property that `next()` is always the brute-force first.

mod builders;
mod drf;
mod holds;
mod order;
mod property;
mod teams;
