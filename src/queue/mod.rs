//! Work shared by lanes: the typed queue items ([`item`]), what they
//! carry of a task instead of paths ([`carry`]), and the lane that takes
//! them under a lease and runs them ([`lane`]).

pub mod carry;
pub mod enqueue;
pub mod item;
pub mod lane;
