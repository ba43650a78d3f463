//! One candidate's compile: its own time and memory limit, and its own
//! view of the package.
//!
//! cargo runs `RUSTC_WORKSPACE_WRAPPER` in place of `rustc` for the
//! package's own targets (never for dependencies, so the warm harness and
//! its dependencies are untouched). The wrapper is the assay binary itself:
//! started with [`WRAPPER_VAR`] in its environment, `main` hands over to
//! [`run_wrapper`] before anything else. For a candidate's target
//! (`--crate-name cN`) the wrapper
//!
//! - restricts itself with a Landlock ruleset nested in the build's: the
//!   toolchain, the system, the registry and the target directory as
//!   before, but of the package only that candidate's own files
//!   (`cands/cN.rs`, `cands/cN.main.rs`, `cands/cN.lib.rs`), so no
//!   spelling of `#[path]` or `include_str!` reaches a sibling's file;
//! - runs rustc with `RLIMIT_CPU` (a const-eval loop stops there; CPU time,
//!   not wall, so a loaded machine does not time out an honest compile) and
//!   `RLIMIT_AS` (a compile that would take the machine's memory fails
//!   allocating instead);
//! - copies rustc's stderr through to cargo, and when rustc died at one of
//!   its limits, writes the verdict into a file named after the crate in
//!   the verdict directory ([`limit_hit`] reads it). Nothing a candidate
//!   compiles can write a file (const evaluation does no I/O), so the file
//!   is the wrapper's word.
//!
//! Other targets of the package (the scorer, the case checker, the warm-up)
//! get the same limits without the narrower ruleset.

use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use anyhow::{Context, Result};
use landlock::{
    path_beneath_rules, Access, AccessFs, CompatLevel, Compatible, Ruleset, RulesetAttr,
    RulesetCreatedAttr,
};
use rustix::process::{Resource, Rlimit};

use super::cargo::{build_reads, BuildPaths};
use super::landlock::TARGET_ABI;
use crate::spec::CompileLimits;

/// Set in the environment of the wrapper cargo starts; its value is the
/// wrapper's settings as JSON ([`WrapperSettings`]).
pub const WRAPPER_VAR: &str = "ASSAY_RUSTC_WRAPPER";

/// Which limit a target's rustc died at (its verdict file's word).
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
pub enum LimitHit {
    Timeout,
    OutOfMemory,
}

impl LimitHit {
    fn as_str(self) -> &'static str {
        self.into()
    }
}

/// What the wrapper needs to know, handed over in [`WRAPPER_VAR`].
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct WrapperSettings {
    cpu_secs: u64,
    memory_bytes: u64,
    /// Targets held to less CPU time than `cpu_secs`, by crate name: a
    /// shared group's budget (`exec::budget`).
    #[serde(default)]
    budgets: BTreeMap<String, u64>,
    /// Where the verdict files go (inside the package, writable).
    verdicts: PathBuf,
    /// The folder of candidate module files (`PACKAGE/cands`).
    cands: PathBuf,
    /// What a candidate's rustc may read besides its own files, and write.
    read: Vec<PathBuf>,
    write: Vec<PathBuf>,
}

static WRAPPER_EXE: OnceLock<PathBuf> = OnceLock::new();

/// Names the executable cargo runs as the wrapper: the assay binary, which
/// calls this at start-up with its own path. Without it (a library user
/// that is not the binary) builds run without per-target limits.
pub fn set_wrapper_exe(exe: PathBuf) {
    let _ = WRAPPER_EXE.set(exe);
}

/// The wrapper's executable, when one was named.
pub fn wrapper_exe() -> Option<&'static Path> {
    WRAPPER_EXE.get().map(PathBuf::as_path)
}

/// Makes cargo run every rustc of `package`'s own targets through the
/// wrapper with `limits` (less CPU time for the targets `budgets` names),
/// inside the build whose allowances are `paths`. Returns false, changing
/// nothing, when no wrapper executable was named.
pub fn wrap(
    cmd: &mut tokio::process::Command,
    limits: CompileLimits,
    budgets: &BTreeMap<String, u64>,
    package: &Path,
    paths: &BuildPaths,
) -> Result<bool> {
    let Some(exe) = wrapper_exe() else {
        return Ok(false);
    };
    let verdicts = verdict_dir(package);
    std::fs::create_dir_all(&verdicts)
        .with_context(|| format!("cannot create {}", verdicts.display()))?;
    // What the build reads, which holds nothing of the package but the
    // configuration files of its ancestors; and what it writes, but the
    // package: of that only the temporary files and the verdicts.
    let read = build_reads(paths);
    let mut write: Vec<PathBuf> = paths
        .write
        .iter()
        .filter(|w| w.as_path() != package)
        .cloned()
        .collect();
    write.extend([
        package.join("tmp"),
        verdicts.clone(),
        PathBuf::from("/dev/null"),
    ]);
    let settings = WrapperSettings {
        cpu_secs: limits.cpu_secs,
        memory_bytes: limits.memory_bytes,
        budgets: budgets.clone(),
        verdicts,
        cands: package.join("cands"),
        read,
        write,
    };
    cmd.env("RUSTC_WORKSPACE_WRAPPER", exe);
    cmd.env(WRAPPER_VAR, serde_json::to_string(&settings)?);
    Ok(true)
}

/// The limit `target`'s rustc died at in the last build, if it did.
pub fn limit_hit(package: &Path, target: &str) -> Option<LimitHit> {
    let text = std::fs::read_to_string(verdict_dir(package).join(target)).ok()?;
    [LimitHit::Timeout, LimitHit::OutOfMemory]
        .into_iter()
        .find(|hit| hit.as_str() == text.trim())
}

/// The CPU seconds `target`'s rustc (with the linker it ran) spent in the
/// last build, as the wrapper measured them.
pub fn cpu_spent(package: &Path, target: &str) -> Option<f64> {
    let text = std::fs::read_to_string(verdict_dir(package).join(cpu_file(target))).ok()?;
    text.trim().parse().ok().filter(|s: &f64| s.is_finite())
}

fn verdict_dir(package: &Path) -> PathBuf {
    package.join("compile-limits")
}

fn cpu_file(crate_name: &str) -> String {
    format!("{crate_name}.cpu")
}

/// The wrapper's `main`: `argv` is `[assay, rustc, args...]`. Returns the
/// exit code to end with.
pub fn run_wrapper(settings_json: &str) -> i32 {
    match wrapper(settings_json) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("assay compile wrapper: {e:#}");
            101
        }
    }
}

fn wrapper(settings_json: &str) -> Result<i32> {
    let settings: WrapperSettings =
        serde_json::from_str(settings_json).context("bad wrapper settings")?;
    let mut args = std::env::args_os().skip(1);
    let rustc = args.next().context("no rustc to run")?;
    let args: Vec<_> = args.collect();
    let crate_name = args
        .iter()
        .position(|a| a == "--crate-name")
        .and_then(|i| args.get(i + 1))
        .and_then(|n| n.to_str())
        .map(str::to_owned);
    if let Some(name) = &crate_name {
        // A stale verdict of an earlier build must not outlive it.
        let _ = std::fs::remove_file(settings.verdicts.join(name));
        let _ = std::fs::remove_file(settings.verdicts.join(cpu_file(name)));
        if let Some(own) = own_files(name) {
            confine_to_own_files(&settings, &own)?;
        }
    }
    let budget = crate_name
        .as_ref()
        .and_then(|name| settings.budgets.get(name))
        .copied();
    let limits = CompileLimits {
        cpu_secs: budget.map_or(settings.cpu_secs, |b| b.min(settings.cpu_secs)),
        memory_bytes: settings.memory_bytes,
    };
    let mut cmd = Command::new(&rustc);
    cmd.args(&args)
        .env_remove(WRAPPER_VAR)
        .stderr(Stdio::piped());
    // SAFETY: the closure runs between fork and exec and makes only
    // setrlimit calls (rustix's raw system calls: async-signal-safe, no
    // allocation).
    unsafe {
        cmd.pre_exec(move || {
            set_rlimit(Resource::Cpu, limits.cpu_secs, limits.cpu_secs + 5)?;
            set_rlimit(Resource::As, limits.memory_bytes, limits.memory_bytes)?;
            set_rlimit(Resource::Core, 0, 0)
        });
    }
    let mut child = cmd
        .spawn()
        .with_context(|| format!("cannot start {}", Path::new(&rustc).display()))?;
    let out_of_memory = copy_stderr(child.stderr.take().expect("piped stderr"));
    let status = child.wait().context("rustc did not finish")?;
    if let Some(name) = &crate_name {
        let _ = std::fs::write(
            settings.verdicts.join(cpu_file(name)),
            // Its one rustc, with the linker rustc ran and waited for.
            format!(
                "{}\n",
                crate::support::account::reaped_children_cpu_seconds()
            ),
        );
    }
    let hit = match status.signal() {
        Some(libc::SIGXCPU) | Some(libc::SIGKILL) => Some(LimitHit::Timeout),
        Some(_) if out_of_memory => Some(LimitHit::OutOfMemory),
        _ if out_of_memory && !status.success() => Some(LimitHit::OutOfMemory),
        _ => None,
    };
    if let (Some(hit), Some(name)) = (hit, &crate_name) {
        let _ = std::fs::write(settings.verdicts.join(name), hit.as_str());
        let what = match hit {
            LimitHit::Timeout if budget.is_some() => {
                format!("its CPU budget in a shared build ({} s)", limits.cpu_secs)
            }
            LimitHit::Timeout => format!("its CPU time limit ({} s)", limits.cpu_secs),
            LimitHit::OutOfMemory => {
                format!("its memory limit ({} MiB)", limits.memory_bytes >> 20)
            }
        };
        eprintln!("assay: the compile of `{name}` was stopped at {what}");
    }
    Ok(status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0)))
}

/// Copies rustc's stderr to ours line by line; true if rustc said that an
/// allocation failed (the allocator's own message, or LLVM's, printed
/// before it aborts; text a candidate makes rustc print is always inside a
/// JSON diagnostic, never a line of its own).
fn copy_stderr(stderr: std::process::ChildStderr) -> bool {
    let mut out = std::io::stderr().lock();
    let mut oom = false;
    let mut reader = std::io::BufReader::new(stderr);
    let mut line = Vec::new();
    while reader.read_until(b'\n', &mut line).is_ok_and(|n| n > 0) {
        // Rust's allocator, and LLVM's (`rustc-LLVM ERROR: out of memory`,
        // then `Allocation failed`), say so before they abort.
        oom |= line.starts_with(b"memory allocation of ")
            || line.starts_with(b"rustc-LLVM ERROR: out of memory")
            || line.starts_with(b"LLVM ERROR: out of memory");
        let _ = out.write_all(&line);
        line.clear();
    }
    let _ = out.flush();
    oom
}

/// `c0`, `c17`: a candidate's own target.
fn is_candidate_target(name: &str) -> bool {
    name.strip_prefix('c')
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// The files (in `cands/`) a target that holds one candidate may read, or
/// `None` for a target that holds none. A probe target `cN` reads its
/// module (a suite program's tests too) and its roots; a scoring image `run_<tag>_<key>` (`build::probe::image_name`)
/// reads its root and its one candidate's module, the committed one's too.
fn own_files(name: &str) -> Option<Vec<String>> {
    if is_candidate_target(name) {
        return Some(
            ["rs", "tests.rs", "main.rs", "lib.rs"]
                .map(|ext| format!("{name}.{ext}"))
                .into(),
        );
    }
    let (_tag, key) = name.strip_prefix("run_")?.rsplit_once('_')?;
    (is_candidate_target(key) || key == "committed")
        .then(|| vec![format!("{key}.rs"), format!("{name}.main.rs")])
}

/// Nests a Landlock ruleset under the build's: everything the build reads
/// and writes but the package, and of the package only the `own` files.
fn confine_to_own_files(settings: &WrapperSettings, own: &[String]) -> Result<()> {
    let abi = TARGET_ABI;
    let own: Vec<PathBuf> = own
        .iter()
        .map(|file| settings.cands.join(file))
        .filter(|p| p.exists())
        .collect();
    let read: Vec<&PathBuf> = settings
        .read
        .iter()
        .chain(&own)
        .filter(|p| p.exists())
        .collect();
    let write: Vec<&PathBuf> = settings.write.iter().filter(|p| p.exists()).collect();
    let status = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(abi))?
        .create()?
        .add_rules(path_beneath_rules(read, AccessFs::from_read(abi)))?
        .add_rules(path_beneath_rules(write, AccessFs::from_all(abi)))?
        .restrict_self()
        .context("cannot restrict the compile")?;
    let _ = status;
    Ok(())
}

fn set_rlimit(resource: Resource, soft: u64, hard: u64) -> std::io::Result<()> {
    let limit = Rlimit {
        current: Some(soft),
        maximum: Some(hard),
    };
    Ok(rustix::process::setrlimit(resource, limit)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_candidate_targets_are_narrowed() {
        for yes in ["c0", "c17", "c123456"] {
            assert!(is_candidate_target(yes), "{yes}");
        }
        for no in [
            "c",
            "committed",
            "assay_scorer",
            "assay_warm",
            "cx1",
            "c1a",
            "d3",
        ] {
            assert!(!is_candidate_target(no), "{no}");
        }
    }

    #[test]
    fn a_scoring_image_reads_its_root_and_its_one_candidate() {
        assert_eq!(
            own_files("run_2235c47c_c10").unwrap(),
            ["c10.rs", "run_2235c47c_c10.main.rs"]
        );
        assert_eq!(
            own_files("run_2235c47c_committed").unwrap(),
            ["committed.rs", "run_2235c47c_committed.main.rs"]
        );
        // A suite's program built alone: its solution, its tests' module.
        assert_eq!(
            own_files("c3").unwrap(),
            ["c3.rs", "c3.tests.rs", "c3.main.rs", "c3.lib.rs"]
        );
        for none in [
            "assay_judge_2235c47c",
            "run_2235c47c_judge",
            "assay_runner",
            "run_c1x",
        ] {
            assert_eq!(own_files(none), None, "{none}");
        }
    }

    #[test]
    fn a_verdict_file_names_its_limit_and_nothing_else_counts() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(verdict_dir(dir.path())).unwrap();
        std::fs::write(verdict_dir(dir.path()).join("c3"), "timeout").unwrap();
        std::fs::write(verdict_dir(dir.path()).join("c4"), "out_of_memory").unwrap();
        std::fs::write(verdict_dir(dir.path()).join("c5"), "gremlins").unwrap();
        assert_eq!(limit_hit(dir.path(), "c3"), Some(LimitHit::Timeout));
        assert_eq!(limit_hit(dir.path(), "c4"), Some(LimitHit::OutOfMemory));
        assert_eq!(limit_hit(dir.path(), "c5"), None);
        assert_eq!(limit_hit(dir.path(), "c6"), None);
    }
}
