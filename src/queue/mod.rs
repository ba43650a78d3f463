//! Work shared by lanes: the typed queue items ([`item`]), what they
//! carry of a task instead of paths ([`carry`]), queueing ([`enqueue`]),
//! and the lane that takes them under a lease ([`lane`]) and places what
//! they carry on its disk ([`place`]).

pub mod carry;
pub mod enqueue;
pub mod item;
pub mod lane;
pub mod place;
