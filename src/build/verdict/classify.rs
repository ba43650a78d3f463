//! What a build's report says of one target built alone: its verdict,
//! the text a failing candidate's error file holds, and why a build that
//! gave a target neither an artifact nor an error failed.

use crate::build::package::BuildReport;
use crate::sandbox::compile::LimitHit;

use super::{ProbeFailure, ProbeVerdict};

/// The verdict, diagnostics and warning count one target of `report` gets
/// as the only unit in it.
pub(crate) fn verdict_of_target(
    report: &BuildReport,
    target: &str,
) -> (ProbeVerdict, String, usize) {
    let diag = report.diagnostics.get(target).cloned().unwrap_or_default();
    let limit = report.limit_hits.get(target).copied();
    let (verdict, diagnostics) =
        if let Some(hit) = limit.filter(|_| !report.built.contains_key(target)) {
            let verdict = match hit {
                LimitHit::Timeout => ProbeVerdict::CompileTimeout,
                LimitHit::OutOfMemory => ProbeVerdict::CompileOutOfMemory,
            };
            let mut text = diag.rendered;
            text.push_str(&format!(
                "assay: {verdict}: the compile of this candidate was stopped at its limit\n"
            ));
            (verdict, text)
        } else if diag.ices > 0 {
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
            (ProbeVerdict::DependencyFailure, report.dependency_text())
        } else {
            let why = infrastructure_failure(report);
            let mut text = tail(&report.stderr, 4000).to_owned();
            if report.timed_out {
                text.push_str("\nassay: the build was killed at its time limit\n");
            }
            (ProbeVerdict::ProbeFailure(why), text)
        };
    (verdict, diagnostics, diag.warnings)
}

/// Why a build gave a target neither an artifact nor an error.
pub(crate) fn infrastructure_failure(report: &BuildReport) -> ProbeFailure {
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
    fn infrastructure_failures_are_told_apart() {
        let check = |report: BuildReport, want: ProbeFailure| {
            assert_eq!(
                verdict_of_target(&report, "c0").0,
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
            crate::build::package::TargetDiagnostics {
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
