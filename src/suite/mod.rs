//! Suites: problem sets in MultiPL-E's schema, whose oracle is code.
//!
//! A problem is a prompt (doc comment and the entry's signature, body
//! open), tests (the rest of the program: the closing `}` and a `main` of
//! asserts) and stop tokens. A completion becomes a program by MultiPL-E's
//! rule ([`program`]); the program's `main` is split into cases where that
//! is safe ([`cases`]); what a run of it came to is a MultiPL-E status
//! beside assay's own, stricter verdict ([`status`]); a suite is reported as
//! pass@k with a paired bootstrap to compare two runs ([`passk`]).
//!
//! Invariants: this module does no IO except reading the problem and
//! completion files ([`problem`], [`completions`]); it spawns nothing,
//! talks to no server and runs no SQL. Building and running the programs
//! belongs to `build::exec` (the builds), `score` (the runs) and
//! `engine::suite` (the loop). docs/suites.md has the rules.

pub mod case_runs;
pub mod cases;
pub mod completions;
pub mod error;
pub mod module;
pub mod passk;
pub mod problem;
pub mod program;
pub mod report;
pub mod status;

pub use case_runs::CaseRuns;
pub use cases::{split_cases, Split, SplitProgram};
pub use completions::{CompletionRow, Completions};
pub use error::SuiteError;
pub use passk::{paired_bootstrap, pass_at_k, suite_pass_at_k, Interval};
pub use problem::{load_problems, Problem};
pub use program::{
    chat_program, chat_prompt, completion_program, cut_at_stop_tokens, entry_name, ProgramMode,
};
pub use report::{ProblemReport, SuiteComparison, SuiteReport};
pub use status::{CaseEnd, CompletionOutcome, Status};
