//! The generated cargo package that probe and score build, and the one place
//! that runs nested cargo.
//!
//! One package per task lives under the work directory, and a few more
//! when batches of it run at once: the package folder is a pool of build
//! slots (`slots`), one held for as long as a batch writes sources into it,
//! so two batches never interleave in one folder and never wait on each
//! other while a slot is free. Its builds take a slot of the target
//! directory's pool for each cargo run, the one the package last built in
//! first (warm for it), so one batch's long compile never stalls another's
//! build. The manifest and every file in it are ours: candidates are only
//! module files, so nothing a candidate writes can add a build script, a
//! dependency or a path outside the package.
//!
//! Nested cargo runs in a scrubbed environment (`scrubbed_cargo`, the only
//! constructor of nested cargo commands): only an allow-list of variables
//! passes, so nothing that `cargo run`, a build script, rustup or a wrapper
//! set for us reaches it (which would make cargo treat the warm target
//! directory as stale), and no secret does either. The toolchain and the
//! target directory are chosen explicitly, never inherited.
//!
//! One file per concern: `env` the scrubbed environment, `manifest` the
//! manifests, `layout` the files and target names, `cargo` running cargo,
//! `diag` reading what it said, `slots` the pools of folders. This file
//! opens the package.

mod cargo;
mod diag;
mod env;
mod layout;
mod manifest;
mod slots;

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};

use crate::spec::{CompileLimits, Edition, Policy, Spec};

pub use cargo::{cargo_jobs, BuildTimedOut, Profile, BUILD_TIMEOUT};
pub use diag::{
    BuildReport, CompilerDiag, DiagLevel, TargetDiagnostics, MAX_MESSAGES, MAX_RENDERED,
};
pub use env::{
    default_toolchain, nested_env, scrubbed_cargo, scrubbed_command, INHERITED_ENV, TOOLCHAIN_VAR,
};
pub use layout::ModuleKey;
use manifest::Manifest;
pub use slots::{default_pool_size, pool_size, SLOTS_VAR};
use slots::{Pool, Slot};

/// The name of the scoring binary's target.
pub const SCORER: &str = "assay_scorer";

/// A task's generated package, locked for the caller's use.
#[derive(Debug)]
pub struct Package {
    /// The package's folder: the build slot of its pool it holds.
    dir: PathBuf,
    /// Slot 0's folder, which stands for the package in every slot.
    home: PathBuf,
    /// The target directory's pool of slots; each cargo run takes one.
    targets: Pool,
    /// The target slot this package last built in, tried first.
    target_slot: std::sync::atomic::AtomicUsize,
    /// Whether a wait for a target slot was said already: once a package.
    said_wait: std::sync::atomic::AtomicBool,
    toolchain: Option<String>,
    build_timeout: Duration,
    /// How many rustc a shared build keeps busy side by side (see
    /// `exec::SharedBuild`): one per CPU unless set.
    build_parallelism: usize,
    /// The task's harness; `None` for a suite's package, whose programs
    /// are whole crates of their own.
    harness: Option<Harness>,
    /// What candidates may contain; `write_module` adds what rustc enforces.
    policy: Policy,
    /// Each of the package's own targets' rustc is held to these.
    compile_limits: CompileLimits,
    /// Whether the dependencies were fetched (unconfined) since it opened.
    fetched: std::sync::atomic::AtomicBool,
    /// The address space each run of an image built here gets.
    run_memory: u64,
    /// Shared images built while the package is open, so no build's
    /// target replaces an image built earlier.
    images: std::sync::atomic::AtomicUsize,
    /// The manifest without targets; each build's lists its own.
    manifest: Manifest,
    /// The targets the manifest lists now (`layout`).
    listed: std::sync::Mutex<layout::Listed>,
    /// The package's main lane: one build at a time of the units not yet
    /// suspected of being slow (see [`Package::lane`]).
    lane: tokio::sync::Semaphore,
    /// The folder's slot, held for its lock; released on drop.
    _folder: Slot,
}

/// What a task's package links every candidate with.
#[derive(Debug)]
struct Harness {
    crate_name: String,
    dir: PathBuf,
    entry: String,
}

impl Package {
    /// Opens (creating if needed) the package of `spec`'s task under
    /// `work_dir`, in the first free build slot of its folder
    /// (`work_dir/NAME`, then `NAME.slot1`...), and locks it. Blocks only
    /// while every slot is busy, saying so once. Its builds go to a free
    /// slot of `target_dir`'s pool. Both pools grow to [`pool_size`]
    /// slots. The probe's toolchain is [`TOOLCHAIN_VAR`] if set, else
    /// rustup's default for the work directory.
    pub fn open(spec: &Spec, work_dir: &Path, target_dir: &Path) -> Result<Package> {
        Package::open_with_toolchain(spec, work_dir, target_dir, default_toolchain())
    }

    /// [`Package::open`] with the toolchain given.
    pub fn open_with_toolchain(
        spec: &Spec,
        work_dir: &Path,
        target_dir: &Path,
        toolchain: Option<String>,
    ) -> Result<Package> {
        let size = pool_size()?;
        let (dir, home, folder) = lock_folder(&work_dir.join(&spec.name), size)?;
        let package = Package {
            targets: target_pool(target_dir, size)?,
            target_slot: Default::default(),
            said_wait: Default::default(),
            toolchain,
            build_timeout: BUILD_TIMEOUT,
            build_parallelism: cargo_jobs(),
            harness: Some(Harness {
                crate_name: spec.harness.crate_name.clone(),
                dir: spec.harness.dir.clone(),
                entry: spec.entry.clone(),
            }),
            policy: spec.policy.clone(),
            compile_limits: spec.probe.compile_limits,
            fetched: std::sync::atomic::AtomicBool::new(false),
            run_memory: spec.limits.memory_bytes,
            images: std::sync::atomic::AtomicUsize::new(0),
            listed: Default::default(),
            lane: tokio::sync::Semaphore::new(1),
            manifest: Manifest::task(
                &spec.name,
                &spec.harness.package,
                &spec.harness.dir.display().to_string(),
            ),
            _folder: folder,
            dir,
            home,
        };
        package.reset()?;
        Ok(package)
    }

    /// Opens (creating if needed) the package that builds suites'
    /// programs, in the first free build slot of `WORK/suite`, and locks
    /// it: one suite at a time writes programs into a slot; its builds go
    /// to a free slot of `target_dir`'s pool (see [`Package::open`]).
    /// Programs are modules of shared images, or targets of their own
    /// (`exec`), written with [`Package::write_cands_file`]; there is no
    /// harness. Every program is built in `edition`.
    pub fn open_suite(
        work_dir: &Path,
        target_dir: &Path,
        policy: Policy,
        compile_limits: CompileLimits,
        run_memory: u64,
        edition: Edition,
    ) -> Result<Package> {
        let size = pool_size()?;
        let (dir, home, folder) = lock_folder(&work_dir.join("suite"), size)?;
        let package = Package {
            targets: target_pool(target_dir, size)?,
            target_slot: Default::default(),
            said_wait: Default::default(),
            toolchain: default_toolchain(),
            build_timeout: BUILD_TIMEOUT,
            build_parallelism: cargo_jobs(),
            harness: None,
            policy,
            compile_limits,
            fetched: std::sync::atomic::AtomicBool::new(false),
            run_memory,
            images: std::sync::atomic::AtomicUsize::new(0),
            listed: Default::default(),
            lane: tokio::sync::Semaphore::new(1),
            manifest: Manifest::suite(edition),
            _folder: folder,
            dir,
            home,
        };
        package.clear_sources()?;
        package.set_targets([], [])?;
        Ok(package)
    }

    /// The package's main lane, which every build of honest units holds
    /// while it runs (a rustc per CPU keeps the cores busy), so waves built
    /// side by side take turns in it. What is left of a group that overran
    /// its budget builds beside it without the lane: one slow compile
    /// costs a core for its own limit, never the waves behind it.
    pub fn lane(&self) -> &tokio::sync::Semaphore {
        &self.lane
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Slot 0's folder, whichever slot this package holds: the place for
    /// what holds in every slot, such as a passed task check's stamp, so
    /// that a batch in another slot finds it. Written there only whole
    /// (a file renamed into place): its holder may be working beside it.
    pub fn home(&self) -> &Path {
        &self.home
    }

    /// The target directory the package last built in (before its first
    /// build, the one it will try first).
    pub fn target_dir(&self) -> PathBuf {
        self.targets
            .path(self.target_slot.load(std::sync::atomic::Ordering::Acquire))
    }

    /// Takes a free slot of the target directory's pool for one build,
    /// the one last built in first; while every slot is busy, waits,
    /// saying so once for the package.
    async fn take_target(&self) -> Result<Slot> {
        use std::sync::atomic::Ordering;
        let prefer = self.target_slot.load(Ordering::Acquire);
        let slot = self
            .targets
            .take(prefer, |why| {
                if !self.said_wait.swap(true, Ordering::AcqRel) {
                    slots::say_waiting(why);
                } else {
                    tracing::debug!("{why}");
                }
            })
            .await?;
        if slot.index != prefer {
            tracing::info!(target_dir = %slot.path.display(), "building in another slot of the target directory");
        }
        self.target_slot.store(slot.index, Ordering::Release);
        Ok(slot)
    }

    /// The toolchain asked for, `None` for rustup's default.
    pub fn toolchain(&self) -> Option<&str> {
        self.toolchain.as_deref()
    }

    /// The task's harness; a suite's package has none, and nothing that
    /// links one may be built in it.
    fn harness(&self) -> Result<&Harness> {
        self.harness
            .as_ref()
            .context("a suite's package links no harness")
    }

    /// The task's policy for candidates' sources.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// The task's harness crate, as its candidates' modules name it; `None`
    /// for a suite's package.
    pub fn harness_crate(&self) -> Option<&str> {
        self.harness.as_ref().map(|h| h.crate_name.as_str())
    }

    /// The task's harness crate's folder; `None` for a suite's package.
    pub fn harness_dir(&self) -> Option<&Path> {
        self.harness.as_ref().map(|h| h.dir.as_path())
    }

    /// The address space each run of an image built here gets.
    pub fn run_memory(&self) -> u64 {
        self.run_memory
    }

    /// The limits of each of the package's own targets' rustc.
    pub fn compile_limits(&self) -> CompileLimits {
        self.compile_limits
    }
}

/// Takes the first free slot of the package folder `base`'s pool,
/// waiting while all are busy (saying so once), and resolves it.
fn lock_folder(base: &Path, size: usize) -> Result<(PathBuf, PathBuf, Slot)> {
    let slot = Pool::new(base, size).take_blocking(0, slots::say_waiting)?;
    if slot.index > 0 {
        tracing::info!(package = %slot.path.display(), "the package's folder is in use; building in another slot");
    }
    let resolve = |path: &Path| {
        std::fs::canonicalize(path)
            .with_context(|| format!("cannot resolve work directory {}", path.display()))
    };
    // Slot 0 exists: a taker looks at it first, creating it.
    Ok((resolve(&slot.path)?, resolve(base)?, slot))
}

/// The pool of `target_dir`, its slot 0 created (if needed) and resolved.
/// Each slot is created unconfined, by [`Pool::take`]: the sandboxed cargo
/// may write inside the target directory but not beside it, where cargo
/// would otherwise make a temporary directory to create it atomically.
///
/// Resolved to its real path: a slot's cargo home is inside it, and cargo
/// fingerprints a registry crate by the path of its source there, so a
/// work directory reached through a symlink (a linked cache folder) would
/// rebuild every dependency, and the next build by the real path every
/// one again.
fn target_pool(target_dir: &Path, size: usize) -> Result<Pool> {
    std::fs::create_dir_all(target_dir)
        .with_context(|| format!("cannot create target directory {}", target_dir.display()))?;
    let base = std::fs::canonicalize(target_dir)
        .with_context(|| format!("cannot resolve target directory {}", target_dir.display()))?;
    Ok(Pool::new(&base, size))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_creates_the_target_directory() {
        let tiny = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tiny");
        let spec = Spec::load(&tiny).unwrap();
        let work = tempfile::tempdir().unwrap();
        let target = work.path().join("fresh/target");
        let _package = Package::open_with_toolchain(&spec, work.path(), &target, None).unwrap();
        assert!(target.is_dir());
    }

    #[test]
    fn a_target_directory_reached_through_a_symlink_is_its_real_path() {
        let work = tempfile::tempdir().unwrap();
        let real = work.path().join("real");
        std::fs::create_dir(&real).unwrap();
        let link = work.path().join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let pool = target_pool(&link.join("target"), 2).unwrap();
        let real = real.canonicalize().unwrap();
        assert_eq!(pool.path(0), real.join("target"));
        assert_eq!(pool.path(1), real.join("target.slot1"));
    }

    #[test]
    fn a_package_in_another_slot_has_slot_zero_as_its_home() {
        let work = tempfile::tempdir().unwrap();
        let base = work.path().join("tiny");
        let (first, first_home, _held) = lock_folder(&base, 2).unwrap();
        let (second, second_home, _also) = lock_folder(&base, 2).unwrap();
        let zero = base.canonicalize().unwrap();
        assert_eq!(first, zero);
        assert_eq!(
            second,
            work.path().join("tiny.slot1").canonicalize().unwrap()
        );
        assert_eq!((first_home, second_home), (zero.clone(), zero));
    }
}
