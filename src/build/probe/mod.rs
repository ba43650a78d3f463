//! Probe: does each candidate compile?
//!
//! One question per candidate, answered exactly as a build of that candidate
//! alone would answer it, and answered by the build that makes the image
//! the candidate is scored from: a batch compiles each candidate once. A
//! candidate's image is the task's scoring image (`image`): its
//! module, the harness and the runner, and a `main` that runs the entry of
//! the candidate its first argument names, so the probe checks exactly
//! what the run will execute, through code generation and the linker. Two
//! modes answer it, and the replay tool (`assay replay`) checks that they
//! agree:
//!
//! - [`ProbeMode::Shared`] (default, `shared`): a wave's candidates are
//!   modules of one crate built by one rustc (`exec::shared`): errors are
//!   attributed to the module their primary span points into, candidates
//!   with errors leave and the rest is built again, and a build that passes
//!   its limits or fails in a way no module owns is narrowed by halves down
//!   to the candidate alone. Safe only under the default policy; a task that
//!   relaxes its `[policy]` gets one image per candidate instead
//!   (`exec::isolated`, a hundred targets to a cargo build).
//! - [`ProbeMode::Serial`] (`serial`): one `cargo build` per candidate, one
//!   after the other, each candidate an image of its own: the reference the
//!   shared build is checked against (`assay replay 2 --modes shared,serial`).
//!
//! [`stream`] runs either mode in waves while the draw is still running.
//!
//! A build that fails for a reason that can be transient (cargo or rustc
//! killed by a signal, cargo failing without a word about the target: a
//! lock or I/O error) gives its candidates no answer, so they are built
//! again, at most [`MAX_RETRIES`] times; compile errors, a full disk, a
//! timeout and an internal compiler error would only fail again, and are
//! never retried. Each retry is logged and kept in [`ProbeStats::retries`].
//! [`toolchain`] asks the probe's own toolchain what it is, so every probe
//! run records it.

mod image;
pub mod stream;
mod toolchain;

use std::collections::BTreeMap;
use std::sync::Arc;

use anyhow::Result;
use clap::ValueEnum;
use serde::Serialize;
use strum::{Display, EnumString, IntoStaticStr};

use crate::build::exec::{Image, Settled, SharedBuild, Units};
use crate::build::package::{ModuleKey, Package};
use crate::support::testpoint;

pub use crate::build::verdict::{ProbeFailure, ProbeRetry, ProbeStats, ProbeVerdict, MAX_RETRIES};
pub use image::{image_name, TaskLayout};
pub use toolchain::{toolchain, Toolchain};

/// How the probe builds a batch's candidates. Its stable string (stored
/// with each probe run, and the flag's value) is the variant's snake_case
/// name; a retired mode's name is refused with what replaced it.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Default,
    Serialize,
    Display,
    EnumString,
    IntoStaticStr,
    ValueEnum,
)]
#[serde(rename_all = "snake_case")]
#[strum(
    serialize_all = "snake_case",
    parse_err_ty = String,
    parse_err_fn = not_a_probe_mode
)]
pub enum ProbeMode {
    /// A wave's candidates built as one image, each candidate once for the
    /// probe and the score, narrowed when one spoils it: what a batch runs.
    #[default]
    Shared,
    /// One build per candidate, one after the other: the reference the
    /// shared build is checked against.
    Serial,
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
    /// The image each candidate that compiled runs from.
    pub images: BTreeMap<usize, Arc<Image>>,
    pub stats: ProbeStats,
}

/// Probes `candidates` (batch index, source) in `mode`. Candidates the
/// package's policy refuses get `forbidden(rule)` and are never built; the
/// others are probed, probing again the
/// candidates whose build failed for a reason that can be transient (see
/// [`ProbeFailure::is_spurious`]). Calls `on_progress` with the number of
/// candidates that have a verdict so far.
pub async fn probe(
    package: &Package,
    mode: ProbeMode,
    candidates: &[(usize, &str)],
    mut on_progress: impl FnMut(usize),
) -> Result<ProbeOutcome> {
    if candidates.is_empty() {
        return Ok(ProbeOutcome::default());
    }
    // The policy first: a refused candidate is never built.
    let (refused, allowed) = check_policy(package, candidates);
    if !refused.is_empty() {
        let base = refused.len();
        on_progress(base);
        let mut outcome = probe_checked(package, mode, &allowed, |n| on_progress(base + n)).await?;
        outcome.probed.extend(refused);
        let order = |idx: usize| candidates.iter().position(|(i, _)| *i == idx);
        outcome.probed.sort_by_key(|p| order(p.idx));
        return Ok(outcome);
    }
    probe_checked(package, mode, candidates, on_progress).await
}

/// The candidates the package's policy refuses, with their verdicts, and
/// the others.
pub(crate) fn check_policy<'a>(
    package: &Package,
    candidates: &[(usize, &'a str)],
) -> (Vec<Probed>, Vec<(usize, &'a str)>) {
    let mut refused = Vec::new();
    let mut allowed = Vec::new();
    for &(idx, source) in candidates {
        match crate::text::policy::check(package.policy(), source) {
            Ok(()) => allowed.push((idx, source)),
            Err(violation) => {
                tracing::debug!(candidate = idx, rule = %violation.rule, "refused by the policy");
                refused.push(Probed {
                    idx,
                    verdict: ProbeVerdict::Forbidden(violation.rule),
                    diagnostics: violation.render(&ModuleKey::Candidate(idx).file(), source),
                    warnings: 0,
                });
            }
        }
    }
    (refused, allowed)
}

/// [`probe`] of candidates the policy allows.
async fn probe_checked(
    package: &Package,
    mode: ProbeMode,
    candidates: &[(usize, &str)],
    mut on_progress: impl FnMut(usize),
) -> Result<ProbeOutcome> {
    if candidates.is_empty() {
        return Ok(ProbeOutcome::default());
    }
    // Tests arm `kill@probe.build` here to have this probe's first cargo
    // killed, the way the OOM killer would.
    testpoint::reached("probe.build").await;
    let mut outcome = probe_once(package, mode, candidates, &mut on_progress).await?;
    for attempt in 1..=MAX_RETRIES {
        let failed: Vec<(usize, ProbeFailure)> = outcome
            .probed
            .iter()
            .filter_map(|p| match p.verdict {
                ProbeVerdict::ProbeFailure(why) if why.is_spurious() => Some((p.idx, why)),
                _ => None,
            })
            .collect();
        if failed.is_empty() {
            break;
        }
        let again: Vec<(usize, &str)> = candidates
            .iter()
            .filter(|(idx, _)| failed.iter().any(|(f, _)| f == idx))
            .copied()
            .collect();
        // One warning per kind of failure, naming its candidates: a killed
        // wave of 32 is one event, not 32.
        let mut kinds: Vec<ProbeFailure> = Vec::new();
        for (_, why) in &failed {
            if !kinds.contains(why) {
                kinds.push(*why);
            }
        }
        for kind in kinds {
            let idxs: Vec<usize> = failed
                .iter()
                .filter(|(_, why)| *why == kind)
                .map(|(idx, _)| *idx)
                .collect();
            let said = outcome
                .probed
                .iter()
                .find(|p| p.idx == idxs[0])
                .map(|p| last_line(&p.diagnostics))
                .unwrap_or_default();
            tracing::warn!(
                failure = kind.as_str(),
                candidates = ?idxs,
                said,
                attempt,
                of = MAX_RETRIES,
                "probe build failed for a reason that can be transient; probing again"
            );
        }
        outcome
            .stats
            .retries
            .extend(failed.iter().map(|(idx, why)| ProbeRetry {
                idx: *idx,
                after: *why,
                attempt,
            }));
        let retry = probe_once(package, mode, &again, &mut |_| {}).await?;
        outcome.stats.absorb(&retry.stats);
        outcome.images.extend(retry.images);
        for p in retry.probed {
            if let Some(slot) = outcome.probed.iter_mut().find(|q| q.idx == p.idx) {
                *slot = p;
            }
        }
    }
    if !outcome.stats.retries.is_empty() {
        on_progress(candidates.len());
    }
    Ok(outcome)
}

/// One probe of `candidates` in `mode`: their modules written, then built
/// into images (shared, or one each), calling `on_progress` as verdicts
/// come.
async fn probe_once(
    package: &Package,
    mode: ProbeMode,
    candidates: &[(usize, &str)],
    on_progress: &mut impl FnMut(usize),
) -> Result<ProbeOutcome> {
    for (idx, source) in candidates {
        package.write_module(&ModuleKey::Candidate(*idx), source)?;
    }
    let layout = TaskLayout::of(package)?;
    let keys: Vec<ModuleKey> = candidates
        .iter()
        .map(|(idx, _)| ModuleKey::Candidate(*idx))
        .collect();
    let mut stats = ProbeStats::default();
    let mut by_idx: BTreeMap<usize, Probed> = BTreeMap::new();
    let mut images = BTreeMap::new();
    let mut take = |s: Settled| {
        let ModuleKey::Candidate(idx) = s.key else {
            return;
        };
        if let Some(image) = s.image {
            images.insert(idx, image);
        }
        by_idx.insert(
            idx,
            Probed {
                idx,
                verdict: s.verdict,
                diagnostics: s.diagnostics,
                warnings: s.warnings,
            },
        );
        on_progress(by_idx.len());
    };
    let shared = SharedBuild::new(package, &layout, package.run_memory());
    crate::build::exec::wave::build(&shared, mode.into(), &keys, &mut stats, &mut take).await?;
    Ok(ProbeOutcome {
        probed: candidates
            .iter()
            .filter_map(|(idx, _)| by_idx.remove(idx))
            .collect(),
        images,
        stats,
    })
}

/// The last non-blank line of `text`, for a log line.
fn last_line(text: &str) -> &str {
    text.lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or_default()
}

impl From<ProbeMode> for Units {
    fn from(mode: ProbeMode) -> Units {
        match mode {
            ProbeMode::Shared => Units::Shared,
            ProbeMode::Serial => Units::Isolated { per_build: 1 },
        }
    }
}

impl ProbeMode {
    pub const ALL: [ProbeMode; 2] = [ProbeMode::Shared, ProbeMode::Serial];

    pub fn as_str(&self) -> &'static str {
        (*self).into()
    }
}

/// Why a name is no probe mode: a retired one names its replacement.
fn not_a_probe_mode(s: &str) -> String {
    match s {
        "wide" | "fast" => format!(
            "probe mode `{s}` was replaced by `shared` (the default), which builds \
             each candidate once for the probe and the score"
        ),
        _ => format!("unknown probe mode `{s}` (expected shared or serial)"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_round_trip_through_their_strings() {
        for m in ProbeMode::ALL {
            assert_eq!(m.as_str().parse::<ProbeMode>().unwrap(), m);
        }
        assert!("narrow".parse::<ProbeMode>().is_err());
    }
}
