//! The generated cargo package that probe and score build, and the one place
//! that runs nested cargo.
//!
//! One package per task lives under the work directory; an exclusive file
//! lock on it is held for as long as a batch writes sources into it, so two
//! batches of one task never interleave. The manifest and every file in it
//! are ours: candidates are only module files, so nothing a candidate writes
//! can add a build script, a dependency or a path outside the package.
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
//! `diag` reading what it said. This file opens the package.

mod cargo;
mod diag;
mod env;
mod layout;
mod manifest;

use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};

use crate::spec::{CompileLimits, Edition, Policy, Spec};

pub use cargo::{BuildTimedOut, Profile, BUILD_TIMEOUT};
pub use diag::{
    BuildReport, CompilerDiag, DiagLevel, TargetDiagnostics, MAX_MESSAGES, MAX_RENDERED,
};
pub use env::{
    default_toolchain, nested_env, scrubbed_cargo, scrubbed_command, INHERITED_ENV, TOOLCHAIN_VAR,
};
use layout::lock_dir;
pub use layout::ModuleKey;
use manifest::Manifest;

/// The name of the scoring binary's target.
pub const SCORER: &str = "assay_scorer";

/// A task's generated package, locked for the caller's use.
#[derive(Debug)]
pub struct Package {
    dir: PathBuf,
    target_dir: PathBuf,
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
    /// Held for its lock; released on drop.
    _lock: File,
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
    /// `work_dir` and locks it. Blocks while another batch holds the lock.
    /// The probe's toolchain is [`TOOLCHAIN_VAR`] if set, else rustup's
    /// default for the work directory.
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
        let (dir, lock) = lock_dir(&work_dir.join(&spec.name))?;
        let package = Package {
            target_dir: create_target_dir(target_dir)?,
            toolchain,
            build_timeout: BUILD_TIMEOUT,
            build_parallelism: std::thread::available_parallelism().map_or(1, |n| n.get()),
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
            manifest: Manifest::task(
                &spec.name,
                &spec.harness.package,
                &spec.harness.dir.display().to_string(),
            ),
            _lock: lock,
            dir,
        };
        package.reset()?;
        Ok(package)
    }

    /// Opens (creating if needed) the package that builds suites'
    /// programs, `WORK/suite`, and locks it: one suite at a time writes
    /// programs into it. Programs are modules of shared images, or targets
    /// of their own (`exec`), written with [`Package::write_cands_file`];
    /// there is no harness. Every program is built in `edition`.
    pub fn open_suite(
        work_dir: &Path,
        target_dir: &Path,
        policy: Policy,
        compile_limits: CompileLimits,
        run_memory: u64,
        edition: Edition,
    ) -> Result<Package> {
        let (dir, lock) = lock_dir(&work_dir.join("suite"))?;
        let package = Package {
            target_dir: create_target_dir(target_dir)?,
            toolchain: default_toolchain(),
            build_timeout: BUILD_TIMEOUT,
            build_parallelism: std::thread::available_parallelism().map_or(1, |n| n.get()),
            harness: None,
            policy,
            compile_limits,
            fetched: std::sync::atomic::AtomicBool::new(false),
            run_memory,
            images: std::sync::atomic::AtomicUsize::new(0),
            manifest: Manifest::suite(edition),
            _lock: lock,
            dir,
        };
        package.clear_sources()?;
        package.set_targets([], [])?;
        Ok(package)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn target_dir(&self) -> &Path {
        &self.target_dir
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

/// Creates the target directory (if needed) and resolves it. Created here,
/// unconfined: the sandboxed cargo may write inside the target directory
/// but not beside it, where cargo would otherwise make a temporary
/// directory to create it atomically.
fn create_target_dir(target_dir: &Path) -> Result<PathBuf> {
    std::fs::create_dir_all(target_dir)
        .with_context(|| format!("cannot create target directory {}", target_dir.display()))?;
    std::path::absolute(target_dir)
        .with_context(|| format!("cannot resolve target directory {}", target_dir.display()))
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
}
