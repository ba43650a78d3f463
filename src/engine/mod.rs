//! The loop and its entry points: a batch of a task ([`batch`]), a suite
//! ([`suite`]), their resume and interruption, the replay of stored
//! batches, concurrent sweeps, promotion, and the command-level glue that
//! resolves outputs and stores and maps outcomes to exit codes.

pub mod batch;
pub mod command_store;
mod draw;
pub mod drive;
pub mod errors;
pub mod exit;
pub mod interrupt;
pub mod outputs;
mod package;
pub mod promote;
pub mod replay;
pub mod resume;
mod rounds;
pub mod suite;
pub mod sweep;
