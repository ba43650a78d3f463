//! Suites' programs: whole programs, each a binary target of its own in the
//! suite's package (`Package::open_suite`), built linked in the wide
//! scheme: one `cargo build --keep-going` per [`TARGETS_PER_BUILD`] of
//! them, across every problem of the suite. A program's binary is the image
//! its runs execute, so a suite has no separate score build: the probe's
//! artifact is the scorer, and no program's code is in another's image.
//!
//! The verdicts are the wide probe's (`target_verdict`), checked against
//! the package's policy first; builds that fail for a reason that can be
//! transient are retried as `probe` retries them.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::Result;

use super::wide::{chunks, TARGETS_PER_BUILD};
use super::{
    check_policy, target_verdict, ProbeFailure, ProbeRetry, ProbeStats, ProbeVerdict, Probed,
    MAX_RETRIES,
};
use crate::package::{ModuleKey, Package, Profile};

/// One program's probe verdict and, when it built, its binary.
#[derive(Debug, Clone)]
pub struct BuiltProgram {
    pub probed: Probed,
    pub image: Option<PathBuf>,
}

/// The target name of program `id` (unique within a suite): `cN`, the
/// candidates' pattern, so the compile wrapper confines its rustc to the
/// program's own file.
pub fn program_target(id: usize) -> String {
    ModuleKey::Candidate(id).name()
}

/// Builds `programs` (suite-wide id, program text), each as its own binary.
/// Results come in the programs' order. `on_built` is called with the
/// number of programs that have a verdict so far.
pub async fn build_programs(
    package: &Package,
    programs: &[(usize, &str)],
    mut on_built: impl FnMut(usize),
) -> Result<(Vec<BuiltProgram>, ProbeStats)> {
    let mut stats = ProbeStats::default();
    let (refused, allowed) = check_policy(package, programs);
    let mut results: BTreeMap<usize, BuiltProgram> = refused
        .into_iter()
        .map(|probed| {
            (
                probed.idx,
                BuiltProgram {
                    probed,
                    image: None,
                },
            )
        })
        .collect();
    for (id, program) in &allowed {
        package.write_program(&program_target(*id), program)?;
    }
    let mut pending: Vec<usize> = allowed.iter().map(|(id, _)| *id).collect();
    let mut done = results.len();
    on_built(done);
    for attempt in 0..=MAX_RETRIES {
        let mut again = Vec::new();
        for range in chunks(pending.len(), TARGETS_PER_BUILD) {
            let names: Vec<String> = pending[range.clone()]
                .iter()
                .map(|id| program_target(*id))
                .collect();
            package.set_bins(names.iter().map(String::as_str))?;
            let report = package
                .build(Profile::Probe, &names, |_, _| {
                    done += 1;
                    on_built(done);
                })
                .await?;
            stats.add_build(&report);
            for (&id, name) in pending[range].iter().zip(&names) {
                let probed = target_verdict(id, &report, name);
                if let ProbeVerdict::ProbeFailure(why) = probed.verdict {
                    if why.is_spurious() && attempt < MAX_RETRIES {
                        again.push((id, why));
                        continue;
                    }
                }
                let image = report.built.get(name).filter(|_| probed.verdict.compiled());
                results.insert(
                    id,
                    BuiltProgram {
                        image: image.cloned(),
                        probed,
                    },
                );
            }
        }
        if again.is_empty() {
            break;
        }
        warn_retry(&again, attempt + 1);
        stats
            .retries
            .extend(again.iter().map(|&(idx, after)| ProbeRetry {
                idx,
                after,
                attempt: attempt + 1,
            }));
        pending = again.into_iter().map(|(id, _)| id).collect();
    }
    on_built(programs.len());
    Ok((
        programs
            .iter()
            .map(|(id, _)| results.remove(id).expect("every program has a verdict"))
            .collect(),
        stats,
    ))
}

fn warn_retry(again: &[(usize, ProbeFailure)], attempt: usize) {
    let ids: Vec<usize> = again.iter().map(|(id, _)| *id).collect();
    tracing::warn!(
        programs = ?ids,
        failure = again[0].1.as_str(),
        attempt,
        of = MAX_RETRIES,
        "program builds failed for a reason that can be transient; building again"
    );
}
