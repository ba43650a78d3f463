//! Work shared by lanes: the typed queue items ([`item`]) and the lane
//! that takes them under a lease and runs them ([`lane`]).

pub mod enqueue;
pub mod item;
pub mod lane;
