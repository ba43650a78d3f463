//! One image per unit: each unit the only module of a crate of its own,
//! a target of its own ([`Layout::isolated_target`]), many such targets in
//! one `cargo build --keep-going` ([`TARGETS_PER_BUILD`] at most). This is
//! the build for a policy a task relaxes (sharing an image is then not
//! safe), `--build isolated` for suites, and, one target per build, the
//! serial probe: the references the shared build must agree with.
//!
//! A target's verdict is what its build says of it alone
//! (`probe::verdict_of_target`); failures that can be transient are built
//! again, at most [`MAX_RETRIES`] times.

use std::collections::BTreeMap;
use std::sync::Arc;

use anyhow::{Context, Result};

use super::shared::{Image, Layout, Settled};
use crate::build::package::{ModuleKey, Package};
use crate::build::verdict::{
    verdict_of_target, ProbeFailure, ProbeRetry, ProbeStats, ProbeVerdict, MAX_RETRIES,
};

/// How many targets one cargo build holds at most; more are split into
/// builds of about equal size, one after the other (they share the target
/// directory, whose lock would serialise them anyway). cargo's own cost per
/// unit grows with the number of targets in the manifest: each unit's job
/// keeps its own copy of the parsed manifest (about 1.7 KB per target), and
/// it forks every rustc, copying and then tearing down page tables in
/// proportion to its size; at 1000 targets in one build that cost more CPU
/// in the kernel than rustc itself, at 100 about 5 ms per unit.
pub const TARGETS_PER_BUILD: usize = 100;

/// Builds each of `units` (module files written) as an image of its own,
/// `per_build` targets to a cargo build, calling `settled` as each build's
/// units are known. A build killed at its time limit (`--build-timeout`)
/// ends only the targets that caused it: those it had not finished are
/// built again, in halves, down to each alone, whose verdict is then its
/// own.
pub async fn build(
    package: &Package,
    layout: &impl Layout,
    units: &[ModuleKey],
    per_build: usize,
    stats: &mut ProbeStats,
    mut settled: impl FnMut(Settled),
) -> Result<()> {
    for key in units {
        package.write_bin(
            &layout.isolated_target(key),
            &layout.root(std::slice::from_ref(key)),
        )?;
    }
    // Builds to do, with the retries each has had; the first is built first.
    let mut queue: Vec<(Vec<ModuleKey>, usize)> = chunks(units.len(), per_build)
        .map(|range| (units[range].to_vec(), 0))
        .collect();
    queue.reverse();
    while let Some((keys, attempt)) = queue.pop() {
        let names: BTreeMap<String, &ModuleKey> = keys
            .iter()
            .map(|k| (layout.isolated_target(k), k))
            .collect();
        let targets: Vec<String> = names.keys().cloned().collect();
        // Waves built side by side take turns, as shared builds do.
        let lane = package
            .lane()
            .acquire()
            .await
            .context("the package's build lane closed")?;
        package.add_bins(targets.iter().map(String::as_str))?;
        let report = package.build(layout.profile(), &targets, |_, _| {}).await?;
        drop(lane);
        stats.add_build(&report);
        let mut again = Vec::new();
        let mut unfinished = Vec::new();
        for (name, key) in names {
            let (verdict, diagnostics, warnings) = verdict_of_target(&report, &name);
            match verdict {
                ProbeVerdict::ProbeFailure(ProbeFailure::Timeout) if keys.len() > 1 => {
                    unfinished.push(key.clone());
                    continue;
                }
                ProbeVerdict::ProbeFailure(why) if why.is_spurious() && attempt < MAX_RETRIES => {
                    again.push((key.clone(), why));
                    continue;
                }
                _ => {}
            }
            let image = report
                .built
                .get(&name)
                .filter(|_| verdict.compiled())
                .map(|path| {
                    Arc::new(Image {
                        path: path.clone(),
                        members: vec![key.clone()],
                    })
                });
            settled(Settled {
                key: key.clone(),
                verdict,
                diagnostics,
                warnings,
                image,
            });
        }
        if !unfinished.is_empty() {
            tracing::info!(
                units = unfinished.len(),
                "a build ran past its time limit; its unfinished targets are built again, in halves"
            );
            stats.fallbacks += unfinished.len();
            let back = unfinished.split_off(unfinished.len() / 2);
            for half in [back, unfinished] {
                if !half.is_empty() {
                    queue.push((half, attempt));
                }
            }
        }
        if !again.is_empty() {
            tracing::warn!(
                units = again.len(),
                failure = again[0].1.as_str(),
                attempt = attempt + 1,
                of = MAX_RETRIES,
                "builds failed for a reason that can be transient; probing again"
            );
            stats
                .retries
                .extend(again.iter().filter_map(|(key, after)| match key {
                    ModuleKey::Candidate(idx) => Some(ProbeRetry {
                        idx: *idx,
                        after: *after,
                        attempt: attempt + 1,
                    }),
                    ModuleKey::Committed => None,
                }));
            queue.push((again.into_iter().map(|(key, _)| key).collect(), attempt + 1));
        }
    }
    Ok(())
}

/// `n` items in builds of at most `max`, of about equal size.
pub fn chunks(n: usize, max: usize) -> impl Iterator<Item = std::ops::Range<usize>> {
    let count = n.div_ceil(max.max(1));
    (0..count).map(move |k| k * n / count..(k + 1) * n / count)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_are_even_and_cover_everything() {
        let sizes: Vec<usize> = chunks(250, 100).map(|r| r.len()).collect();
        assert_eq!(sizes, [83, 83, 84]);
        assert_eq!(chunks(0, 100).count(), 0);
        assert_eq!(chunks(3, 1).map(|r| r.start).collect::<Vec<_>>(), [0, 1, 2]);
    }
}
