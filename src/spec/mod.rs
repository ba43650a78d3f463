//! The task spec: `specs/<task>/spec.toml`, parsed and validated before any
//! work starts.
//!
//! Every error names the file and the key (and the line, where the TOML
//! parser knows it). A `Spec` that exists is valid: its files were read, its
//! harness crate has a name, its entry is an identifier and its numbers are in
//! range, so later stages never re-check them. The one check that needs a
//! stage, the committed candidate against the task's policy, is
//! `task::load`'s, which every command loads a spec through.
//!
//! A leaf: `spec` owns the plain settings the stages read (`settings`) and
//! the ranges every number is held to (`bounds`), and imports no stage.
//!
//! - `load.rs`: the TOML's raw shape and the validator.
//! - `settings.rs`: the settings a spec or a flag chooses (dedup, pools and
//!   split, waves, compile limits, policy rules), with their stable
//!   strings and defaults.
//! - `repair.rs`: `[repair]`: rounds, parents, feedback and its caps, the
//!   prompt template, and which cases a model may see.
//! - `bounds.rs`: the ranges, shared by a spec's keys and the flags.

pub mod bounds;
mod load;
mod repair;
mod settings;
#[cfg(test)]
pub(crate) mod tests;
mod validator;

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use bounds::{
    check_build_timeout, check_candidates, check_rounds, check_token_budget, DEFAULT_PROCESSES,
    MAX_BUILD_TIMEOUT, MAX_CANDIDATES, MAX_COMPILE_CPU_S, MAX_COMPILE_MEMORY_MB, MAX_MEMORY_MB,
    MAX_PROCESSES, MAX_ROUNDS, MAX_TOKEN_BUDGET, MAX_WALL_MS, MAX_WAVE_SIZE, MAX_WAVE_WAIT,
    MIN_COMPILE_MEMORY_MB,
};
pub use repair::{
    Feedback, FeedbackLimits, ParentChoice, Piece, Repair, Slot, StopWhen, Template, VisibleCases,
    DEFAULT_TEMPLATE,
};
pub use settings::{
    CompileLimits, DedupBy, Edition, Policy, PoolChoice, Rule, SplitMode, WavePolicy,
    DEFAULT_COMPILE_CPU_SECS, DEFAULT_COMPILE_MEMORY_BYTES,
};
pub(crate) use validator::line_of;

use load::RawSpec;
use validator::{read, Validator};

/// A validated task.
#[derive(Debug, Clone)]
pub struct Spec {
    /// The file the spec was read from.
    pub path: PathBuf,
    /// The task's folder; every relative path in the spec is relative to it.
    pub dir: PathBuf,
    pub name: String,
    pub prompt: String,
    /// The file the prompt was read from.
    pub prompt_path: PathBuf,
    pub harness: Harness,
    /// The function every candidate must define.
    pub entry: String,
    pub cases: Cases,
    pub committed: Committed,
    pub draw: Draw,
    pub admit: AdmitRule,
    pub limits: Limits,
    /// Which fingerprint groups candidates (`[dedup] by`, default exact).
    pub dedup_by: DedupBy,
    /// The task's own probe settings (`[probe]`); flags override them.
    pub probe: ProbeSpec,
    /// What candidates' sources may contain (`[policy]`; every rule
    /// enforced unless relaxed there).
    pub policy: Policy,
    /// Repair rounds and the cases a model may see (`[repair]`).
    pub repair: Repair,
}

/// What a task may set about its probe (`[probe]`, every key optional):
/// a task with a heavy harness may need longer builds, one whose pools
/// answer slowly smaller or shorter waves. `None`: the default.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ProbeSpec {
    /// `compile_cpu_s` and `compile_memory_mb`: what one target's rustc
    /// may use (`sandbox::compile`).
    pub compile_limits: CompileLimits,
    /// `build_timeout_s`: how long one nested cargo build may run.
    pub build_timeout: Option<Duration>,
    /// `wave_size`: a streaming wave starts once this many candidates wait.
    pub wave_size: Option<usize>,
    /// `wave_wait_ms`: or once the oldest has waited this long.
    pub wave_wait: Option<Duration>,
}

/// The harness crate a task's candidates are compiled against.
#[derive(Debug, Clone)]
pub struct Harness {
    /// Absolute path of the crate's directory.
    pub dir: PathBuf,
    /// The package name, as a dependency key (`absolute-harness`).
    pub package: String,
    /// The library's crate name, as code names it (`absolute_harness`).
    pub crate_name: String,
    /// The library's root file (`[lib] path`, else `src/lib.rs`), where
    /// the contract's items are looked for when a check names their line.
    pub root: PathBuf,
}

#[derive(Debug, Clone)]
pub struct Cases {
    pub path: PathBuf,
    pub text: String,
    /// Number of cases (non-blank lines) in the file.
    pub count: usize,
    /// Each case's `name` field, where it has one, in file order.
    pub names: Vec<Option<String>>,
}

#[derive(Debug, Clone)]
pub struct Committed {
    pub path: PathBuf,
    pub source: String,
}

#[derive(Debug, Clone)]
pub struct Draw {
    /// Default number of candidates in a batch.
    pub n: usize,
    /// The recorded replay corpus.
    pub replay: PathBuf,
    /// The pools to draw from (`["fast=16", "flash=16"]`); empty: replay.
    pub pools: Vec<PoolChoice>,
    /// Fixed shares or a race; `None`: fixed.
    pub split: Option<SplitMode>,
    /// The prompt asks for exactly one code block: a stream may be closed
    /// as soon as it holds the fence extraction takes.
    pub single_fence: bool,
}

/// What admits a candidate.
#[derive(Debug, Clone, PartialEq)]
pub struct AdmitRule {
    /// Minimum passed/total, in `0.0..=1.0`.
    pub min_score: f64,
    /// Case positions (0-based, file order) a candidate must pass wherever
    /// the committed candidate passes them (`[admit] guard`, by case name).
    pub guard: Vec<usize>,
}

/// Limits on one candidate's scoring run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    /// Wall time for all of one candidate's cases together.
    pub wall: Duration,
    /// Whether a case that loops or crashes costs the rest of the run
    /// (`none`) or only itself (`per_case`).
    pub isolation: Isolation,
    /// With per-case isolation, the wall time of one case.
    pub case_wall: Duration,
    /// Processes (and threads) one run may hold at once.
    pub processes: u64,
    /// Address-space limit of one run.
    pub memory_bytes: u64,
}

/// How far one case's failure reaches (`[limits] isolation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Isolation {
    /// All cases run in one child; a loop or crash ends the run there.
    #[default]
    None,
    /// A case that loops, crashes or exits fails alone: the run goes on in
    /// a fresh child from the next case.
    PerCase,
}

impl Isolation {
    pub fn as_str(&self) -> &'static str {
        match self {
            Isolation::None => "none",
            Isolation::PerCase => "per_case",
        }
    }
}

/// Why a spec was refused. Every variant names the file.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    #[error("{file}: cannot read")]
    Read {
        file: PathBuf,
        source: std::io::Error,
    },
    #[error("{file}{}: {message}", line.map(|l| format!(":{l}")).unwrap_or_default())]
    Syntax {
        file: PathBuf,
        line: Option<usize>,
        message: String,
    },
    #[error("{file}: `{key}` names {path}, which {problem}")]
    MissingFile {
        file: PathBuf,
        key: &'static str,
        path: PathBuf,
        problem: &'static str,
    },
    /// A path given as a task that is a file other than a spec (the
    /// cases, the prompt, ...).
    #[error("{path}: not a task: a task is a folder holding spec.toml, or that spec.toml")]
    NotATask { path: PathBuf },
    #[error("{file}{}: `{key}`: {message}", line.map(|l| format!(":{l}")).unwrap_or_default())]
    Invalid {
        file: PathBuf,
        line: Option<usize>,
        key: &'static str,
        message: String,
    },
}

impl Spec {
    /// Reads and validates a spec. `path` is a `spec.toml` or a folder holding one.
    /// Commands load through `task::load`, which also holds the committed
    /// candidate to the task's policy.
    pub fn load(path: &Path) -> Result<Spec, SpecError> {
        let is_dir = path.is_dir();
        let names_a_file = path.extension().is_some_and(|e| e == "toml") && !is_dir;
        if !is_dir && !names_a_file && path.exists() {
            return Err(SpecError::NotATask {
                path: path.to_path_buf(),
            });
        }
        let file = if names_a_file {
            path.to_path_buf()
        } else {
            path.join("spec.toml")
        };
        let text = read(&file)?;
        let raw: RawSpec = toml::from_str(&text).map_err(|e| SpecError::Syntax {
            file: file.clone(),
            line: e.span().map(|s| line_of(&text, s.start)),
            message: crate::support::input::one_line(e.message()),
        })?;
        let dir = file
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."));
        let dir = std::path::absolute(&dir).map_err(|source| SpecError::Read {
            file: file.clone(),
            source,
        })?;
        Validator { file, dir, text }.validate(raw)
    }
}

impl fmt::Display for AdmitRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "score >= {}", self.min_score)?;
        if !self.guard.is_empty() {
            write!(f, ", no regression on {} guard cases", self.guard.len())?;
        }
        Ok(())
    }
}
