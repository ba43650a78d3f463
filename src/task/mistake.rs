//! A mistake in a task and the one line that reports it: the file (and
//! line, where known), what is wrong, what to do about it, and the
//! compiler's own first error where there is one.

use std::fmt;
use std::path::PathBuf;

use super::contract::{ContractItem, Fault};
use crate::score::{HarnessFault, HarnessFn};

/// A task that cannot be used as written: bad input (exit code 2).
#[derive(Debug, thiserror::Error)]
#[error("{}{}: {mistake}", file.display(), line.map(|l| format!(":{l}")).unwrap_or_default())]
pub struct TaskError {
    pub file: PathBuf,
    pub line: Option<usize>,
    pub mistake: Mistake,
}

/// A harness fault a batch met in its runs, after it had stored work: the
/// batch fails (exit 1, not bad input: the batch exists) with the line its
/// check would have given, and the run that met it is stored as no one's.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct HarnessFailed(pub TaskError);

/// What is wrong. `compiler` is rustc's first error, on one line.
#[derive(Debug)]
pub enum Mistake {
    /// The prompt file holds nothing but whitespace.
    EmptyPrompt,
    /// The harness crate itself does not compile.
    HarnessDoesNotBuild { compiler: String },
    /// A dependency of the harness does not compile.
    DependencyDoesNotBuild { compiler: String },
    /// An item of the contract is missing or does not fit.
    Contract {
        item: ContractItem,
        fault: Fault,
        /// The declaration to write: docs/tasks.md's, or for `Entry` one
        /// read from the committed candidate.
        declaration: String,
        compiler: String,
    },
    /// The committed candidate defines no function named by `entry`.
    NoEntry { entry: String, compiler: String },
    /// The committed candidate's entry is not of the harness's `Entry` type.
    EntryType { entry: String, compiler: String },
    /// The committed candidate has an error in its own source.
    CommittedDoesNotBuild { compiler: String },
    /// Harness code panicked on a case (the file and line are the case's).
    HarnessPanics {
        fault: HarnessFault,
        /// The case's `name`, where it has one.
        name: Option<String>,
    },
    /// Generated code that links the harness did not build, though the
    /// contract's probe did: the harness's, most likely.
    Unexplained {
        what: &'static str,
        compiler: String,
    },
}

impl fmt::Display for Mistake {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Mistake::EmptyPrompt => f.write_str(
                "the prompt is empty: write what the entry must do, its exact signature, \
                 and ask for one Rust code block (docs/tasks.md)",
            ),
            Mistake::HarnessDoesNotBuild { compiler } => {
                write!(f, "the harness does not compile: fix it ({compiler})")
            }
            Mistake::DependencyDoesNotBuild { compiler } => write!(
                f,
                "a dependency of the harness does not compile: pin another version of it \
                 ({compiler})"
            ),
            Mistake::Contract {
                item,
                fault,
                declaration,
                compiler,
            } => {
                let name = item.name();
                let kind = item.kind();
                match fault {
                    Fault::Missing => write!(
                        f,
                        "no {kind} `{name}`: add `{declaration}` as docs/tasks.md shows"
                    ),
                    Fault::WrongKind => write!(
                        f,
                        "`{name}` is not a {kind}: the contract needs `{declaration}` as \
                         docs/tasks.md shows"
                    ),
                    Fault::Private => write!(
                        f,
                        "`{name}` is not public at the crate's root: make it `{declaration}` \
                         as docs/tasks.md shows"
                    ),
                    Fault::WrongSignature => write!(
                        f,
                        "`{name}` does not have the contract's signature: make it \
                         `{declaration}` as docs/tasks.md shows"
                    ),
                }?;
                write!(f, " ({compiler})")
            }
            Mistake::NoEntry { entry, compiler } => write!(
                f,
                "no function `{entry}` (the spec's `entry`): define `pub fn {entry}` with the \
                 harness's `Entry` type, or set `entry` in the spec to the function's name \
                 ({compiler})"
            ),
            Mistake::EntryType { entry, compiler } => write!(
                f,
                "`{entry}` does not have the harness's `Entry` type: change its signature or \
                 the harness's `Entry` so they agree ({compiler})"
            ),
            Mistake::CommittedDoesNotBuild { compiler } => write!(
                f,
                "the committed candidate does not compile against the harness: fix it, it is \
                 every batch's reference ({compiler})"
            ),
            Mistake::HarnessPanics { fault, name } => {
                let case = match name {
                    Some(name) => format!("case `{name}`"),
                    None => "this case".to_owned(),
                };
                let fix = match fault.function {
                    HarnessFn::RunInput => {
                        "fix `run_input` so that it decodes what `input_line` encodes, or the case"
                    }
                    HarnessFn::Judge => {
                        "fix `judge`: it must say false of an answer it cannot accept, never panic"
                    }
                };
                write!(
                    f,
                    "the harness's `{}` panics on {case} ({}): {}; a fault of the harness, not \
                     of any candidate: {fix}",
                    fault.function, fault.given, fault.panic
                )
            }
            Mistake::Unexplained { what, compiler } => write!(
                f,
                "{what} does not compile, though the harness fits the contract: check the \
                 harness against docs/tasks.md ({compiler})"
            ),
        }
    }
}
