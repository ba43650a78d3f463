//! What the probe finds for one candidate, and what a probe run did: the
//! verdicts (stable strings in the store), why the infrastructure gave no
//! answer, and the figures of a run. Both the executor (`exec`), which
//! builds, and the probe, which orders builds, speak these; neither owns
//! them.

mod classify;

use std::fmt;
use std::str::FromStr;

use crate::build::package::BuildReport;
use crate::spec::Rule;

pub(crate) use classify::{infrastructure_failure, verdict_of_target};

/// How many times a candidate whose probe failed for a reason that can be
/// transient is probed again. Two: one more failure after a retry is
/// already unlikely to be chance, and a build that always dies should not
/// triple a batch's probe.
pub const MAX_RETRIES: usize = 2;

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
    /// The task's policy refuses its source; it was never built. The
    /// diagnostics name the rule and show the offending line.
    Forbidden(Rule),
    /// Its own compile ran past its CPU time limit and was stopped (a
    /// const-evaluation loop, say); its build-mates kept going.
    CompileTimeout,
    /// Its own compile ran out of its memory limit.
    CompileOutOfMemory,
}

/// Why the probe's infrastructure gave no answer for a candidate; its
/// stable string is the variant's snake_case name (in JSON too).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, strum::IntoStaticStr,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum ProbeFailure {
    /// The disk filled up (`No space left on device`).
    DiskFull,
    /// cargo, rustc or the linker was killed by a signal (the OOM killer,
    /// a Ctrl-C, an operator).
    Killed,
    /// The build ran past its time limit (`--build-timeout`, default
    /// [`crate::build::package::BUILD_TIMEOUT`]) and was killed.
    Timeout,
    /// rustc hit an internal compiler error on this candidate.
    CompilerCrashed,
    /// cargo gave neither an artifact nor an error for the target, for no
    /// reason we recognize (stored as plain `probe_failure` by older
    /// versions).
    CargoFailed,
}

/// What a probe run did, beyond its verdicts.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProbeStats {
    /// cargo invocations.
    pub builds: usize,
    /// Shared builds that ended with candidates' errors, so the rest was
    /// built again.
    pub passes: usize,
    /// Candidates narrowed out of a shared build (it passed its limits,
    /// failed in a way no module owned, or one candidate's statics would
    /// make the image unrunnable) and built in smaller groups or alone.
    pub fallbacks: usize,
    /// Dependency units cargo found fresh, summed over builds.
    pub deps_fresh: usize,
    /// Dependency units cargo rebuilt (name and package id); empty on a
    /// warm target directory.
    pub deps_rebuilt: Vec<String>,
    /// Streaming: the waves the candidates were probed in.
    pub waves: usize,
    /// Candidates probed again after a failure that can be transient, in
    /// the order it happened.
    pub retries: Vec<ProbeRetry>,
}

/// One candidate probed again.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ProbeRetry {
    /// The candidate's batch index.
    pub idx: usize,
    /// What the failed attempt said.
    pub after: ProbeFailure,
    /// 1 for the first retry.
    pub attempt: usize,
}

impl ProbeVerdict {
    pub fn compiled(&self) -> bool {
        matches!(self, ProbeVerdict::Compiled)
    }
}

impl ProbeStats {
    /// Adds one cargo build's dependency figures.
    pub(crate) fn add_build(&mut self, report: &BuildReport) {
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
        self.retries.extend(other.retries.iter().cloned());
    }
}

impl ProbeFailure {
    pub const ALL: [ProbeFailure; 5] = [
        ProbeFailure::DiskFull,
        ProbeFailure::Killed,
        ProbeFailure::Timeout,
        ProbeFailure::CompilerCrashed,
        ProbeFailure::CargoFailed,
    ];

    /// Whether another try could answer: the build was killed (the OOM
    /// killer, an operator) or cargo failed without saying anything about
    /// the target (a lock or I/O error, cargo itself crashing). A full
    /// disk stays full, a timeout would time out again, and an internal
    /// compiler error is the compiler's answer to this source.
    pub fn is_spurious(&self) -> bool {
        match self {
            ProbeFailure::Killed | ProbeFailure::CargoFailed => true,
            ProbeFailure::DiskFull | ProbeFailure::Timeout | ProbeFailure::CompilerCrashed => false,
        }
    }

    pub fn as_str(&self) -> &'static str {
        (*self).into()
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
            ProbeVerdict::Forbidden(rule) => write!(f, "forbidden({rule})"),
            ProbeVerdict::CompileTimeout => f.write_str("compile_timeout"),
            ProbeVerdict::CompileOutOfMemory => f.write_str("compile_out_of_memory"),
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
            "compile_timeout" => ProbeVerdict::CompileTimeout,
            "compile_out_of_memory" => ProbeVerdict::CompileOutOfMemory,
            // The walking skeleton's string, before failures had kinds.
            "probe_failure" => ProbeVerdict::ProbeFailure(ProbeFailure::CargoFailed),
            _ => {
                if let Some(rule) = s
                    .strip_prefix("forbidden(")
                    .and_then(|rest| rest.strip_suffix(')'))
                {
                    return Ok(ProbeVerdict::Forbidden(
                        rule.parse().map_err(|_| unknown())?,
                    ));
                }
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
            ProbeVerdict::CompileTimeout,
            ProbeVerdict::CompileOutOfMemory,
        ];
        all.extend(ProbeFailure::ALL.map(ProbeVerdict::ProbeFailure));
        all.extend(Rule::ALL.map(ProbeVerdict::Forbidden));
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
        assert_eq!(
            ProbeVerdict::Forbidden(Rule::UnsafeCode).to_string(),
            "forbidden(unsafe_code)"
        );
        assert!("forbidden(goto)".parse::<ProbeVerdict>().is_err());
        assert!("compiles".parse::<ProbeVerdict>().is_err());
        assert!("probe_failure(gremlins)".parse::<ProbeVerdict>().is_err());
    }

    #[test]
    fn only_failures_that_can_be_transient_are_retried() {
        let spurious: Vec<&str> = ProbeFailure::ALL
            .into_iter()
            .filter(ProbeFailure::is_spurious)
            .map(|f| f.as_str())
            .collect();
        assert_eq!(spurious, ["killed", "cargo_failed"]);
    }

    #[test]
    fn retries_round_trip_through_json() {
        let retries = vec![ProbeRetry {
            idx: 3,
            after: ProbeFailure::Killed,
            attempt: 1,
        }];
        let text = serde_json::to_string(&retries).unwrap();
        assert_eq!(text, r#"[{"idx":3,"after":"killed","attempt":1}]"#);
        assert_eq!(
            serde_json::from_str::<Vec<ProbeRetry>>(&text).unwrap(),
            retries
        );
        assert!(
            serde_json::from_str::<ProbeRetry>(r#"{"idx":3,"after":"gremlins","attempt":1}"#)
                .is_err()
        );
    }
}
