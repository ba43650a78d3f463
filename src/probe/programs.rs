//! Suites' programs built one image each: each a binary target `cN` of its
//! own in the suite's package (`Package::open_suite`), whose root the
//! caller wrote, built in the wide scheme: one `cargo build --keep-going`
//! per [`TARGETS_PER_BUILD`] of them. This is `--build isolated`, the
//! reference the shared build (`exec::shared`) must agree with, and how a
//! program that cannot share an image (one syn cannot read, built as it
//! stands for MultiPL-E's reading) is built.
//!
//! The verdicts are the wide probe's (`target_verdict`); builds that fail
//! for a reason that can be transient are retried as `probe` retries them.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::Result;

use super::wide::{chunks, TARGETS_PER_BUILD};
use super::{target_verdict, ProbeFailure, ProbeRetry, ProbeStats, ProbeVerdict, Probed, MAX_RETRIES};
use crate::package::{ModuleKey, Package, Profile};

/// One program's probe verdict and, when it built, its binary.
#[derive(Debug, Clone)]
pub struct BuiltProgram {
    pub probed: Probed,
    pub image: Option<PathBuf>,
}

/// The target name of program `id` (unique within a suite): `cN`, the
/// candidates' pattern, so the compile wrapper confines its rustc to the
/// program's own files.
pub fn program_target(id: usize) -> String {
    ModuleKey::Candidate(id).name()
}

/// Builds the programs `ids`, each the target [`program_target`] whose
/// root the caller wrote. Results come in `ids`' order.
pub async fn build_programs(
    package: &Package,
    ids: &[usize],
) -> Result<(Vec<BuiltProgram>, ProbeStats)> {
    let mut stats = ProbeStats::default();
    let mut results: BTreeMap<usize, BuiltProgram> = BTreeMap::new();
    let mut pending: Vec<usize> = ids.to_vec();
    for attempt in 0..=MAX_RETRIES {
        let mut again = Vec::new();
        for range in chunks(pending.len(), TARGETS_PER_BUILD) {
            let names: Vec<String> = pending[range.clone()]
                .iter()
                .map(|id| program_target(*id))
                .collect();
            package.set_bins(names.iter().map(String::as_str))?;
            let report = package.build(Profile::Probe, &names, |_, _| {}).await?;
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
    Ok((
        ids.iter()
            .map(|id| results.remove(id).expect("every program has a verdict"))
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
