//! Scoring: the judge and the committed candidate's image built, each
//! candidate run from its image as soon as it is there, and admission.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};
use tokio::sync::mpsc;

use crate::build::package::{ModuleKey, Package};
use crate::build::probe;
use crate::sandbox::Sandbox;
use crate::score::admit;
use crate::score::{self, RunLimits, ScoreVerdict, Scored};
use crate::spec::Spec;
use crate::store::{BatchId, Store};
use crate::support::account::{CutPhases, Phase};
use crate::support::progress::Progress;
use crate::support::testpoint;
use crate::task;
use crate::text::extract::Extraction;

use super::probe::Images;
use super::record;

/// What building and running the scoring images needs of the batch. The
/// images and the judge are run from copies in the batch's directory, so
/// scoring needs no lock on the task's package.
pub(super) struct Scoring<'a> {
    pub(super) spec: &'a Spec,
    pub(super) batch_dir: &'a Path,
    pub(super) store: &'a Store,
    pub(super) progress: &'a Progress,
    pub(super) batch: BatchId,
    /// Whether a candidate's wrong answers on failed visible cases are
    /// stored, for the next repair round's prompts.
    pub(super) keep_answers: bool,
    /// The toolchain the probe asked, which lets a score build whose
    /// inputs are unchanged skip cargo (`score::build_images`).
    pub(super) toolchain: Option<&'a probe::Toolchain>,
    /// Where a phase cut short leaves its figures.
    pub(super) cut: &'a CutPhases,
}

impl Scoring<'_> {
    /// Builds the scoring images and runs each candidate as soon as its
    /// image is built, so the runs overlap the build. Accounted as the
    /// probe is: the `score build` phase lasts until the last image is
    /// built (the runs meanwhile included), and `score run` is the tail the
    /// batch waits for after it. The package is released once built.
    pub(super) async fn build_and_score(
        &self,
        package: Package,
        keys: Vec<ModuleKey>,
        ready: Vec<(ModuleKey, PathBuf)>,
        sandbox: Arc<Sandbox>,
    ) -> Result<()> {
        let guard = self.cut.start(Phase::ScoreBuild);
        let (built_tx, built_rx) = mpsc::unbounded_channel();
        // The judge every run needs, and the committed candidate's image
        // (both fresh in a warm target directory: neither changes between
        // batches); the candidates' images are the probe's.
        let wanted = !keys.is_empty() || !ready.is_empty();
        // Every key's image either comes or fails to build: the bar's
        // total is known now, and only shrinks, by the images that failed.
        let expected = ready.len() + if wanted { keys.len() } else { 0 };
        let building = async move {
            if wanted {
                let spinner = self.progress.spinner("scorer");
                let built = self.build(&package, &keys, built_tx).await;
                spinner.finish();
                built?;
            }
            drop(package);
            record(self.store, self.batch, guard.finish()).await?;
            testpoint::reached("score.built").await;
            anyhow::Ok(self.cut.start(Phase::ScoreRun))
        };
        let (tail, scored) = tokio::join!(
            building,
            self.run_as_built(built_rx, ready, expected, sandbox)
        );
        let tail = tail?;
        scored?;
        // Decided over every stored run of the batch, so that runs stored by
        // an attempt that was killed count as they would have in one go.
        admit_all(self.spec, self.store, self.batch).await?;
        record(self.store, self.batch, tail.finish()).await
    }

    /// Builds the images, handing each on to `built` as it comes, and
    /// stores the verdict of each candidate whose image did not build.
    async fn build(
        &self,
        package: &Package,
        keys: &[ModuleKey],
        built: mpsc::UnboundedSender<score::Built>,
    ) -> Result<()> {
        package.write_module(&ModuleKey::Committed, &self.spec.committed.source)?;
        let harness = &self.spec.harness.crate_name;
        let images = score::build_images(package, keys, harness, self.toolchain, |b| {
            let _ = built.send(b);
        })
        .await?;
        for (key, errors) in &images.failed {
            let failed = Scored {
                key: key.clone(),
                verdict: ScoreVerdict::ScoreBuildFailed,
                passed: 0,
                total: self.spec.cases.count,
                wall: Default::default(),
                cpu: Default::default(),
                cases: vec![score::CaseOutcome::NotRun; self.spec.cases.count],
                restarts: 0,
                peak_processes: None,
                stderr: errors.clone(),
            };
            store_score(self.store, self.batch, &failed).await?;
        }
        Ok(())
    }

    /// Stores a candidate's wrong answers on the task's visible cases, and
    /// only those: hidden cases' answers are never kept, so no prompt can
    /// carry them.
    async fn keep_wrong_answers(&self, ran: &score::Ran) -> Result<()> {
        let ModuleKey::Candidate(idx) = ran.scored.key else {
            return Ok(());
        };
        if !self.keep_answers {
            return Ok(());
        }
        let visible = &self.spec.repair.visible;
        let kept: Vec<(usize, String)> = ran
            .wrong_answers
            .iter()
            .filter(|(pos, _)| visible.contains(*pos))
            .cloned()
            .collect();
        Ok(self
            .store
            .record_case_outputs(self.batch, idx, &kept)
            .await?)
    }

    /// Runs each image as it is built (from a copy in the batch's folder,
    /// which no later build overwrites) once the judge is built, and stores
    /// each score as its run ends; returns when the build is over and every
    /// run has ended.
    async fn run_as_built(
        &self,
        mut built: mpsc::UnboundedReceiver<score::Built>,
        ready: Vec<(ModuleKey, PathBuf)>,
        expected: usize,
        sandbox: Arc<Sandbox>,
    ) -> Result<()> {
        let dir = self.batch_dir.join("images");
        let copy = |from: &Path, name: &str| -> Result<PathBuf> {
            std::fs::create_dir_all(&dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            let to = dir.join(name);
            // Runs start while later images are copied: placed so that no
            // run's child can hold a copy open for writing when it is exec'd.
            crate::sandbox::place_executable(from, &to)?;
            Ok(to)
        };
        let bar = self.progress.bar("score", expected);
        let parallel = std::thread::available_parallelism().map_or(2, |n| n.get());
        let mut runs: Option<score::Runs> = None;
        // Images built before the judge, which every run needs: the
        // probe's, then any the score build makes.
        let mut images = ready.len();
        let mut waiting = ready;
        let mut building = true;
        loop {
            tokio::select! {
                next = built.recv(), if building => match next {
                    None => {
                        building = false;
                        bar.set_length(images as u64);
                    }
                    Some(score::Built::Judge(path)) if runs.is_none() => {
                        let judge = copy(&path, "judge")?;
                        let oracle = score::Oracle::new(
                            &judge,
                            Arc::from(self.spec.cases.text.as_str()),
                            self.spec.cases.count,
                            sandbox.clone(),
                            self.spec.limits.memory_bytes,
                        )
                        .await?;
                        let limits = RunLimits::from_spec(&self.spec.limits);
                        let mut started =
                            score::Runs::new(Arc::new(oracle), limits, parallel, sandbox.clone());
                        for (key, image) in waiting.drain(..) {
                            started.spawn(key, image);
                        }
                        runs = Some(started);
                    }
                    Some(score::Built::Judge(_)) => {}
                    Some(score::Built::Image(key, path)) => {
                        let image = copy(&path, &key.name())?;
                        images += 1;
                        match runs.as_mut() {
                            Some(runs) => runs.spawn(key, image),
                            None => waiting.push((key, image)),
                        }
                    }
                },
                Some(ran) = next_run(&mut runs) => {
                    // A harness fault fails the batch; the run is no one's.
                    let ran = ran.map_err(|e| task::harness_fault_in_batch(self.spec, e))?;
                    // Before the score: a run whose score is stored is
                    // never run again, so its answers would never come.
                    self.keep_wrong_answers(&ran).await?;
                    store_score(self.store, self.batch, &ran.scored).await?;
                    testpoint::reached("score.run").await;
                    bar.inc(1);
                }
                else => break,
            }
        }
        bar.finish();
        Ok(())
    }
}

/// Copies each distinct image of the `compiled` candidates into the
/// batch's folder (`sandbox::place_executable`), where no later build
/// (another batch of the task, once the package is released) replaces it,
/// and names each candidate's copy: one copy per shared image, not per
/// candidate.
pub(super) fn keep_images(
    batch_dir: &Path,
    compiled: &[usize],
    images: &Images,
) -> Result<Vec<(ModuleKey, PathBuf)>> {
    let dir = batch_dir.join("images");
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut kept: HashMap<PathBuf, PathBuf> = HashMap::new();
    let mut ready = Vec::with_capacity(compiled.len());
    for idx in compiled {
        let image = images
            .get(idx)
            .with_context(|| format!("candidate {idx} compiled but has no image"))?;
        let path = match kept.get(&image.path) {
            Some(path) => path.clone(),
            None => {
                let name = image.path.file_name().context("an image without a name")?;
                let to = dir.join(name);
                crate::sandbox::place_executable(&image.path, &to)?;
                kept.insert(image.path.clone(), to.clone());
                to
            }
        };
        ready.push((ModuleKey::Candidate(*idx), path));
    }
    Ok(ready)
}

/// The next run to end, or `None` when none is running.
pub(super) async fn next_run(runs: &mut Option<score::Runs>) -> Option<Result<score::Ran>> {
    match runs {
        Some(runs) if !runs.is_empty() => runs.next().await,
        _ => None,
    }
}

/// Decides admission for every scored candidate of the batch, from the
/// store: the reference's run and every candidate's, whichever attempt
/// stored them. Candidates the scorer could not build have no admission.
pub(super) async fn admit_all(spec: &Spec, store: &Store, batch: BatchId) -> Result<()> {
    let reference = store.batch(batch).await?.committed;
    let rows = store.candidates(batch).await?;
    let candidates: Vec<admit::Contender<'_>> = rows
        .iter()
        .filter_map(|c| {
            let Extraction::Source(source) = &c.extraction else {
                return None;
            };
            Some(admit::Contender {
                idx: c.idx,
                source_len: source.len(),
                scored: c.score.as_ref()?,
            })
        })
        .filter(|c| c.scored.verdict != ScoreVerdict::ScoreBuildFailed)
        .collect();
    let decisions = admit::admit(&spec.admit, reference.as_ref(), &candidates);
    let rows: Vec<(usize, admit::Admission)> =
        candidates.iter().map(|c| c.idx).zip(decisions).collect();
    store.record_admissions(batch, &rows).await?;
    Ok(())
}

/// Stores one run as it finishes; admission comes later, for all at once.
pub(super) async fn store_score(store: &Store, batch: BatchId, scored: &Scored) -> Result<()> {
    match scored.key {
        ModuleKey::Committed => store.record_committed(batch, scored).await?,
        ModuleKey::Candidate(idx) => store.record_score(batch, idx, scored, false).await?,
    }
    store.record_run_details(batch, scored).await?;
    Ok(())
}
