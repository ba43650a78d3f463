//! The generated cargo package that probe and score build, and the one place
//! that runs nested cargo.
//!
//! One package per task lives under the work directory; an exclusive file
//! lock on it is held for as long as a batch writes sources into it, so two
//! batches of one task never interleave. The manifest and every file in it
//! are ours: candidates are only module files, so nothing a candidate writes
//! can add a build script, a dependency or a path outside the package.
//!
//! Nested cargo runs in a scrubbed environment (`scrubbed_cargo`): only an
//! allow-list of variables passes, so nothing that `cargo run`, a build
//! script or a wrapper set for us reaches it (which would make cargo treat
//! the warm target directory as stale), and no secret does either.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use anyhow::{Context, Result};
use cargo_metadata::diagnostic::DiagnosticLevel;
use cargo_metadata::Message;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};

use crate::spec::Spec;

/// Variables nested cargo may inherit. Everything else is dropped.
const INHERITED_ENV: &[&str] = &[
    "PATH",
    "HOME",
    "CARGO_HOME",
    "RUSTUP_HOME",
    "TMPDIR",
    "LANG",
    "LC_ALL",
    "USER",
];

/// The name of the scoring binary's target.
pub const SCORER: &str = "assay_scorer";

/// A task's generated package, locked for the caller's use.
#[derive(Debug)]
pub struct Package {
    dir: PathBuf,
    target_dir: PathBuf,
    harness_crate: String,
    harness_dir: PathBuf,
    entry: String,
    /// Held for its lock; released on drop.
    _lock: File,
}

/// How a candidate's module is named inside the package.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum ModuleKey {
    Candidate(usize),
    Committed,
}

/// What one cargo build said, per target.
#[derive(Debug, Default)]
pub struct BuildReport {
    /// Targets that produced an executable, with its path.
    pub built: BTreeMap<String, PathBuf>,
    /// Rendered diagnostics and error codes per target of our package.
    pub diagnostics: BTreeMap<String, TargetDiagnostics>,
    /// Rendered errors from packages other than ours (the harness, a dependency).
    pub dependency_errors: Vec<String>,
    /// Whether cargo exited successfully.
    pub success: bool,
    /// cargo's own stderr, for infrastructure failures.
    pub stderr: String,
}

#[derive(Debug, Default, Clone)]
pub struct TargetDiagnostics {
    pub rendered: String,
    pub error_codes: Vec<String>,
    pub errors: usize,
    pub warnings: usize,
    /// Module files that errors point into (`cands/c3.rs`), for blame.
    pub error_files: Vec<String>,
}

/// A cargo profile as the generated manifest defines them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Profile {
    /// Fast to compile; what the probe uses.
    Probe,
    /// Optimised, overflow checks on; what the scorer uses.
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
    pub fn open(spec: &Spec, work_dir: &Path, target_dir: &Path) -> Result<Package> {
        let dir = work_dir.join(&spec.name);
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create work directory {}", dir.display()))?;
        let dir = std::fs::canonicalize(&dir)
            .with_context(|| format!("cannot resolve work directory {}", dir.display()))?;
        let lock_path = dir.join(".assay-lock");
        let lock = File::create(&lock_path)
            .with_context(|| format!("cannot create {}", lock_path.display()))?;
        lock.lock()
            .with_context(|| format!("cannot lock {}", lock_path.display()))?;
        let package = Package {
            target_dir: target_dir.to_path_buf(),
            harness_crate: spec.harness.crate_name.clone(),
            harness_dir: spec.harness.dir.clone(),
            entry: spec.entry.clone(),
            _lock: lock,
            dir,
        };
        package.reset(spec)?;
        Ok(package)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Clears the previous batch's sources and writes a manifest with no
    /// targets yet. The target directory and Cargo.lock stay (warm).
    fn reset(&self, spec: &Spec) -> Result<()> {
        for sub in ["cands"] {
            let path = self.dir.join(sub);
            if path.exists() {
                std::fs::remove_dir_all(&path)
                    .with_context(|| format!("cannot clear {}", path.display()))?;
            }
            std::fs::create_dir_all(&path)
                .with_context(|| format!("cannot create {}", path.display()))?;
        }
        let harness_dir = spec.harness.dir.display().to_string();
        let manifest = format!(
            "# Generated by assay for task `{task}`; rewritten every batch.\n\
             [package]\nname = \"assay-{task}\"\nversion = \"0.0.0\"\nedition = \"2021\"\n\
             publish = false\nautobins = false\nautoexamples = false\nautotests = false\nautobenches = false\n\n\
             [dependencies]\n{package} = {{ path = {harness} }}\n\n\
             [profile.dev]\ndebug = false\nincremental = false\n\n\
             [profile.release]\ndebug = false\nincremental = false\noverflow-checks = true\n\n\
             # Not part of any enclosing workspace.\n[workspace]\n",
            task = spec.name,
            package = spec.harness.package,
            harness = toml_string(&harness_dir),
        );
        write(&self.dir.join("Cargo.base.toml"), &manifest)?;
        write(&self.dir.join("Cargo.toml"), &manifest)
    }

    /// Writes a candidate's module file: its source unchanged, then the glue
    /// that brings the harness into scope and names the entry function.
    pub fn write_module(&self, key: &ModuleKey, source: &str) -> Result<()> {
        let glue = format!(
            "\n#[allow(unused_imports)]\nuse {h}::*;\npub(crate) const __ASSAY_ENTRY: {h}::Entry = {e};\n",
            h = self.harness_crate,
            e = self.entry,
        );
        let mut text = String::with_capacity(source.len() + glue.len());
        text.push_str(source);
        text.push_str(&glue);
        write(&self.dir.join(key.file()), &text)
    }

    /// Writes a binary target's root file. It sits beside the module files,
    /// so `#[path = "c3.rs"]` names a module and diagnostics read `cands/c3.rs`.
    pub fn write_bin(&self, name: &str, text: &str) -> Result<()> {
        write(&self.dir.join(format!("cands/{name}.main.rs")), text)
    }

    /// Rewrites the manifest with these binary targets.
    pub fn set_bins<'a>(&self, names: impl IntoIterator<Item = &'a str>) -> Result<()> {
        let base = std::fs::read_to_string(self.dir.join("Cargo.base.toml"))
            .context("cannot read the generated base manifest")?;
        let mut manifest = base;
        for name in names {
            manifest.push_str(&format!(
                "\n[[bin]]\nname = \"{name}\"\npath = \"cands/{name}.main.rs\"\ntest = false\nbench = false\ndoc = false\n"
            ));
        }
        write(&self.dir.join("Cargo.toml"), &manifest)
    }

    /// Builds the given binaries with `--keep-going`, reading cargo's JSON
    /// messages as they come. `on_built` is called as each target finishes.
    pub async fn build(
        &self,
        profile: Profile,
        bins: &[String],
        mut on_built: impl FnMut(&str),
    ) -> Result<BuildReport> {
        let mut cmd = scrubbed_cargo();
        let paths = crate::sandbox::BuildPaths {
            read: vec![self.harness_dir.clone()],
            write: vec![self.dir.clone(), self.target_dir.clone()],
        };
        crate::sandbox::confine_cargo(&mut cmd, &paths)?;
        cmd.arg("build")
            .arg("--keep-going")
            .arg("--message-format=json")
            .arg("--manifest-path")
            .arg(self.dir.join("Cargo.toml"))
            .arg("--target-dir")
            .arg(&self.target_dir);
        if profile == Profile::Score {
            cmd.arg("--release");
        }
        for bin in bins {
            cmd.arg("--bin").arg(bin);
        }
        cmd.current_dir(&self.dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        tracing::debug!(?profile, targets = bins.len(), "cargo build");
        let mut child = cmd.spawn().context("cannot start cargo")?;
        let stdout = child.stdout.take().expect("piped stdout");
        let mut stderr = child.stderr.take().expect("piped stderr");
        let stderr_task = tokio::spawn(async move {
            let mut text = String::new();
            let _ = stderr.read_to_string(&mut text).await;
            text
        });

        let mut report = BuildReport::default();
        let mut lines = BufReader::new(stdout).lines();
        while let Some(line) = lines
            .next_line()
            .await
            .context("cannot read cargo's output")?
        {
            // Lines that are not JSON messages pass by, as cargo's own tools do.
            let Ok(message) = serde_json::from_str::<Message>(&line) else {
                continue;
            };
            match message {
                Message::CompilerArtifact(artifact) => {
                    if let Some(exe) = artifact.executable {
                        on_built(&artifact.target.name);
                        report
                            .built
                            .insert(artifact.target.name.clone(), exe.into_std_path_buf());
                    }
                }
                Message::CompilerMessage(msg) => {
                    let rendered = msg.message.rendered.clone().unwrap_or_default();
                    let is_error = matches!(
                        msg.message.level,
                        DiagnosticLevel::Error | DiagnosticLevel::Ice
                    );
                    // Our targets' roots are our files; anything else is a dependency.
                    if msg.target.src_path.as_std_path().starts_with(&self.dir) {
                        let entry = report
                            .diagnostics
                            .entry(msg.target.name.clone())
                            .or_default();
                        entry.rendered.push_str(&rendered);
                        if is_error {
                            entry.errors += 1;
                            if let Some(code) = &msg.message.code {
                                entry.error_codes.push(code.code.clone());
                            }
                            for span in &msg.message.spans {
                                entry.error_files.push(span.file_name.clone());
                            }
                        } else if msg.message.level == DiagnosticLevel::Warning {
                            entry.warnings += 1;
                        }
                    } else if is_error {
                        report.dependency_errors.push(rendered);
                    }
                }
                _ => {}
            }
        }
        let status = child.wait().await.context("cargo did not finish")?;
        report.success = status.success();
        report.stderr = stderr_task.await.unwrap_or_default();
        for diag in report.diagnostics.values_mut() {
            diag.error_codes.sort();
            diag.error_codes.dedup();
            diag.error_files.sort();
            diag.error_files.dedup();
        }
        Ok(report)
    }
}

/// A `cargo` command with only [`INHERITED_ENV`] passed through.
pub fn scrubbed_cargo() -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new("cargo");
    cmd.env_clear();
    for key in INHERITED_ENV {
        if let Some(value) = std::env::var_os(key) {
            cmd.env(key, value);
        }
    }
    cmd.env("CARGO_TERM_COLOR", "never");
    cmd
}

fn toml_string(s: &str) -> String {
    toml::Value::String(s.to_owned()).to_string()
}

fn write(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}
