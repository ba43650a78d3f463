//! The shared build: a wave's units (a task's candidates, a suite's
//! programs) as modules of one crate, built by one rustc, whose binary is
//! the image every unit of it runs from (chosen by a selector argument).
//!
//! A unit's verdict must be the one a build of it alone would give, so:
//!
//! - **Errors are attributed by their primary span**: the module file it
//!   points into names its unit ([`Layout::owner`]). Units with errors leave
//!   the crate and the rest is built again, until a pass builds; rustc stops
//!   at the first phase that has errors, so a unit whose errors come from a
//!   later phase (borrow checking, code generation) is found in a later pass,
//!   as a build of it alone would find it. The one way a module reaches
//!   another under the default policy is a trait impl, which rustc sees
//!   crate-wide: it can make another module's type inference ambiguous. A
//!   unit whose errors include such an ambiguity is built alone before it
//!   is blamed.
//! - **One bad unit costs only itself**: a build that passes its limits (its
//!   rustc's CPU time or memory, which grow with the crate; the build's wall
//!   time) or fails in a way no module owns (a link error, an internal
//!   compiler error, cargo killed) is narrowed by halves, down to the unit
//!   alone, whose verdict is then exactly an isolated build's. Each half
//!   that builds hands its image on at once.
//! - **Units built alone share one cargo build** as targets of their own
//!   (one cargo start, a rustc per CPU), each with an isolated build's
//!   limits; one that gets no answer of its own there is built by itself.
//!
//! A rustc of one unit gets the package's own per-target limits; a shared
//! rustc of `n` gets [`scaled`] limits, and within them a CPU budget drawn
//! from what honest groups of the package cost ([`super::budget`]). A
//! group stopped at its budget or its limits is split into about `√n`
//! parts built side by side, and a small one (or any, while no honest
//! group's cost is known) into its units alone, so a compile bomb costs a
//! few honest groups' worth and then its own limit, not its wave's. Those
//! parts build beside the package's main lane ([`Package::lane`]), which
//! the honest groups of every wave take in turn: the bomb's own limit
//! keeps one core, and the other groups and waves go on.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};

use super::budget::Budgets;
use super::groups::{first_groups, take_lane, Group, Lane, Lanes};
use super::oversize::Oversize;
use crate::build::package::{
    cargo_jobs, BuildReport, CompilerDiag, DiagLevel, ModuleKey, Package, Profile,
};
use crate::build::verdict::{
    verdict_of_target, ProbeFailure, ProbeStats, ProbeVerdict, MAX_RETRIES,
};
use crate::spec::CompileLimits;

/// How a kind of unit becomes a crate.
pub trait Layout: Sync {
    /// The root of an image holding `members`, whose module files are in
    /// the package already.
    fn root(&self, members: &[ModuleKey]) -> String;

    /// The profile the images are built in.
    fn profile(&self) -> Profile;

    /// The target of `key`'s image of its own ([`super::isolated`]): unique
    /// in the target directory, and named so that the compile wrapper
    /// confines its rustc to that unit's files.
    fn isolated_target(&self, key: &ModuleKey) -> String;

    /// The unit whose module a file is (a path as rustc names it in a
    /// diagnostic, relative to the package): `cands/c3.rs` and the files
    /// that belong with it.
    fn owner(&self, file: &str) -> Option<ModuleKey> {
        owner_of_file(file)
    }
}

/// A built image and the units it holds.
#[derive(Debug)]
pub struct Image {
    pub path: PathBuf,
    pub members: Vec<ModuleKey>,
}

/// One unit's verdict, and the image it runs from when it compiled.
#[derive(Debug, Clone)]
pub struct Settled {
    pub key: ModuleKey,
    pub verdict: ProbeVerdict,
    /// Rendered errors and warnings, as rustc printed them for this unit.
    pub diagnostics: String,
    pub warnings: usize,
    pub image: Option<Arc<Image>>,
}

/// Builds waves of units in one package.
pub struct SharedBuild<'a, L: Layout> {
    package: &'a Package,
    layout: &'a L,
    /// The address space each run gets: an image that one unit's statics
    /// would make unrunnable within it is narrowed (`oversize`).
    run_address_space: u64,
    /// How many groups to build side by side (the package's; by default
    /// cargo's own for its jobs, one rustc per CPU).
    parallel: usize,
    /// What a group's rustc may spend before it is split.
    budgets: Budgets,
}

/// At most this many passes (removing the units with errors each time)
/// before what is left is narrowed by halves: each pass usually removes
/// one compiler phase's errors.
const MAX_PASSES: usize = 6;

/// The limits of a shared rustc of `n` units whose units alone get
/// `one`: a tenth of one unit's CPU time per further unit (an honest unit
/// costs a small fraction of its own limit), and a sixteenth of its memory
/// per further unit, up to four times one unit's.
pub fn scaled(one: CompileLimits, n: usize) -> CompileLimits {
    let more = n.saturating_sub(1) as u64;
    CompileLimits {
        cpu_secs: one.cpu_secs + (one.cpu_secs / 10).max(1) * more,
        memory_bytes: one
            .memory_bytes
            .saturating_add(one.memory_bytes / 16 * more)
            .min(one.memory_bytes.saturating_mul(4)),
    }
}

impl<'a, L: Layout> SharedBuild<'a, L> {
    pub fn new(package: &'a Package, layout: &'a L, run_address_space: u64) -> SharedBuild<'a, L> {
        SharedBuild {
            package,
            layout,
            run_address_space,
            parallel: package.build_parallelism(),
            budgets: Budgets::of_package(package.dir()),
        }
    }

    /// The package it builds in.
    pub fn package(&self) -> &'a Package {
        self.package
    }

    /// How it lays out an image.
    pub fn layout(&self) -> &'a L {
        self.layout
    }

    /// Builds `units` (their module files written), calling `settled` for
    /// each unit as its verdict is known, in no particular order. Failures
    /// that can be transient (cargo killed, failing without a word) are
    /// built again, at most [`MAX_RETRIES`] times per group.
    ///
    /// Two builds may run at once: one of honest groups in the package's
    /// main lane ([`Package::lane`], shared with every wave of the
    /// package), and one beside it of what is left of groups that overran
    /// their budget, so that a slow unit's own limit keeps one core, not
    /// the wave's other groups (nor, when waves are built side by side,
    /// the waves behind it).
    pub async fn build(
        &self,
        units: &[ModuleKey],
        stats: &mut ProbeStats,
        mut settled: impl FnMut(Settled),
    ) -> Result<()> {
        let mut groups: Vec<Group> = first_groups(units, self.parallel);
        let mut running = futures::stream::FuturesUnordered::new();
        let mut busy = Lanes::default();
        loop {
            groups.retain(|g| !g.members.is_empty());
            if !busy.side {
                if let Some(together) = take_lane(&mut groups, Lane::Side, self.parallel) {
                    busy.side = true;
                    running.push(self.build_together(together, None));
                }
            }
            let honest_waiting = !busy.main && groups.iter().any(|g| g.lane() == Lane::Main);
            if running.is_empty() && !honest_waiting {
                debug_assert!(groups.is_empty());
                return Ok(());
            }
            tokio::select! {
                permit = self.package.lane().acquire(), if honest_waiting => {
                    let permit = permit.context("the package's build lane closed")?;
                    let together = take_lane(&mut groups, Lane::Main, self.parallel)
                        .expect("an honest group waits");
                    busy.main = true;
                    running.push(self.build_together(together, Some(permit)));
                }
                Some(done) = futures::StreamExt::next(&mut running), if !running.is_empty() => {
                    let done = done?;
                    match done.together[0].lane() {
                        Lane::Main => busy.main = false,
                        Lane::Side => busy.side = false,
                    }
                    stats.add_build(&done.report);
                    self.settle_build(done, stats, &mut settled, &mut groups)?;
                }
            }
        }
    }

    /// Builds `together` in one cargo build, holding `permit` (the main
    /// lane's) until it is done.
    async fn build_together(
        &self,
        together: Vec<Group>,
        permit: Option<tokio::sync::SemaphorePermit<'_>>,
    ) -> Result<Done> {
        let targets: Vec<String> = together.iter().map(|_| self.target_name()).collect();
        let started = std::time::Instant::now();
        let report = self.build_groups(&targets, &together).await?;
        drop(permit);
        Ok(Done {
            targets,
            together,
            report,
            started,
        })
    }

    /// Judges each group of a finished build and settles it.
    fn settle_build(
        &self,
        done: Done,
        stats: &mut ProbeStats,
        settled: &mut impl FnMut(Settled),
        groups: &mut Vec<Group>,
    ) -> Result<()> {
        let Done {
            targets,
            together,
            report,
            started,
        } = done;
        let lane = together[0].lane();
        let side_by_side = together.len() > 1;
        // cargo gives each target a job when there are no more targets
        // than jobs (one per CPU, cargo's default): each rustc then ran
        // from the build's start to its end on a CPU of its own, so a wall
        // limit that struck it struck it as it would alone.
        let started_together = together.len() <= cargo_jobs();
        for (target, mut group) in targets.iter().zip(together) {
            let judged = self.judge(target, &group, &report);
            tracing::debug!(
                units = group.members.len(),
                pass = group.passes,
                side_by_side = targets.len(),
                lane = lane.name(),
                wall_ms = started.elapsed().as_millis() as u64,
                cpu_ms = report.cpu_secs.get(target).map(|s| (s * 1000.0) as u64),
                outcome = judged.name(),
                "shared build"
            );
            if side_by_side && !judged.is_own_answer(&report, started_together) {
                // A mate may have caused it (say, held a job while it
                // waited, then ran the build to its wall limit): built
                // again by itself, it is its own.
                group.solo = true;
                groups.push(group);
                continue;
            }
            if let (Judged::Built { .. }, Some(&cpu), Lane::Main) =
                (&judged, report.cpu_secs.get(target), group.lane())
            {
                // A part of a group that overran is small: its crate's
                // fixed cost, spread over few units, says nothing of what
                // an honest group's units cost.
                self.budgets.observe(group.members.len(), cpu);
            }
            self.settle(group, judged, stats, settled, groups)?;
        }
        Ok(())
    }

    /// Acts on what one group's build said: verdicts for the units it
    /// settles, and the groups still to build back on the stack.
    fn settle(
        &self,
        mut group: Group,
        judged: Judged,
        stats: &mut ProbeStats,
        settled: &mut impl FnMut(Settled),
        groups: &mut Vec<Group>,
    ) -> Result<()> {
        match judged {
            Judged::Built { image, warnings } => {
                let size = if group.members.len() > 1 {
                    super::oversize::check_image(
                        &image,
                        self.run_address_space,
                        super::oversize::module_owner,
                    )?
                } else {
                    Oversize::Fits
                };
                match size {
                    Oversize::Fits => {}
                    Oversize::TakeOut(oversized) => {
                        tracing::info!(
                            units = ?oversized,
                            "units whose statics would make a shared image unrunnable; built alone"
                        );
                        stats.fallbacks += oversized.len();
                        group.members.retain(|k| !oversized.contains(k));
                        let alone: Vec<Group> = oversized
                            .into_iter()
                            .map(|k| group.beside(vec![k]))
                            .collect();
                        groups.push(group);
                        groups.extend(alone);
                        return Ok(());
                    }
                    Oversize::Halve => {
                        tracing::info!(
                            units = group.members.len(),
                            "an image too large to run that no unit's symbols account for; halved"
                        );
                        stats.fallbacks += 1;
                        groups.extend(group.halves());
                        return Ok(());
                    }
                }
                let image = Arc::new(Image {
                    path: image,
                    members: group.members.clone(),
                });
                for key in &group.members {
                    let own = warnings.get(key).cloned().unwrap_or_default();
                    settled(Settled {
                        key: key.clone(),
                        verdict: ProbeVerdict::Compiled,
                        diagnostics: own.rendered,
                        warnings: own.warnings,
                        image: Some(image.clone()),
                    });
                }
            }
            Judged::Alone(alone) => {
                self.settle_alone(group, alone, stats, settled, groups);
            }
            Judged::Failing(failing) => {
                stats.passes += 1;
                let gone: BTreeSet<&ModuleKey> = failing.keys().collect();
                group.members.retain(|k| !gone.contains(k));
                group.passes += 1;
                let (unsure, failing): (Vec<_>, Vec<_>) = failing
                    .into_iter()
                    .partition(|(_, own)| own.may_be_a_mates());
                for (key, _) in unsure {
                    // Built alone, its verdict is its own either way.
                    stats.fallbacks += 1;
                    groups.push(group.beside(vec![key]));
                }
                for (key, own) in failing {
                    settled(Settled {
                        key,
                        verdict: ProbeVerdict::CompileError { codes: own.codes },
                        diagnostics: own.rendered,
                        warnings: own.warnings,
                        image: None,
                    });
                }
                if group.passes >= MAX_PASSES {
                    groups.extend(group.halves());
                } else {
                    groups.extend(group.parts_after_failing());
                }
            }
            Judged::Spurious(why) if group.retries < MAX_RETRIES => {
                group.retry(why, stats);
                groups.push(group);
            }
            Judged::Spurious(_) | Judged::Narrow => {
                stats.fallbacks += group.members.len();
                groups.extend(group.halves());
            }
            Judged::OverLimit => {
                tracing::info!(
                    units = group.members.len(),
                    "a shared rustc stopped at its budget or limits; split"
                );
                stats.fallbacks += group.members.len();
                groups.extend(group.parts_when_slow(self.budgets.known()));
            }
        }
        Ok(())
    }

    /// The verdict of a unit built alone, or the unit back on the stack
    /// when its failure may be transient.
    fn settle_alone(
        &self,
        mut group: Group,
        alone: Alone,
        stats: &mut ProbeStats,
        settled: &mut impl FnMut(Settled),
        groups: &mut Vec<Group>,
    ) {
        let key = group.members[0].clone();
        if let ProbeVerdict::ProbeFailure(why) = alone.verdict {
            if why.is_spurious() && group.retries < MAX_RETRIES {
                group.retry(why, stats);
                groups.push(group);
                return;
            }
        }
        let image = alone.image.map(|path| {
            Arc::new(Image {
                path,
                members: vec![key.clone()],
            })
        });
        settled(Settled {
            key,
            verdict: alone.verdict,
            diagnostics: alone.diagnostics,
            warnings: alone.warnings,
            image,
        });
    }

    /// Builds each group as a target of its own in one cargo build: one
    /// cargo start for them all and a rustc per CPU side by side (rustc's
    /// front end uses one core, and a single unit's code generation too).
    /// Every target gets the limits of the largest group's rustc.
    async fn build_groups(&self, targets: &[String], together: &[Group]) -> Result<BuildReport> {
        for (target, group) in targets.iter().zip(together) {
            self.package
                .write_bin(target, &self.layout.root(&group.members))
                .with_context(|| format!("cannot write the root of {target}"))?;
        }
        self.package.add_bins(targets.iter().map(String::as_str))?;
        let one = self.package.compile_limits();
        let largest = together.iter().map(|g| g.members.len()).max().unwrap_or(1);
        let limits = scaled(one, largest);
        let budgets: BTreeMap<String, u64> = targets
            .iter()
            .zip(together)
            .map(|(target, g)| {
                let n = g.members.len();
                (
                    target.clone(),
                    self.budgets.cpu_secs(n, one, scaled(one, n)),
                )
            })
            .filter(|(_, secs)| *secs < limits.cpu_secs)
            .collect();
        self.package
            .build_limited(self.layout.profile(), targets, limits, &budgets)
            .await
    }

    fn target_name(&self) -> String {
        self.package.next_image_target()
    }

    /// What one build of `group` says.
    fn judge(&self, target: &str, group: &Group, report: &BuildReport) -> Judged {
        if group.members.len() == 1 {
            // Alone, the verdict is the isolated build's, whatever happened.
            let (verdict, diagnostics, warnings) = verdict_of_target(report, target);
            let image = report
                .built
                .get(target)
                .filter(|_| verdict.compiled())
                .cloned();
            return Judged::Alone(Alone {
                verdict,
                diagnostics,
                warnings,
                image,
            });
        }
        let diags = report.diagnostics.get(target).cloned().unwrap_or_default();
        let owned = self.attribute(&diags.messages);
        if let Some(image) = report.built.get(target) {
            return Judged::Built {
                image: image.clone(),
                warnings: owned.by_unit,
            };
        }
        if report.limit_hits.contains_key(target) {
            return Judged::OverLimit;
        }
        if report.timed_out || diags.ices > 0 || owned.unowned_errors {
            return Judged::Narrow;
        }
        let failing: BTreeMap<ModuleKey, Owned> = owned
            .by_unit
            .into_iter()
            .filter(|(_, o)| o.errors > 0)
            .collect();
        if !failing.is_empty() {
            return Judged::Failing(failing);
        }
        if !report.dependency_errors.is_empty() {
            // Nothing of ours failed: what every unit links did. Each alone
            // would say so; the narrowing gets each there.
            return Judged::Narrow;
        }
        let why = crate::build::verdict::infrastructure_failure(report);
        if why.is_spurious() {
            Judged::Spurious(why)
        } else {
            Judged::Narrow
        }
    }

    /// Each message given to the unit whose file its primary span (else the
    /// first of its other spans) points into.
    fn attribute(&self, messages: &[CompilerDiag]) -> Attributed {
        let mut out = Attributed::default();
        for msg in messages {
            let owner = msg
                .at
                .as_ref()
                .and_then(|(file, _)| self.layout.owner(file))
                .or_else(|| msg.files.iter().find_map(|f| self.layout.owner(f)));
            match owner {
                Some(key) => out.by_unit.entry(key).or_default().add(msg),
                None if msg.is_error() && !is_summary(msg) => out.unowned_errors = true,
                None => {}
            }
        }
        for own in out.by_unit.values_mut() {
            own.codes.sort();
            own.codes.dedup();
            own.rendered.push_str(&summary(own.errors, &own.codes));
        }
        out
    }
}

/// What a build of this unit alone would close with, as cargo hands it
/// on: the pointers to `rustc --explain` for its error codes (`codes`,
/// sorted and unique), as rustc writes them (rustc_errors'
/// `print_error_count`). cargo drops rustc's own count lines (`aborting
/// due to N previous errors`, `N warnings emitted`) and prints its own. The
/// shared build's pointers name every unit's codes, so each unit's are
/// written here.
fn summary(errors: usize, codes: &[String]) -> String {
    match codes {
        _ if errors == 0 => String::new(),
        [] => String::new(),
        [one] => format!("For more information about this error, try `rustc --explain {one}`.\n"),
        [first, ..] => {
            let (listed, end) = if codes.len() > 9 {
                (&codes[..9], "...")
            } else {
                (codes, ".")
            };
            format!(
                "Some errors have detailed explanations: {}{end}\n\
                 For more information about an error, try `rustc --explain {first}`.\n",
                listed.join(", ")
            )
        }
    }
}

/// A build's closing lines, which belong to no module: `aborting due to`,
/// `N warnings emitted`, and the pointers to `rustc --explain`.
fn is_summary(msg: &CompilerDiag) -> bool {
    msg.files.is_empty()
        && msg.code.is_none()
        && (msg.message.starts_with("aborting due to")
            || msg.message.ends_with("emitted")
            || msg.message.starts_with("For more information")
            || msg
                .message
                .starts_with("Some errors have detailed explanations"))
}

/// What a build of a group says.
enum Judged {
    Built {
        image: PathBuf,
        warnings: BTreeMap<ModuleKey, Owned>,
    },
    /// A group of one: its verdict, as an isolated build gives it.
    Alone(Alone),
    /// These units had errors; the rest is built again.
    Failing(BTreeMap<ModuleKey, Owned>),
    /// No answer, but another try may give one.
    Spurious(ProbeFailure),
    /// Something no module owns: narrow by halves.
    Narrow,
    /// Its rustc stopped at its CPU budget or at a limit: split finer.
    OverLimit,
}

/// A finished cargo build of groups side by side, all of one lane.
struct Done {
    targets: Vec<String>,
    together: Vec<Group>,
    report: BuildReport,
    started: std::time::Instant,
}

impl Judged {
    /// Whether the answer is the group's own when it was built beside
    /// others: not a failure of the build as a whole (cargo killed, or a
    /// wall limit a mate may have run it to), which a build of it by itself
    /// would not share. The wall limit is the group's own when every
    /// group of the build `started_together`: none waited for a job.
    fn is_own_answer(&self, report: &BuildReport, started_together: bool) -> bool {
        let own_wall_limit = !report.timed_out || started_together;
        match self {
            Judged::Built { .. } | Judged::Failing(_) => true,
            Judged::Alone(alone) => match alone.verdict {
                ProbeVerdict::ProbeFailure(ProbeFailure::Timeout) => own_wall_limit,
                ProbeVerdict::ProbeFailure(_) => false,
                _ => true,
            },
            Judged::Narrow | Judged::OverLimit => own_wall_limit,
            Judged::Spurious(_) => false,
        }
    }

    /// For the build log.
    fn name(&self) -> &'static str {
        match self {
            Judged::Built { .. } => "built",
            Judged::Alone(_) => "alone",
            Judged::Failing(_) => "failing",
            Judged::Spurious(_) => "spurious",
            Judged::Narrow => "narrow",
            Judged::OverLimit => "over_limit",
        }
    }
}

struct Alone {
    verdict: ProbeVerdict,
    diagnostics: String,
    warnings: usize,
    /// The image, when it compiled.
    image: Option<PathBuf>,
}

/// Messages attributed to units.
#[derive(Default)]
struct Attributed {
    by_unit: BTreeMap<ModuleKey, Owned>,
    /// An error no unit owns (a link error, an error in the root).
    unowned_errors: bool,
}

/// One unit's messages in one build.
#[derive(Debug, Default, Clone)]
struct Owned {
    rendered: String,
    errors: usize,
    warnings: usize,
    codes: Vec<String>,
}

/// Error codes another module of the crate can cause: a trait impl is
/// seen crate-wide, so a module's `impl PartialEq<Its> for i32` makes
/// `assert_eq!(candidate(..), vec![])` elsewhere ambiguous (E0283), though
/// that module compiles alone. Adding impls can only add such ambiguities,
/// never unsatisfy a bound or change a type rustc settled on.
const AMBIGUITY_CODES: &[&str] = &["E0282", "E0283", "E0284", "E0790"];

/// Error codes of names that do not resolve, whose help suggests importing
/// a same-named item from elsewhere in the crate: in a shared image that is
/// a build-mate (`use crate::c0::absolute_width;`), which a build alone
/// would not name and a repair prompt must not carry. Such a unit is built
/// alone for its error text; its verdict is the same either way.
const NAMING_CODES: &[&str] = &[
    "E0412", "E0422", "E0423", "E0425", "E0433", "E0531", "E0532",
];

impl Owned {
    /// Whether an error of this unit may be another unit's doing, so that
    /// only a build of it alone can say.
    fn may_be_a_mates(&self) -> bool {
        self.codes.iter().any(|code| {
            AMBIGUITY_CODES.contains(&code.as_str()) || NAMING_CODES.contains(&code.as_str())
        })
    }

    fn add(&mut self, msg: &CompilerDiag) {
        if is_summary(msg) {
            return;
        }
        if self.rendered.len() < crate::build::package::MAX_RENDERED {
            self.rendered.push_str(&msg.rendered);
        }
        match msg.level {
            DiagLevel::Error | DiagLevel::Ice => {
                self.errors += 1;
                self.codes.extend(msg.code.iter().cloned());
            }
            DiagLevel::Warning => self.warnings += 1,
            DiagLevel::Other => {}
        }
    }
}

/// `cands/c12.rs` and `cands/c12.tests.rs` are unit 12's, `cands/committed.rs`
/// the committed candidate's; nothing else is a unit's.
pub fn owner_of_file(file: &str) -> Option<ModuleKey> {
    let path = std::path::Path::new(file);
    if path.parent()?.file_name()? != "cands" {
        return None;
    }
    let name = path.file_name()?.to_str()?;
    let stem = name
        .strip_suffix(".tests.rs")
        .or_else(|| name.strip_suffix(".rs"))?;
    if stem == "committed" {
        return Some(ModuleKey::Committed);
    }
    let n = stem.strip_prefix('c')?;
    (!n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        .then(|| n.parse().ok().map(ModuleKey::Candidate))
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_name_their_unit() {
        assert_eq!(
            owner_of_file("cands/c12.rs"),
            Some(ModuleKey::Candidate(12))
        );
        assert_eq!(
            owner_of_file("cands/c3.tests.rs"),
            Some(ModuleKey::Candidate(3))
        );
        assert_eq!(
            owner_of_file("/w/task/cands/committed.rs"),
            Some(ModuleKey::Committed)
        );
        for no in [
            "cands/c3.main.rs",
            "cands/img_x_0.main.rs",
            "src/c3.rs",
            "cands/c.rs",
            "cands/cx1.rs",
            "/rustc/abc/library/core/src/macros/mod.rs",
        ] {
            assert_eq!(owner_of_file(no), None, "{no}");
        }
    }

    #[test]
    fn limits_grow_with_the_crate() {
        let one = CompileLimits {
            cpu_secs: 60,
            memory_bytes: 4 << 30,
        };
        assert_eq!(scaled(one, 1), one);
        assert_eq!(scaled(one, 11).cpu_secs, 120);
        assert_eq!(scaled(one, 17).memory_bytes, 8 << 30);
        assert_eq!(scaled(one, 1000).memory_bytes, 16 << 30);
        let small = CompileLimits {
            cpu_secs: 5,
            memory_bytes: 1 << 30,
        };
        assert_eq!(scaled(small, 3).cpu_secs, 7);
    }

    #[test]
    fn a_wall_limit_is_a_units_own_only_when_no_mate_held_its_job() {
        let alone = |verdict| {
            Judged::Alone(Alone {
                verdict,
                diagnostics: String::new(),
                warnings: 0,
                image: None,
            })
        };
        let timeout = alone(ProbeVerdict::ProbeFailure(ProbeFailure::Timeout));
        let killed = alone(ProbeVerdict::ProbeFailure(ProbeFailure::Killed));
        let timed_out = BuildReport {
            timed_out: true,
            ..Default::default()
        };
        let finished = BuildReport::default();
        assert!(timeout.is_own_answer(&timed_out, true));
        assert!(!timeout.is_own_answer(&timed_out, false));
        assert!(Judged::Narrow.is_own_answer(&timed_out, true));
        assert!(!Judged::Narrow.is_own_answer(&timed_out, false));
        assert!(Judged::Narrow.is_own_answer(&finished, false));
        // cargo killed is never a unit's own, started together or not.
        assert!(!killed.is_own_answer(&finished, true));
        assert!(alone(ProbeVerdict::CompileTimeout).is_own_answer(&timed_out, false));
    }

    #[test]
    fn summaries_read_as_cargo_hands_them_on() {
        let codes = |c: &[&str]| c.iter().map(|c| c.to_string()).collect::<Vec<_>>();
        assert_eq!(summary(0, &[]), "");
        assert_eq!(summary(1, &[]), "");
        assert_eq!(
            summary(1, &codes(&["E0308"])),
            "For more information about this error, try `rustc --explain E0308`.\n"
        );
        assert_eq!(
            summary(2, &codes(&["E0308", "E0425"])),
            "Some errors have detailed explanations: E0308, E0425.\n\
             For more information about an error, try `rustc --explain E0308`.\n"
        );
        let ten: Vec<String> = (0..10).map(|n| format!("E00{n:02}")).collect();
        assert!(summary(10, &ten).starts_with(
            "Some errors have detailed explanations: E0000, E0001, E0002, E0003, E0004, \
             E0005, E0006, E0007, E0008...\n"
        ));
    }
}
