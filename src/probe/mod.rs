//! Probe: does each candidate compile?
//!
//! One question per candidate, answered exactly as a build of that candidate
//! alone would answer it. A candidate's probe target is its module plus a
//! `main` that hands the entry function to `black_box`, so the probe checks
//! exactly what the scorer will link: the entry exists with the harness's
//! signature, and it and everything it calls get through code generation
//! and the linker (merely naming the constant lets code generation skip the
//! function, and a call to an undefined extern function would pass). Three
//! modes answer it, and the replay tool (`assay replay`) checks that they
//! agree:
//!
//! - [`ProbeMode::Wide`] (default, `wide`): one target per candidate, one
//!   `cargo build --keep-going`; cargo's JSON messages say which targets
//!   produced an artifact and which errors belong to which target. A
//!   candidate that cannot fail only at link time is built unlinked (an
//!   `rlib` example, code generation without the linker) and linked only
//!   when that build cannot settle its verdict (see `wide`).
//! - [`ProbeMode::Serial`] (`serial`): one `cargo build` per candidate, one
//!   after the other, as the old pipeline's probe did; kept for comparison.
//! - [`ProbeMode::Fast`] (`fast`, experimental): every candidate a module of
//!   one binary crate, built by one rustc; candidates with errors are removed
//!   and the rest built again until a pass is clean. Candidates whose
//!   verdict could depend on sharing a crate fall back to `wide` (see
//!   `fast::needs_own_crate`).
//!
//! Every mode runs `cargo build` (not `check`): post-monomorphization errors
//! and symbol clashes appear only at code generation and link time; wide
//! skips the link only where no link can fail.
//! [`stream`] runs any mode in waves while the draw is still running.

mod fast;
mod serial;
pub mod stream;
mod wide;

use std::fmt;
use std::str::FromStr;

use anyhow::Result;

use crate::package::{BuildReport, Package};

pub use fast::{floor as fast_floor, needs_own_crate};
pub use wide::{needs_link, probe_with as probe_wide_with, Scheme as WideScheme};

/// What the probe found for one candidate. The string form is stable and is
/// what the store keeps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProbeVerdict {
    Compiled,
    /// rustc rejected it; `codes` are its error codes, sorted and unique
    /// (some errors have none).
    CompileError {
        codes: Vec<String>,
    },
    /// Something the candidate does not own failed to build (the harness).
    DependencyFailure,
    /// The probe itself failed for this candidate; the diagnostics hold
    /// cargo's or rustc's own words.
    ProbeFailure(ProbeFailure),
}

/// Why the probe's infrastructure gave no answer for a candidate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeFailure {
    /// The disk filled up (`No space left on device`).
    DiskFull,
    /// cargo, rustc or the linker was killed by a signal (the OOM killer,
    /// a Ctrl-C, an operator).
    Killed,
    /// The build ran past [`crate::package::BUILD_TIMEOUT`] and was killed.
    Timeout,
    /// rustc hit an internal compiler error on this candidate.
    CompilerCrashed,
    /// cargo gave neither an artifact nor an error for the target, for no
    /// reason we recognize (stored as plain `probe_failure` by older
    /// versions).
    CargoFailed,
}

/// How the probe builds a batch's candidates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ProbeMode {
    #[default]
    Wide,
    Serial,
    Fast,
}

/// One candidate's probe result.
#[derive(Debug, Clone, PartialEq)]
pub struct Probed {
    pub idx: usize,
    pub verdict: ProbeVerdict,
    /// Rendered errors and warnings, as rustc printed them.
    pub diagnostics: String,
    pub warnings: usize,
}

/// A probe's results with what it took to get them.
#[derive(Debug, Clone, Default)]
pub struct ProbeOutcome {
    /// One per candidate, in the order they were given.
    pub probed: Vec<Probed>,
    pub stats: ProbeStats,
}

/// What a probe run did, beyond its verdicts.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProbeStats {
    /// cargo invocations.
    pub builds: usize,
    /// Fast mode: passes over the shared crate.
    pub passes: usize,
    /// Fast mode: candidates probed by `wide` instead, because sharing a
    /// crate could change their verdict or a pass could not be attributed.
    /// Wide mode: unlinked targets built again as binaries.
    pub fallbacks: usize,
    /// Dependency units cargo found fresh, summed over builds.
    pub deps_fresh: usize,
    /// Dependency units cargo rebuilt (name and package id); empty on a
    /// warm target directory.
    pub deps_rebuilt: Vec<String>,
    /// Streaming: the waves the candidates were probed in.
    pub waves: usize,
}

/// Probes `candidates` (batch index, source) in `mode`. Calls `on_progress`
/// with the number of candidates that have a verdict so far.
pub async fn probe(
    package: &Package,
    mode: ProbeMode,
    candidates: &[(usize, &str)],
    mut on_progress: impl FnMut(usize),
) -> Result<ProbeOutcome> {
    if candidates.is_empty() {
        return Ok(ProbeOutcome::default());
    }
    match mode {
        ProbeMode::Wide => wide::probe(package, candidates, &mut on_progress).await,
        ProbeMode::Serial => serial::probe(package, candidates, &mut on_progress).await,
        ProbeMode::Fast => fast::probe(package, candidates, &mut on_progress).await,
    }
}

impl ProbeVerdict {
    pub fn compiled(&self) -> bool {
        matches!(self, ProbeVerdict::Compiled)
    }
}

impl ProbeMode {
    pub const ALL: [ProbeMode; 3] = [ProbeMode::Wide, ProbeMode::Serial, ProbeMode::Fast];

    pub fn as_str(&self) -> &'static str {
        match self {
            ProbeMode::Wide => "wide",
            ProbeMode::Serial => "serial",
            ProbeMode::Fast => "fast",
        }
    }
}

impl fmt::Display for ProbeMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl serde::Serialize for ProbeMode {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl FromStr for ProbeMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ProbeMode::ALL
            .into_iter()
            .find(|m| m.as_str() == s)
            .ok_or_else(|| format!("unknown probe mode `{s}` (expected wide, serial or fast)"))
    }
}

impl ProbeStats {
    /// Adds one cargo build's dependency figures.
    fn add_build(&mut self, report: &BuildReport) {
        self.builds += 1;
        self.deps_fresh += report.deps_fresh;
        self.deps_rebuilt
            .extend(report.deps_rebuilt.iter().cloned());
    }

    /// Adds another run's figures (a wave, a fallback).
    pub fn absorb(&mut self, other: &ProbeStats) {
        self.builds += other.builds;
        self.passes += other.passes;
        self.fallbacks += other.fallbacks;
        self.deps_fresh += other.deps_fresh;
        self.deps_rebuilt.extend(other.deps_rebuilt.iter().cloned());
        self.waves += other.waves;
    }
}

/// The verdict of one target of a build that gave each candidate its own
/// target (wide and serial).
fn target_verdict(idx: usize, report: &BuildReport, target: &str) -> Probed {
    let diag = report.diagnostics.get(target).cloned().unwrap_or_default();
    let (verdict, diagnostics) = if diag.ices > 0 {
        (
            ProbeVerdict::ProbeFailure(ProbeFailure::CompilerCrashed),
            diag.rendered,
        )
    } else if report.built.contains_key(target) {
        (ProbeVerdict::Compiled, diag.rendered)
    } else if is_disk_full(&diag.rendered) {
        (
            ProbeVerdict::ProbeFailure(ProbeFailure::DiskFull),
            diag.rendered,
        )
    } else if diag.errors > 0 {
        let codes = diag.error_codes;
        (ProbeVerdict::CompileError { codes }, diag.rendered)
    } else if !report.dependency_errors.is_empty() {
        (
            ProbeVerdict::DependencyFailure,
            report.dependency_errors.concat(),
        )
    } else {
        let why = infrastructure_failure(report);
        let mut text = tail(&report.stderr, 4000).to_owned();
        if report.timed_out {
            text.push_str("\nassay: the build was killed at its time limit\n");
        }
        (ProbeVerdict::ProbeFailure(why), text)
    };
    Probed {
        idx,
        verdict,
        diagnostics,
        warnings: diag.warnings,
    }
}

/// Why a build gave a target neither an artifact nor an error.
fn infrastructure_failure(report: &BuildReport) -> ProbeFailure {
    if report.timed_out {
        ProbeFailure::Timeout
    } else if is_disk_full(&report.stderr) {
        ProbeFailure::DiskFull
    } else if report.signal.is_some()
        || report.stderr.contains("(signal: ")
        || report.stderr.contains("SIGKILL")
    {
        ProbeFailure::Killed
    } else {
        ProbeFailure::CargoFailed
    }
}

fn is_disk_full(text: &str) -> bool {
    text.contains("No space left on device") || text.contains("os error 28")
}

impl ProbeFailure {
    pub const ALL: [ProbeFailure; 5] = [
        ProbeFailure::DiskFull,
        ProbeFailure::Killed,
        ProbeFailure::Timeout,
        ProbeFailure::CompilerCrashed,
        ProbeFailure::CargoFailed,
    ];

    pub fn as_str(&self) -> &'static str {
        match self {
            ProbeFailure::DiskFull => "disk_full",
            ProbeFailure::Killed => "killed",
            ProbeFailure::Timeout => "timeout",
            ProbeFailure::CompilerCrashed => "compiler_crashed",
            ProbeFailure::CargoFailed => "cargo_failed",
        }
    }
}

impl fmt::Display for ProbeVerdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProbeVerdict::Compiled => f.write_str("compiled"),
            ProbeVerdict::CompileError { codes } if codes.is_empty() => {
                f.write_str("compile_error")
            }
            ProbeVerdict::CompileError { codes } => write!(f, "compile_error({})", codes.join(",")),
            ProbeVerdict::DependencyFailure => f.write_str("dependency_failure"),
            ProbeVerdict::ProbeFailure(why) => write!(f, "probe_failure({})", why.as_str()),
        }
    }
}

impl FromStr for ProbeVerdict {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let unknown = || format!("unknown probe verdict `{s}`");
        Ok(match s {
            "compiled" => ProbeVerdict::Compiled,
            "compile_error" => ProbeVerdict::CompileError { codes: Vec::new() },
            "dependency_failure" => ProbeVerdict::DependencyFailure,
            // The walking skeleton's string, before failures had kinds.
            "probe_failure" => ProbeVerdict::ProbeFailure(ProbeFailure::CargoFailed),
            _ => {
                if let Some(kind) = s
                    .strip_prefix("probe_failure(")
                    .and_then(|rest| rest.strip_suffix(')'))
                {
                    let why = ProbeFailure::ALL
                        .into_iter()
                        .find(|f| f.as_str() == kind)
                        .ok_or_else(unknown)?;
                    return Ok(ProbeVerdict::ProbeFailure(why));
                }
                let codes = s
                    .strip_prefix("compile_error(")
                    .and_then(|rest| rest.strip_suffix(')'))
                    .ok_or_else(unknown)?;
                ProbeVerdict::CompileError {
                    codes: codes.split(',').map(str::to_owned).collect(),
                }
            }
        })
    }
}

/// The last `max` bytes of `text`, cut at a char boundary.
fn tail(text: &str, max: usize) -> &str {
    let mut start = text.len().saturating_sub(max);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_round_trip_through_their_strings() {
        let mut all = vec![
            ProbeVerdict::Compiled,
            ProbeVerdict::CompileError { codes: vec![] },
            ProbeVerdict::CompileError {
                codes: vec!["E0308".into()],
            },
            ProbeVerdict::CompileError {
                codes: vec!["E0308".into(), "E0425".into()],
            },
            ProbeVerdict::DependencyFailure,
        ];
        all.extend(ProbeFailure::ALL.map(ProbeVerdict::ProbeFailure));
        for v in all {
            assert_eq!(v.to_string().parse::<ProbeVerdict>().unwrap(), v);
        }
        assert_eq!(
            ProbeVerdict::CompileError {
                codes: vec!["E0308".into(), "E0425".into()]
            }
            .to_string(),
            "compile_error(E0308,E0425)"
        );
        assert_eq!(
            ProbeVerdict::ProbeFailure(ProbeFailure::DiskFull).to_string(),
            "probe_failure(disk_full)"
        );
        assert_eq!(
            "probe_failure".parse::<ProbeVerdict>().unwrap(),
            ProbeVerdict::ProbeFailure(ProbeFailure::CargoFailed)
        );
        assert!("compiles".parse::<ProbeVerdict>().is_err());
        assert!("probe_failure(gremlins)".parse::<ProbeVerdict>().is_err());
    }

    #[test]
    fn modes_round_trip_through_their_strings() {
        for m in ProbeMode::ALL {
            assert_eq!(m.as_str().parse::<ProbeMode>().unwrap(), m);
        }
        assert!("narrow".parse::<ProbeMode>().is_err());
    }

    #[test]
    fn infrastructure_failures_are_told_apart() {
        let check = |report: BuildReport, want: ProbeFailure| {
            assert_eq!(
                target_verdict(0, &report, "c0").verdict,
                ProbeVerdict::ProbeFailure(want)
            );
        };
        check(
            BuildReport {
                stderr: "error: failed to write: No space left on device (os error 28)".into(),
                ..Default::default()
            },
            ProbeFailure::DiskFull,
        );
        check(
            BuildReport {
                signal: Some(9),
                ..Default::default()
            },
            ProbeFailure::Killed,
        );
        check(
            BuildReport {
                stderr: "process didn't exit successfully: `rustc ...` (signal: 9, SIGKILL: kill)"
                    .into(),
                ..Default::default()
            },
            ProbeFailure::Killed,
        );
        check(
            BuildReport {
                timed_out: true,
                signal: Some(9),
                ..Default::default()
            },
            ProbeFailure::Timeout,
        );
        check(BuildReport::default(), ProbeFailure::CargoFailed);
        let mut ice = BuildReport::default();
        ice.diagnostics.insert(
            "c0".into(),
            crate::package::TargetDiagnostics {
                errors: 1,
                ices: 1,
                ..Default::default()
            },
        );
        check(ice, ProbeFailure::CompilerCrashed);
    }

    #[test]
    fn tail_cuts_at_a_char_boundary() {
        assert_eq!(tail("abc", 10), "abc");
        assert_eq!(tail("abcdef", 3), "def");
        assert_eq!(tail("aé", 1), "");
    }
}
