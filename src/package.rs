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

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, Result};
use cargo_metadata::diagnostic::{Diagnostic, DiagnosticLevel, DiagnosticSpan};
use cargo_metadata::Message;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};

use crate::sandbox::compile::LimitHit;
use crate::spec::{CompileLimits, Policy, Rule, Spec};

/// Variables nested cargo may inherit. Everything else is dropped, which
/// covers every variable the issue names as poison for a warm target
/// directory or as a leak: `CARGO` and every `CARGO_*` but `CARGO_HOME`
/// (`CARGO_MANIFEST_DIR`, `CARGO_PKG_*`, `CARGO_TARGET_DIR`,
/// `CARGO_BUILD_*`, `CARGO_ENCODED_RUSTFLAGS`...), `OUT_DIR`,
/// `RUSTUP_TOOLCHAIN`, `RUST_RECURSION_COUNT`, `CARGO_MAKEFLAGS`,
/// `MAKEFLAGS`, `MFLAGS`, `RUSTC`, `RUSTC_WRAPPER`,
/// `RUSTC_WORKSPACE_WRAPPER`, `RUSTFLAGS`, and any API key. An allow-list
/// rather than a deny-list, because a secret's name cannot be known in
/// advance. Cargo configuration belongs in `CARGO_HOME/config.toml`.
pub const INHERITED_ENV: &[&str] = &[
    "PATH",
    "HOME",
    "CARGO_HOME",
    "RUSTUP_HOME",
    "TMPDIR",
    "LANG",
    "LC_ALL",
    "USER",
];

/// The variable that picks the probe's toolchain explicitly (a rustup
/// toolchain name such as `stable` or `1.85.0`). Unset, rustup resolves its
/// own default for the work directory, the same whether `assay` was started
/// as a binary, by `cargo run` or by `cargo +nightly run`.
pub const TOOLCHAIN_VAR: &str = "ASSAY_TOOLCHAIN";

/// The name of the scoring binary's target.
pub const SCORER: &str = "assay_scorer";

/// A build that reached its time limit where no candidate is to blame: the
/// limit is the user's to raise, so this is bad input, naming the limit.
#[derive(Debug, thiserror::Error)]
#[error(
    "{what} did not finish within the build time limit of {secs} s (--build-timeout, or \
     the spec's [probe] build_timeout_s); raise it"
)]
pub struct BuildTimedOut {
    pub what: String,
    pub secs: f64,
}

/// How long one nested cargo build may run, unless the package is told
/// otherwise ([`Package::set_build_timeout`], from `--build-timeout` or the
/// spec's `[probe] build_timeout_s`), before it is killed (its whole process
/// group) and its unfinished targets become `probe_failure(timeout)`.
pub const BUILD_TIMEOUT: Duration = Duration::from_secs(600);

/// A task's generated package, locked for the caller's use.
#[derive(Debug)]
pub struct Package {
    dir: PathBuf,
    target_dir: PathBuf,
    toolchain: Option<String>,
    build_timeout: Duration,
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

/// The profile of a suite's package: MultiPL-E builds each program with a
/// plain `rustc --edition 2021` (no optimisation, debug assertions and
/// overflow checks on), so an overflow panics and a deep recursion
/// overflows the stack exactly as there. No debug information: nothing
/// reads it, and it would make every link dearer.
const SUITE_PROFILE: &str = "[profile.release]\nopt-level = 0\ndebug = false\n\
    debug-assertions = true\noverflow-checks = true\nincremental = false\n";

/// How a candidate's module is named inside the package.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum ModuleKey {
    Candidate(usize),
    Committed,
}

/// What one cargo build said, per target.
#[derive(Debug, Default)]
pub struct BuildReport {
    /// Targets that produced an executable, with its path; for our
    /// unlinked targets (examples of crate type `rlib`), the rlib's path.
    pub built: BTreeMap<String, PathBuf>,
    /// Rendered diagnostics and error codes per target of our package.
    pub diagnostics: BTreeMap<String, TargetDiagnostics>,
    /// Errors from packages other than ours (the harness, a dependency).
    pub dependency_errors: Vec<CompilerDiag>,
    /// Units of other packages (the harness, its dependencies, build
    /// scripts) that cargo found fresh, and those it had to rebuild, as
    /// cargo's `fresh` flag on each artifact says.
    pub deps_fresh: usize,
    pub deps_rebuilt: Vec<String>,
    /// Whether cargo exited successfully.
    pub success: bool,
    /// The signal that ended cargo, if one did.
    pub signal: Option<i32>,
    /// Killed at the package's build time limit.
    pub timed_out: bool,
    /// Targets whose own compile was stopped at its limit
    /// (`sandbox::compile`), with the limit.
    pub limit_hits: BTreeMap<String, LimitHit>,
    /// cargo's own stderr, for infrastructure failures.
    pub stderr: String,
}

#[derive(Debug, Default, Clone)]
pub struct TargetDiagnostics {
    pub rendered: String,
    pub error_codes: Vec<String>,
    pub errors: usize,
    pub warnings: usize,
    /// Internal compiler errors: the compiler's fault, not the candidate's.
    pub ices: usize,
    /// Every message, in order, for callers that attribute them to modules
    /// (a shared build holds many units in one target), up to
    /// [`MAX_MESSAGES`].
    pub messages: Vec<CompilerDiag>,
    /// Messages past [`MAX_MESSAGES`], left unread: a flood of errors
    /// (`compile_error!` in a loop of macros) costs its JSON, not assay's
    /// memory and CPU. Past the cap, rendered text stops too.
    pub dropped: usize,
}

/// The most compiler messages kept per target. A unit with this many has
/// failed many times over; in a shared build, another unit's errors past
/// the cap are found by the next pass, once the flood's unit has left.
pub const MAX_MESSAGES: usize = 2000;

/// The most rendered text kept per target (and per unit of a shared
/// build): what an error file holds. Messages past it are still counted.
pub const MAX_RENDERED: usize = 1 << 20;

/// One compiler message of one of our targets.
#[derive(Debug, Clone)]
pub struct CompilerDiag {
    pub level: DiagLevel,
    pub code: Option<String>,
    pub rendered: String,
    /// rustc's own headline (`mismatched types`).
    pub message: String,
    /// Where its first primary span starts: the file as rustc names it
    /// (relative to the package for ours, absolute for a path dependency)
    /// and the 1-based line.
    pub at: Option<(String, usize)>,
    /// What says more than the headline, a line each: notes without a
    /// span (`expected fn pointer .., found fn item ..`), else the primary
    /// span's label where it names something (`expected `u32`, found
    /// `&str``), and suggestions of one name (`a function with a similar
    /// name exists: `doubled``).
    pub notes: Vec<String>,
    /// Files its spans point into: primary spans first, then the others,
    /// then macro call sites, then the children's (notes, help).
    pub files: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiagLevel {
    Error,
    Ice,
    Warning,
    /// Notes, help, failure notes: kept with the rendered text, not counted.
    Other,
}

/// Which build a cargo run is for. Both build cargo's release profile
/// (optimised, overflow checks on): the probe must answer what the scorer
/// will build, and code under `#[cfg(debug_assertions)]` or one that only
/// fails optimised would otherwise compile in the probe and fail in the
/// scorer, for a reason the probe could not see.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Profile {
    /// The probe's builds.
    Probe,
    /// The scoring images and the judge.
    Score,
}

impl ModuleKey {
    pub fn name(&self) -> String {
        match self {
            ModuleKey::Candidate(i) => format!("c{i}"),
            ModuleKey::Committed => "committed".to_owned(),
        }
    }

    /// The module file, relative to the package.
    pub fn file(&self) -> String {
        format!("cands/{}.rs", self.name())
    }
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
        // Created here, unconfined: the sandboxed cargo may write inside the
        // target directory but not beside it, where cargo would otherwise
        // make a temporary directory to create it atomically.
        std::fs::create_dir_all(target_dir)
            .with_context(|| format!("cannot create target directory {}", target_dir.display()))?;
        let package = Package {
            target_dir: std::path::absolute(target_dir).with_context(|| {
                format!("cannot resolve target directory {}", target_dir.display())
            })?,
            toolchain,
            build_timeout: BUILD_TIMEOUT,
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
            _lock: lock,
            dir,
        };
        package.reset(spec)?;
        Ok(package)
    }

    /// Opens (creating if needed) the package that builds suites'
    /// programs, `WORK/suite`, and locks it: one suite at a time writes
    /// programs into it. Programs are modules of shared images, or targets
    /// of their own (`exec`), written with [`Package::write_cands_file`];
    /// there is no harness.
    pub fn open_suite(
        work_dir: &Path,
        target_dir: &Path,
        policy: Policy,
        compile_limits: CompileLimits,
        run_memory: u64,
    ) -> Result<Package> {
        let (dir, lock) = lock_dir(&work_dir.join("suite"))?;
        std::fs::create_dir_all(target_dir)
            .with_context(|| format!("cannot create target directory {}", target_dir.display()))?;
        let package = Package {
            target_dir: std::path::absolute(target_dir).with_context(|| {
                format!("cannot resolve target directory {}", target_dir.display())
            })?,
            toolchain: default_toolchain(),
            build_timeout: BUILD_TIMEOUT,
            harness: None,
            policy,
            compile_limits,
            fetched: std::sync::atomic::AtomicBool::new(false),
            run_memory,
            images: std::sync::atomic::AtomicUsize::new(0),
            _lock: lock,
            dir,
        };
        package.clear_sources()?;
        let manifest = format!(
            "# Generated by assay for suites; rewritten every wave.\n\
             [package]\nname = \"assay-suite\"\nversion = \"0.0.0\"\nedition = \"2021\"\n\
             publish = false\nautobins = false\nautoexamples = false\nautotests = false\nautobenches = false\n\n\
             {SUITE_PROFILE}\n\
             # Not part of any enclosing workspace.\n[workspace]\n"
        );
        write(&package.dir.join("Cargo.base.toml"), &manifest)?;
        write(&package.dir.join("Cargo.toml"), &manifest)?;
        Ok(package)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A tag unique to this package among those sharing its target
    /// directory (they are folders of one work directory, so their names
    /// differ), fit for a target name: the FNV-1a hash of the folder's
    /// name. Executed targets carry it, because cargo copies each binary
    /// to one name in the target directory, shared by every package.
    pub fn target_tag(&self) -> String {
        target_tag_of(&self.dir)
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

    /// The address space each run of an image built here gets.
    pub fn run_memory(&self) -> u64 {
        self.run_memory
    }

    /// A new shared image's target name, unique among the package's
    /// images until it is opened again, and among the packages sharing its
    /// target directory (see [`Package::target_tag`]).
    pub fn next_image_target(&self) -> String {
        let n = self
            .images
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        format!("img_{}_{n}", self.target_tag())
    }

    /// The limits of each of the package's own targets' rustc.
    pub fn compile_limits(&self) -> CompileLimits {
        self.compile_limits
    }

    /// Sets how long each later build may run before it is killed.
    pub fn set_build_timeout(&mut self, limit: Duration) {
        self.build_timeout = limit;
    }

    /// The error of a build of `what` that reached this package's time
    /// limit where no candidate's verdict can carry it (the scorer).
    pub fn timed_out(&self, what: &str) -> BuildTimedOut {
        BuildTimedOut {
            what: what.to_owned(),
            secs: self.build_timeout.as_secs_f64(),
        }
    }

    /// Clears the previous batch's sources and writes a manifest with no
    /// targets yet. The target directory and Cargo.lock stay (warm).
    fn reset(&self, spec: &Spec) -> Result<()> {
        self.clear_sources()?;
        let harness_dir = spec.harness.dir.display().to_string();
        let manifest = format!(
            "# Generated by assay for task `{task}`; rewritten every batch.\n\
             [package]\nname = \"assay-{task}\"\nversion = \"0.0.0\"\nedition = \"2021\"\n\
             publish = false\nautobins = false\nautoexamples = false\nautotests = false\nautobenches = false\n\n\
             [dependencies]\n{package} = {{ path = {harness} }}\n\
             assay-runner = {{ path = \"runner\" }}\n\n\
             [profile.dev]\ndebug = false\nincremental = false\n\n\
             [profile.release]\ndebug = false\nincremental = false\noverflow-checks = true\n\n\
             # Each of this package's targets is one small crate: one codegen\n\
             # unit spares the ThinLTO pass between units (docs/benchmarks.md).\n\
             [profile.release.package.\"assay-{task}\"]\ncodegen-units = 1\n\n\
             # Not part of any enclosing workspace.\n[workspace]\n",
            task = spec.name,
            package = spec.harness.package,
            harness = toml_string(&harness_dir),
        );
        write_runner_crate(&self.dir.join("runner"))?;
        write(&self.dir.join("Cargo.base.toml"), &manifest)?;
        write(&self.dir.join("Cargo.toml"), &manifest)
    }

    /// Removes the last batch's or suite's sources.
    fn clear_sources(&self) -> Result<()> {
        let cands = self.dir.join("cands");
        if cands.exists() {
            std::fs::remove_dir_all(&cands)
                .with_context(|| format!("cannot clear {}", cands.display()))?;
        }
        std::fs::create_dir_all(&cands)
            .with_context(|| format!("cannot create {}", cands.display()))
    }

    /// Writes a candidate's module file: its source unchanged, then the glue
    /// that brings the harness into scope and names the entry function.
    /// Unless the policy allows unsafe code, the file starts with
    /// `#![forbid(unsafe_code)]` on the source's first line (so line numbers
    /// stay the source's): rustc then refuses whatever the policy's scan
    /// missed, in macro expansions too, and nothing in the module can lower
    /// a `forbid`.
    pub fn write_module(&self, key: &ModuleKey, source: &str) -> Result<()> {
        let guard = if self.policy.allows(Rule::UnsafeCode) {
            ""
        } else {
            "#![forbid(unsafe_code)] "
        };
        let harness = self.harness()?;
        let glue = format!(
            "\n#[allow(unused_imports)]\nuse {h}::*;\npub(crate) const __ASSAY_ENTRY: {h}::Entry = {e};\n",
            h = harness.crate_name,
            e = harness.entry,
        );
        // The candidate is module `cN` of its image: its `crate::` paths
        // name its own items, so they are rebased onto that module.
        let source = crate::policy::rebase_crate_paths(source, &[&key.name()]);
        let mut text = String::with_capacity(guard.len() + source.len() + glue.len());
        text.push_str(guard);
        text.push_str(&source);
        text.push_str(&glue);
        write(&self.dir.join(key.file()), &text)
    }

    /// Writes a file of a unit beside the module files (`cands/NAME`): a
    /// suite program's module and its tests' module.
    pub fn write_cands_file(&self, name: &str, text: &str) -> Result<()> {
        write(&self.dir.join("cands").join(name), text)
    }

    /// Writes a binary target's root file. It sits beside the module files,
    /// so `#[path = "c3.rs"]` names a module and diagnostics read `cands/c3.rs`.
    pub fn write_bin(&self, name: &str, text: &str) -> Result<()> {
        write(&self.dir.join(format!("cands/{name}.main.rs")), text)
    }

    /// Writes an unlinked target's root file (`cands/c3.lib.rs`), beside
    /// the module files as [`Package::write_bin`] does.
    pub fn write_lib_root(&self, name: &str, text: &str) -> Result<()> {
        write(&self.dir.join(format!("cands/{name}.lib.rs")), text)
    }

    /// Rewrites the manifest with these binary targets.
    pub fn set_bins<'a>(&self, names: impl IntoIterator<Item = &'a str>) -> Result<()> {
        self.set_targets(names, [])
    }

    /// Rewrites the manifest with these binary targets (root
    /// `cands/NAME.main.rs`) and these unlinked targets (root
    /// `cands/NAME.lib.rs`): examples of crate type `rlib`, which rustc
    /// compiles through code generation into an rlib but never links.
    pub fn set_targets<'a, 'b>(
        &self,
        bins: impl IntoIterator<Item = &'a str>,
        libs: impl IntoIterator<Item = &'b str>,
    ) -> Result<()> {
        let base = std::fs::read_to_string(self.dir.join("Cargo.base.toml"))
            .context("cannot read the generated base manifest")?;
        let mut manifest = base;
        for name in bins {
            manifest.push_str(&format!(
                "\n[[bin]]\nname = \"{name}\"\npath = \"cands/{name}.main.rs\"\ntest = false\nbench = false\ndoc = false\n"
            ));
        }
        for name in libs {
            manifest.push_str(&format!(
                "\n[[example]]\nname = \"{name}\"\npath = \"cands/{name}.lib.rs\"\ncrate-type = [\"rlib\"]\ntest = false\nbench = false\ndoc = false\n"
            ));
        }
        write(&self.dir.join("Cargo.toml"), &manifest)
    }

    /// Builds the harness and its dependencies alone (no candidate), so
    /// that timing a probe afterwards measures candidates only.
    pub async fn warm_up(&self, profile: Profile) -> Result<BuildReport> {
        const WARM: &str = "assay_warm";
        self.write_bin(
            WARM,
            &format!(
                "// Builds the harness alone; generated by assay.
use {} as _;
fn main() {{}}
",
                self.harness()?.crate_name
            ),
        )?;
        self.set_bins([WARM])?;
        self.build(profile, &[WARM.to_owned()], |_, _| {}).await
    }

    /// Builds the given binaries with `--keep-going`, reading cargo's JSON
    /// messages as they come. `on_built` is called as each target finishes,
    /// with its artifact.
    pub async fn build(
        &self,
        profile: Profile,
        bins: &[String],
        on_built: impl FnMut(&str, &Path),
    ) -> Result<BuildReport> {
        self.build_targets(profile, bins, &[], on_built).await
    }

    /// [`Package::build`] of binaries whose rustc gets `limits` rather than
    /// the package's own (a shared crate of many units gets more).
    pub async fn build_limited(
        &self,
        profile: Profile,
        bins: &[String],
        limits: CompileLimits,
    ) -> Result<BuildReport> {
        let args: Vec<String> = bins
            .iter()
            .flat_map(|b| ["--bin".to_owned(), b.clone()])
            .collect();
        self.run_cargo_limited(profile, &args, limits, |_, _| {})
            .await
    }

    /// [`Package::build`] of binaries and unlinked targets (see
    /// [`Package::set_targets`]) in one cargo build.
    pub async fn build_targets(
        &self,
        profile: Profile,
        bins: &[String],
        libs: &[String],
        on_built: impl FnMut(&str, &Path),
    ) -> Result<BuildReport> {
        let mut args = Vec::with_capacity((bins.len() + libs.len()) * 2);
        for bin in bins {
            args.push("--bin".to_owned());
            args.push(bin.clone());
        }
        for lib in libs {
            args.push("--example".to_owned());
            args.push(lib.clone());
        }
        self.run_cargo(profile, &args, on_built).await
    }

    async fn run_cargo(
        &self,
        profile: Profile,
        selection: &[String],
        on_built: impl FnMut(&str, &Path),
    ) -> Result<BuildReport> {
        self.run_cargo_limited(profile, selection, self.compile_limits, on_built)
            .await
    }

    async fn run_cargo_limited(
        &self,
        profile: Profile,
        selection: &[String],
        limits: CompileLimits,
        mut on_built: impl FnMut(&str, &Path),
    ) -> Result<BuildReport> {
        self.fetch_dependencies().await?;
        let mut cmd = scrubbed_cargo(self.toolchain.as_deref());
        let mut paths = crate::sandbox::BuildPaths {
            read: self.harness.iter().map(|h| h.dir.clone()).collect(),
            write: vec![self.dir.clone(), self.target_dir.clone()],
            cargo_home: self.target_dir.join("cargo-home"),
        };
        paths
            .read
            .extend(crate::sandbox::compile::wrapper_exe().map(Path::to_path_buf));
        if !crate::sandbox::compile::wrap(&mut cmd, limits, &self.dir, &paths)? {
            static WARNED: std::sync::Once = std::sync::Once::new();
            WARNED.call_once(|| {
                tracing::warn!(
                    "no compile wrapper: a candidate's compile is limited only by the whole \
                     build's time limit"
                )
            });
        }
        crate::sandbox::confine_cargo(&mut cmd, &paths)?;
        let target_dir = std::path::absolute(&self.target_dir)
            .with_context(|| format!("cannot resolve {}", self.target_dir.display()))?;
        cmd.arg("build")
            .arg("--keep-going")
            .arg("--message-format=json")
            .arg("--manifest-path")
            .arg(self.dir.join("Cargo.toml"))
            .arg("--target-dir")
            .arg(&target_dir);
        // One profile for every build (see `Profile`).
        cmd.arg("--release");
        cmd.args(selection);
        // cargo reads `.cargo/config.toml` in every folder above its working
        // directory; from the package's (under `~/.cache` by default) that
        // includes the user's `~/.cargo/config.toml`, which the confined
        // build may not read ("could not load Cargo configuration"). From
        // `/` it reads only its shadow home's, as the sandbox intends;
        // cargo runs rustc from the package's root whatever its own.
        cmd.current_dir("/")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // Its own process group, so a timeout kills rustc and the linker
            // too, not only cargo.
            .process_group(0)
            .kill_on_drop(true);
        tracing::debug!(?profile, args = selection.len(), "cargo build");
        let mut child = cmd.spawn().context("cannot start cargo")?;
        let pgid = child.id();
        // A build abandoned half-way (the batch interrupted, its future
        // dropped) takes rustc and the linker down with cargo.
        let mut group = BuildGroup {
            pgid,
            reaped: false,
        };
        if let Some(pgid) = pgid {
            crate::testpoint::hold_build(pgid).await;
        }
        if crate::testpoint::take_kill_next_build() {
            group.kill();
        }
        let stdout = child.stdout.take().expect("piped stdout");
        let mut stderr = child.stderr.take().expect("piped stderr");
        let stderr_task = tokio::spawn(async move {
            let mut text = String::new();
            let _ = stderr.read_to_string(&mut text).await;
            text
        });

        let mut report = BuildReport::default();
        let reading = async {
            let mut lines = BufReader::new(stdout).lines();
            while let Some(line) = lines
                .next_line()
                .await
                .context("cannot read cargo's output")?
            {
                self.take_message(&line, &mut report, &mut on_built);
            }
            anyhow::Ok(())
        };
        match tokio::time::timeout(self.build_timeout, reading).await {
            Ok(read) => read?,
            Err(_) => {
                report.timed_out = true;
                group.kill();
            }
        }
        let status = child.wait().await.context("cargo did not finish")?;
        // Reaped: its group needs no killing (and its id may be reused).
        group.reaped = true;
        for target in selection.iter().skip(1).step_by(2) {
            if let Some(hit) = crate::sandbox::compile::limit_hit(&self.dir, target) {
                report.limit_hits.insert(target.clone(), hit);
            }
        }
        report.success = status.success();
        report.signal = status.signal();
        report.stderr = stderr_task.await.unwrap_or_default();
        for diag in report.diagnostics.values_mut() {
            diag.error_codes.sort();
            diag.error_codes.dedup();
        }
        Ok(report)
    }

    /// Resolves and downloads the package's dependencies (the harness's)
    /// with the package's own toolchain, before any confined build: the
    /// confined cargo may neither connect nor write the cargo home, so it
    /// runs offline. Unconfined, and safe so: only our manifest and the
    /// task's harness are read (no candidate code), and `cargo fetch`
    /// compiles nothing and runs no build script. Once per opened package,
    /// and only when there is no lock file yet or the harness's manifest
    /// is newer than it.
    async fn fetch_dependencies(&self) -> Result<()> {
        use std::sync::atomic::Ordering;
        if self.fetched.load(Ordering::Acquire) {
            return Ok(());
        }
        let harness_dirs: Vec<PathBuf> = self.harness.iter().map(|h| h.dir.clone()).collect();
        if needs_fetch(&self.dir.join("Cargo.lock"), &harness_dirs) {
            let out = scrubbed_cargo(self.toolchain.as_deref())
                .arg("fetch")
                .arg("--manifest-path")
                .arg(self.dir.join("Cargo.toml"))
                .current_dir(&self.dir)
                .stdin(Stdio::null())
                .kill_on_drop(true)
                .output()
                .await
                .context("cannot start cargo fetch")?;
            if !out.status.success() {
                anyhow::bail!(
                    "cargo fetch for {} failed:\n{}",
                    self.dir.display(),
                    String::from_utf8_lossy(&out.stderr)
                );
            }
        }
        self.fetched.store(true, Ordering::Release);
        Ok(())
    }

    /// Folds one line of cargo's output into the report. Lines that are not
    /// JSON messages pass by, as cargo's own tools do.
    fn take_message(
        &self,
        line: &str,
        report: &mut BuildReport,
        on_built: &mut impl FnMut(&str, &Path),
    ) {
        if line.starts_with("{\"reason\":\"compiler-message\"") {
            // Past the cap, a message is counted without being read. cargo
            // puts the target's name in the line; the cheap look for it
            // only decides whether to parse at all.
            let full = report.diagnostics.iter_mut().find(|(name, d)| {
                d.messages.len() >= MAX_MESSAGES && line.contains(&format!("\"name\":\"{name}\""))
            });
            if let Some((_, diag)) = full {
                diag.dropped += 1;
                return;
            }
        }
        let Ok(message) = serde_json::from_str::<Message>(line) else {
            return;
        };
        match message {
            Message::CompilerArtifact(artifact) => {
                let ours = artifact
                    .target
                    .src_path
                    .as_std_path()
                    .starts_with(&self.dir);
                if !ours {
                    if artifact.fresh {
                        report.deps_fresh += 1;
                    } else {
                        report.deps_rebuilt.push(format!(
                            "{} ({})",
                            artifact.target.name, artifact.package_id
                        ));
                    }
                }
                // Ours and unlinked: the rlib is the artifact.
                let rlib = || {
                    artifact
                        .filenames
                        .iter()
                        .find(|f| f.extension() == Some("rlib"))
                        .cloned()
                };
                let output = match artifact.executable.clone() {
                    Some(exe) => Some(exe),
                    None if ours && artifact.target.is_example() => rlib(),
                    None => None,
                };
                if let Some(path) = output {
                    let path = path.into_std_path_buf();
                    on_built(&artifact.target.name, &path);
                    report.built.insert(artifact.target.name.clone(), path);
                }
            }
            Message::CompilerMessage(msg) => {
                let diag = CompilerDiag::from_rustc(&msg.message);
                // Our targets' roots are our files; anything else is a dependency.
                if msg.target.src_path.as_std_path().starts_with(&self.dir) {
                    let entry = report
                        .diagnostics
                        .entry(msg.target.name.clone())
                        .or_default();
                    if entry.rendered.len() < MAX_RENDERED {
                        entry.rendered.push_str(&diag.rendered);
                    }
                    match diag.level {
                        DiagLevel::Error | DiagLevel::Ice => {
                            entry.errors += 1;
                            if diag.level == DiagLevel::Ice {
                                entry.ices += 1;
                            }
                            if let Some(code) = &diag.code {
                                entry.error_codes.push(code.clone());
                            }
                        }
                        DiagLevel::Warning => entry.warnings += 1,
                        DiagLevel::Other => {}
                    }
                    entry.messages.push(diag);
                } else if matches!(diag.level, DiagLevel::Error | DiagLevel::Ice) {
                    report.dependency_errors.push(diag);
                }
            }
            _ => {}
        }
    }
}

impl CompilerDiag {
    fn from_rustc(d: &Diagnostic) -> CompilerDiag {
        let level = match d.level {
            DiagnosticLevel::Error => DiagLevel::Error,
            DiagnosticLevel::Ice => DiagLevel::Ice,
            DiagnosticLevel::Warning => DiagLevel::Warning,
            _ => DiagLevel::Other,
        };
        let mut files = Vec::new();
        let primary = d.spans.iter().filter(|s| s.is_primary);
        let secondary = d.spans.iter().filter(|s| !s.is_primary);
        for span in primary.chain(secondary) {
            push_span_files(span, &mut files);
        }
        for child in &d.children {
            for span in &child.spans {
                push_span_files(span, &mut files);
            }
        }
        let at = d
            .spans
            .iter()
            .find(|s| s.is_primary)
            .map(|s| (s.file_name.clone(), s.line_start));
        let mut notes: Vec<String> = d.children.iter().filter_map(child_note).collect();
        // Without a note, the primary span's label may be all the detail
        // there is (`expected `u32`, found `&str``); one that names nothing
        // (`not found in this scope`) only repeats the headline.
        let label = d
            .spans
            .iter()
            .find(|s| s.is_primary)
            .and_then(|s| s.label.clone())
            .filter(|l| l.contains('`'));
        let has_note = d
            .children
            .iter()
            .any(|c| matches!(c.level, DiagnosticLevel::Note) && c.spans.is_empty());
        if let (Some(label), false) = (label, has_note) {
            notes.insert(0, label);
        }
        CompilerDiag {
            level,
            code: d.code.as_ref().map(|c| c.code.clone()),
            rendered: d.rendered.clone().unwrap_or_default(),
            message: d.message.clone(),
            at,
            notes,
            files,
        }
    }

    pub fn is_error(&self) -> bool {
        matches!(self.level, DiagLevel::Error | DiagLevel::Ice)
    }

    /// The message as one line, for a one-line report: `error[E0308]:
    /// mismatched types; expected fn pointer `..`, found fn item `..``.
    pub fn one_line(&self) -> String {
        let level = match self.level {
            DiagLevel::Error => "error",
            DiagLevel::Ice => "internal compiler error",
            DiagLevel::Warning => "warning",
            DiagLevel::Other => "note",
        };
        let mut line = match &self.code {
            Some(code) => format!("{level}[{code}]: {}", self.message),
            None => format!("{level}: {}", self.message),
        };
        for note in &self.notes {
            line.push_str("; ");
            line.push_str(note);
        }
        collapse_lines(&line)
    }
}

/// A child worth a line of its own (see [`CompilerDiag::notes`]). A
/// suggestion that would insert code (an import, a whole item) is left
/// out: it is rustc's guess at a fix for its own context, ours.
fn child_note(child: &Diagnostic) -> Option<String> {
    match child.level {
        DiagnosticLevel::Note if child.spans.is_empty() => Some(child.message.clone()),
        DiagnosticLevel::Help => {
            let names: Vec<&str> = child
                .spans
                .iter()
                .filter_map(|s| s.suggested_replacement.as_deref())
                .collect();
            let one_name = |n: &&str| syn::parse_str::<syn::Path>(n).is_ok();
            match names.first() {
                Some(name) if names.iter().all(one_name) => {
                    Some(format!("help: {}: `{name}`", child.message))
                }
                _ => None,
            }
        }
        _ => None,
    }
}

/// Lines joined with `, ` and runs of spaces made one: rustc aligns the
/// `expected`/`found` lines of a note under each other.
fn collapse_lines(text: &str) -> String {
    text.lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(", ")
}

impl BuildReport {
    /// What the packages other than ours said, rendered.
    pub fn dependency_text(&self) -> String {
        self.dependency_errors
            .iter()
            .map(|d| d.rendered.as_str())
            .collect()
    }
}

/// [`Package::target_tag`] of the package in `dir`.
fn target_tag_of(dir: &Path) -> String {
    let name = dir.file_name().unwrap_or_default();
    let hash = name
        .as_encoded_bytes()
        .iter()
        .fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
        });
    format!("{:08x}", hash as u32)
}

fn push_span_files(span: &DiagnosticSpan, files: &mut Vec<String>) {
    if !files.contains(&span.file_name) {
        files.push(span.file_name.clone());
    }
    if let Some(expansion) = &span.expansion {
        push_span_files(&expansion.span, files);
    }
}

/// Creates `dir`, resolves it and takes the exclusive lock on its
/// `.assay-lock`, blocking while another process holds it.
fn lock_dir(dir: &Path) -> Result<(PathBuf, File)> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("cannot create work directory {}", dir.display()))?;
    let dir = std::fs::canonicalize(dir)
        .with_context(|| format!("cannot resolve work directory {}", dir.display()))?;
    let lock_path = dir.join(".assay-lock");
    let lock = File::create(&lock_path)
        .with_context(|| format!("cannot create {}", lock_path.display()))?;
    lock.lock()
        .with_context(|| format!("cannot lock {}", lock_path.display()))?;
    Ok((dir, lock))
}

/// The toolchain [`TOOLCHAIN_VAR`] names, if any.
pub fn default_toolchain() -> Option<String> {
    std::env::var(TOOLCHAIN_VAR)
        .ok()
        .filter(|t| !t.trim().is_empty())
}

/// The one constructor of nested cargo commands: `cargo` with the scrubbed
/// environment of [`nested_env`], the toolchain pinned when one is given.
/// Anything that confines nested builds further wraps this function.
pub fn scrubbed_cargo(toolchain: Option<&str>) -> tokio::process::Command {
    scrubbed_command("cargo", toolchain)
}

/// `program` (`cargo`, `rustc`) in the environment nested cargo gets, so
/// that rustup resolves the same toolchain for it; the probe asks the
/// toolchain's versions this way.
pub fn scrubbed_command(program: &str, toolchain: Option<&str>) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(program);
    cmd.env_clear();
    cmd.envs(nested_env(std::env::vars_os(), toolchain));
    cmd
}

/// The environment nested cargo sees, given ours: [`INHERITED_ENV`] only,
/// with `PATH` stripped of rustup toolchain directories (a `cargo +nightly
/// run` may put one first, which would pick the toolchain behind our back),
/// `RUSTUP_TOOLCHAIN` set only when a toolchain was chosen, and cargo's
/// colour off. Pure, so the rules are tested directly.
pub fn nested_env(
    parent: impl IntoIterator<Item = (OsString, OsString)>,
    toolchain: Option<&str>,
) -> BTreeMap<OsString, OsString> {
    let parent: BTreeMap<OsString, OsString> = parent.into_iter().collect();
    let mut env = BTreeMap::new();
    for key in INHERITED_ENV {
        if let Some(value) = parent.get(OsStr::new(key)) {
            env.insert(OsString::from(key), value.clone());
        }
    }
    if let Some(path) = parent.get(OsStr::new("PATH")) {
        let rustup_home = parent
            .get(OsStr::new("RUSTUP_HOME"))
            .map(PathBuf::from)
            .or_else(|| {
                parent
                    .get(OsStr::new("HOME"))
                    .map(|h| Path::new(h).join(".rustup"))
            });
        let toolchains = rustup_home.map(|h| h.join("toolchains"));
        let kept: Vec<PathBuf> = std::env::split_paths(path)
            .filter(|dir| !toolchains.as_ref().is_some_and(|t| dir.starts_with(t)))
            .collect();
        if let Ok(joined) = std::env::join_paths(kept) {
            env.insert(OsString::from("PATH"), joined);
        }
    }
    if let Some(toolchain) = toolchain {
        env.insert(
            OsString::from("RUSTUP_TOOLCHAIN"),
            OsString::from(toolchain),
        );
    }
    env.insert(OsString::from("CARGO_TERM_COLOR"), OsString::from("never"));
    env
}

/// Writes the runner every scoring image links (`score/runner_lib.rs`),
/// only where its text changed, so cargo keeps its build fresh.
fn write_runner_crate(dir: &Path) -> Result<()> {
    const MANIFEST: &str = "# Generated by assay: the runner of every scoring image.\n\
        [package]\nname = \"assay-runner\"\nversion = \"0.0.0\"\nedition = \"2021\"\n\
        publish = false\n\n[lib]\npath = \"lib.rs\"\n";
    const LIB: &str = include_str!("score/runner_lib.rs");
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    for (name, text) in [("Cargo.toml", MANIFEST), ("lib.rs", LIB)] {
        let path = dir.join(name);
        if std::fs::read_to_string(&path).is_ok_and(|old| old == text) {
            continue;
        }
        write(&path, text)?;
    }
    Ok(())
}

/// Whether the package's dependencies may have changed since `lock` was
/// written: no lock yet, or a path dependency's manifest is newer.
fn needs_fetch(lock: &Path, dependencies: &[PathBuf]) -> bool {
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    let Some(locked) = modified(lock) else {
        return true;
    };
    dependencies
        .iter()
        .filter_map(|d| modified(&d.join("Cargo.toml")))
        .any(|m| m > locked)
}

fn toml_string(s: &str) -> String {
    toml::Value::String(s.to_owned()).to_string()
}

fn write(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}

/// The process group of a running cargo build, killed whole when the build
/// is dropped before cargo was reaped.
///
/// The drop waits until cargo has died (a zombie, or reaped), so once an
/// interrupted `assay` has exited, no build of its is still running.
struct BuildGroup {
    pgid: Option<u32>,
    reaped: bool,
}

impl BuildGroup {
    /// Kills the whole group (cargo, rustc, the linker), unless cargo was
    /// reaped: then its id may be another process's.
    fn kill(&self) {
        if let Some(pgid) = self.pgid.filter(|_| !self.reaped) {
            // SAFETY: signalling a process group we created and have not reaped.
            unsafe { libc::kill(-(pgid as i32), libc::SIGKILL) };
        }
    }
}

impl Drop for BuildGroup {
    fn drop(&mut self) {
        let Some(pgid) = self.pgid.filter(|_| !self.reaped) else {
            return;
        };
        self.kill();
        // SIGKILL takes effect when the process is next scheduled: moments.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while still_runs(pgid) && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

/// Whether `pid` exists and has not exited (a zombie has).
fn still_runs(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        let state = stat.rsplit(')').next().unwrap_or("").trim_start();
        !(state.starts_with('Z') || state.starts_with('X'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression: on a fresh machine the confined cargo was denied creating
    /// the target directory beside itself, and every first batch failed.
    #[test]
    fn packages_of_one_work_directory_tag_their_targets_apart() {
        let work = Path::new("/w");
        let tags: Vec<String> = ["tiny", "tiny-spin", "tiny_spin", "absolute"]
            .iter()
            .map(|t| target_tag_of(&work.join(t)))
            .collect();
        for (i, a) in tags.iter().enumerate() {
            assert!(
                a.len() == 8 && a.bytes().all(|b| b.is_ascii_hexdigit()),
                "{a}"
            );
            assert!(tags[i + 1..].iter().all(|b| b != a), "{tags:?}");
        }
        // Stable: the same package keeps its targets, so its builds stay warm.
        assert_eq!(
            target_tag_of(&work.join("tiny")),
            target_tag_of(Path::new("/x/tiny"))
        );
    }

    #[test]
    fn open_creates_the_target_directory() {
        let tiny = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tiny");
        let spec = Spec::load(&tiny).unwrap();
        let work = tempfile::tempdir().unwrap();
        let target = work.path().join("fresh/target");
        let _package = Package::open_with_toolchain(&spec, work.path(), &target, None).unwrap();
        assert!(target.is_dir());
    }

    fn env_of(pairs: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        pairs
            .iter()
            .map(|(k, v)| (OsString::from(k), OsString::from(v)))
            .collect()
    }

    /// What `cargo +stable run` under a rustup proxy, inside a build script
    /// or a make jobserver, with keys in the shell, hands to `assay`.
    const UNDER_CARGO_RUN: &[(&str, &str)] = &[
        ("PATH", "/root/.rustup/toolchains/stable-x86_64-unknown-linux-gnu/bin:/root/.cargo/bin:/usr/bin"),
        ("HOME", "/root"),
        ("CARGO_HOME", "/root/.cargo"),
        ("RUSTUP_HOME", "/root/.rustup"),
        ("CARGO", "/root/.rustup/toolchains/stable/bin/cargo"),
        ("CARGO_MANIFEST_DIR", "/src/assay"),
        ("CARGO_MANIFEST_PATH", "/src/assay/Cargo.toml"),
        ("CARGO_PKG_NAME", "assay"),
        ("CARGO_PKG_VERSION", "0.1.0"),
        ("CARGO_BIN_NAME", "assay"),
        ("CARGO_CRATE_NAME", "assay"),
        ("CARGO_TARGET_DIR", "/elsewhere"),
        ("CARGO_BUILD_TARGET_DIR", "/elsewhere"),
        ("CARGO_ENCODED_RUSTFLAGS", "-Cdebuginfo=2"),
        ("CARGO_MAKEFLAGS", "-j --jobserver-fds=3,4"),
        ("MAKEFLAGS", "-j4"),
        ("MFLAGS", "-j4"),
        ("OUT_DIR", "/src/assay/target/debug/build/x/out"),
        ("RUSTUP_TOOLCHAIN", "stable"),
        ("RUSTUP_TOOLCHAIN_SOURCE", "cli"),
        ("RUST_RECURSION_COUNT", "1"),
        ("RUSTC", "/usr/bin/rustc"),
        ("RUSTC_WRAPPER", "sccache"),
        ("RUSTC_WORKSPACE_WRAPPER", "clippy-driver"),
        ("RUSTFLAGS", "-Dwarnings"),
        ("OPENAI_API_KEY", "sk-secret"),
        ("ASSAY_POOL_KEY", "secret"),
        ("HF_TOKEN", "secret"),
        ("LANG", "C.UTF-8"),
    ];

    #[test]
    fn nothing_cargo_run_or_rustup_sets_reaches_nested_cargo() {
        let env = nested_env(env_of(UNDER_CARGO_RUN), None);
        let keys: Vec<&str> = env.keys().map(|k| k.to_str().unwrap()).collect();
        assert_eq!(
            keys,
            [
                "CARGO_HOME",
                "CARGO_TERM_COLOR",
                "HOME",
                "LANG",
                "PATH",
                "RUSTUP_HOME"
            ]
        );
        assert_eq!(env[OsStr::new("PATH")], "/root/.cargo/bin:/usr/bin");
        assert_eq!(env[OsStr::new("CARGO_HOME")], "/root/.cargo");
    }

    #[test]
    fn the_toolchain_is_set_only_when_chosen() {
        let env = nested_env(env_of(UNDER_CARGO_RUN), Some("1.85.0"));
        assert_eq!(env[OsStr::new("RUSTUP_TOOLCHAIN")], "1.85.0");
        let env = nested_env(env_of(&[("PATH", "/usr/bin")]), None);
        assert!(!env.contains_key(OsStr::new("RUSTUP_TOOLCHAIN")));
        assert_eq!(env[OsStr::new("PATH")], "/usr/bin");
    }

    #[test]
    fn toolchain_dirs_are_found_under_the_default_rustup_home() {
        let env = nested_env(
            env_of(&[
                ("HOME", "/home/u"),
                ("PATH", "/home/u/.rustup/toolchains/nightly-x/bin:/bin"),
            ]),
            None,
        );
        assert_eq!(env[OsStr::new("PATH")], "/bin");
    }
}
