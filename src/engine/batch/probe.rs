//! The batch's probe: waves built while the draw goes on, settled on the
//! stored representatives, and stored with its run's figures.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;

use anyhow::Result;
use tokio::sync::mpsc;

use crate::build::exec::Image;
use crate::build::package::Package;
use crate::build::probe::stream::{StreamCandidate, Waves};
use crate::build::probe::{self, ProbeMode, ProbeStats, Probed};
use crate::engine::errors;
use crate::store::{BatchId, ProbeRunStats, Store};
use crate::support::account::PhaseFigures;
use crate::support::progress::Progress;
use crate::support::testpoint;

use super::extract::Unique;
use super::ProbeSettings;

/// Probes candidates in waves as they arrive, side by side
/// ([`Waves::build_side_by_side`]), until the channel closes.
pub(super) async fn stream_probe(
    package: &Package,
    settings: ProbeSettings,
    candidates: mpsc::UnboundedReceiver<StreamCandidate>,
    progress: &Progress,
) -> Result<(Vec<Probed>, Images, ProbeStats)> {
    let bar = progress.bar("probe", 0);
    let mut waves = Waves::new(candidates, settings.waves);
    let mut probed = Vec::new();
    let mut images = Images::new();
    let mut stats = ProbeStats::default();
    let bar = &bar;
    let probe_wave = |wave: Vec<StreamCandidate>| {
        bar.inc_length(wave.len() as u64);
        async move {
            let sources: Vec<(usize, &str)> =
                wave.iter().map(|c| (c.idx, c.source.as_str())).collect();
            let mut seen = 0;
            probe::probe(package, settings.mode, &sources, |n| {
                bar.inc(n.saturating_sub(seen) as u64);
                seen = seen.max(n);
                testpoint::reached_blocking("probe.target");
            })
            .await
        }
    };
    waves
        .build_side_by_side(probe_wave, async |out: probe::ProbeOutcome| {
            stats.absorb(&out.stats);
            probed.extend(out.probed);
            images.extend(out.images);
            Ok(())
        })
        .await?;
    stats.waves = waves.count;
    bar.finish();
    Ok((probed, images, stats))
}

/// The image each compiled candidate runs from (shared by a wave's
/// candidates), as the probe built it.
pub(super) type Images = BTreeMap<usize, Arc<Image>>;

/// The batch's probe verdicts: one per unique candidate as `extract_and_dedup`
/// decided them. Streaming probed the first of each fingerprint to arrive;
/// when replies arrived out of order that may be another member of the group
/// than the stored representative, which is then probed here.
pub(super) async fn settle_probe(
    package: &Package,
    mode: ProbeMode,
    unique: &[Unique],
    streamed: Vec<Probed>,
    images: &mut Images,
    stats: &mut ProbeStats,
) -> Result<Vec<Probed>> {
    let mut by_idx: HashMap<usize, Probed> = streamed.into_iter().map(|p| (p.idx, p)).collect();
    let missing: Vec<(usize, &str)> = unique
        .iter()
        .filter(|u| !by_idx.contains_key(&u.idx))
        .map(|u| (u.idx, u.source.as_str()))
        .collect();
    if !missing.is_empty() {
        tracing::debug!(
            count = missing.len(),
            "probing representatives the stream did not"
        );
        let out = probe::probe(package, mode, &missing, |_| {
            testpoint::reached_blocking("probe.target");
        })
        .await?;
        stats.absorb(&out.stats);
        stats.waves += 1;
        images.extend(out.images);
        by_idx.extend(out.probed.into_iter().map(|p| (p.idx, p)));
    }
    Ok(unique
        .iter()
        .filter_map(|u| by_idx.remove(&u.idx))
        .collect())
}

/// What a batch's probe did, for [`store_probe`].
pub(super) struct ProbeDone<'a> {
    pub(super) mode: ProbeMode,
    pub(super) figures: &'a PhaseFigures,
    pub(super) stats: &'a ProbeStats,
    pub(super) toolchain: Option<&'a probe::Toolchain>,
    /// The batch's probe run, when an earlier attempt or round began it.
    pub(super) run: Option<i64>,
    /// Whether this probe's figures add to that run's (a repair round's)
    /// rather than stand for it (a resume's).
    pub(super) adds: bool,
}

/// Writes each failing candidate's diagnostics to its error file and stores
/// the run. A repair round (`adds`) adds its figures and stats to the
/// batch's run, which then holds every round's sum (`show` names the
/// rounds); a resume of the first draw replaces them, as it always did.
pub(super) async fn store_probe(
    store: &Store,
    batch: BatchId,
    probed: Vec<Probed>,
    errors_dir: &Path,
    done: ProbeDone<'_>,
) -> Result<()> {
    let ProbeDone {
        mode,
        figures,
        stats,
        toolchain,
        run: resumed_run,
        adds,
    } = done;
    // A resume adds its verdicts to the batch's own run, which is where the
    // report reads them.
    let run = match resumed_run {
        Some(run) => run,
        None => store.begin_probe_run(batch, mode.as_str()).await?,
    };
    testpoint::reached("probe.begun").await;
    let earlier = match resumed_run.filter(|_| adds) {
        Some(run) => store
            .probe_runs(batch)
            .await?
            .into_iter()
            .find(|r| r.id == run)
            .map(|r| r.so_far()),
        None => None,
    };
    let (figures, stats) = match earlier {
        Some((so_far, mut sum)) => {
            sum.absorb(stats);
            (so_far.then(*figures), sum)
        }
        None => (*figures, stats.clone()),
    };
    let mut rows = Vec::with_capacity(probed.len());
    for p in probed {
        let error_file = if p.verdict.compiled() {
            None
        } else {
            let (file, unit) = (format!("c{}.txt", p.idx), format!("candidate {}", p.idx));
            Some(errors::write(
                errors_dir,
                &file,
                &unit,
                &p.verdict,
                &p.diagnostics,
            )?)
        };
        rows.push((p, error_file));
    }
    store
        .record_probe_verdicts(run, batch, &rows, &figures)
        .await?;
    store
        .record_probe_run_stats(
            run,
            &ProbeRunStats {
                avg_busy: figures.avg_busy,
                peak_busy: figures.peak_busy,
                probe: &stats,
                origin: "batch",
                work_dir: None,
                toolchain,
            },
        )
        .await?;
    testpoint::reached("probe.stored").await;
    Ok(())
}
