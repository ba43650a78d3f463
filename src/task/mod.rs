//! Task: what an author needs to write a task and know that it works.
//!
//! `check` runs every check a task can fail before a batch (`assay task
//! check`, and every batch first, cached by a digest of the task's files),
//! so a mistake is bad input naming the file, the line where it can, what
//! to fix, and the compiler's own first error, instead of a batch that
//! stores nothing useful (`compiled 0/8`) or fails in generated code.
//! `skeleton` writes a task that passes it (`assay task new`).
//!
//! - `contract.rs` (pure): the harness contract as a generated probe, one
//!   item a line, and rustc's errors on it as the item and its fault.
//! - `committed.rs` (pure): the committed candidate's errors, told apart by
//!   the line they point at (its source, or the glue naming the entry).
//! - `cases.rs`: the cases' checker program and its answer.
//! - `inputs.rs`: the input probe, which finds a `run_input` that panics on
//!   a case's input in a process that runs no candidate.
//! - `mistake.rs`: `TaskError`, the one line that reports a mistake.
//! - `check.rs`: the build, the runs and the stamp.
//! - `load.rs`: the spec as every command loads it: `Spec::load`, then the
//!   committed candidate against the task's policy.
//! - `skeleton.rs`: the files of a new task.

mod cases;
mod check;
mod committed;
mod contract;
mod digest;
mod inputs;
mod load;
mod mistake;
mod skeleton;

pub use check::{check, harness_fault_in_batch, CacheUse, FirstFailure, Outcome, Report, Warning};
pub use contract::{ContractItem, Fault};
pub use digest::{is_harness_source, spec_digest};
pub use load::load;
pub use mistake::{HarnessFailed, Mistake, TaskError};
pub use skeleton::{write as write_skeleton, SkeletonError};
