//! Sandbox: what confines a candidate's scoring run and the probe's
//! compiler, beyond the resource limits `score` sets itself.
//!
//! Four mechanisms, each used where the kernel offers it, and each reported
//! (`Sandbox::describe`, stored with the batch) so nothing is downgraded in
//! silence:
//!
//! - **Landlock** (the `landlock` crate, rules of ABI 6 applied best-effort):
//!   a scoring run may read and execute only the scorer and the shared
//!   libraries it loads, read and write only its own temporary directory, and
//!   (ABI 4+) neither bind nor connect TCP sockets; (ABI 6+) it may not send
//!   signals to, or connect to abstract Unix sockets of, processes outside
//!   its domain. The probe's cargo and rustc get the same kind of ruleset
//!   ([`confine_cargo`]): they read the toolchain, the cargo home, the
//!   harness and the system's compiler and linker, and write only the
//!   generated package and the target directory.
//! - **A network namespace** per run (`unshare(CLONE_NEWNET)`), when one can
//!   be made: the run sees only a loopback interface that is down, so UDP,
//!   raw and every other socket family go nowhere either.
//! - **A pids cgroup** per run (cgroup v2 or the v1 `pids` hierarchy) with
//!   `pids.max`: bounds processes and threads for root too, which ignores
//!   `RLIMIT_NPROC`; it also lets every process of the run be found and
//!   killed, even one that left the process group.
//! - **`RLIMIT_NPROC`**, for non-root users only (the kernel ignores it for
//!   root). It counts every process of the user, so it is set to what the
//!   user already runs plus the run's allowance: a weak limit, kept because
//!   it is what an unprivileged machine has.
//!
//! Everything a child does to confine itself happens between `fork` and
//! `exec`, so it is limited to async-signal-safe system calls: rulesets are
//! built and cgroups created in the parent, and the child only joins them.
//! See docs/sandbox.md for what is enforced where.

use std::fs::File;
use std::io::Write as _;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use anyhow::{Context, Result};
use landlock::{
    path_beneath_rules, Access, AccessFs, AccessNet, CompatLevel, Compatible, Ruleset, RulesetAttr,
    RulesetCreatedAttr, Scope, ABI,
};

/// The Landlock ABI whose rules assay asks for. Rules of later ABIs are not
/// used until they are tested here; on older kernels the crate drops what
/// the kernel lacks (best effort) and [`Sandbox::describe`] says what is left.
const TARGET_ABI: ABI = ABI::V6;

/// What the machine offers, found once per batch.
#[derive(Debug)]
pub struct Sandbox {
    /// The kernel's Landlock ABI version, 0 if none.
    landlock_abi: i32,
    /// Whether `unshare(CLONE_NEWNET)` works here.
    netns: bool,
    /// The per-batch pids cgroup under which each run gets its own.
    pids: Option<PidsRoot>,
    /// `RLIMIT_NPROC` for each run, when it means anything (not root).
    nproc: Option<u64>,
    /// Processes one run may hold.
    processes: u64,
    warnings: Vec<String>,
}

/// One run's confinement, prepared in the parent. Dropping it kills
/// whatever is left of the run and removes its cgroup.
#[derive(Debug)]
pub struct RunConfinement {
    landlock: Option<OwnedFd>,
    cgroup: Option<RunCgroup>,
    /// `cgroup.procs` of the run's cgroup, opened for the child to join.
    cgroup_procs: Option<File>,
    netns: bool,
    nproc: Option<u64>,
}

/// Directories a confined cargo build may use.
#[derive(Debug, Clone)]
pub struct BuildPaths {
    /// Read-only: the harness crate (and any path dependency of ours).
    pub read: Vec<PathBuf>,
    /// Read and write: the generated package, the target directory.
    pub write: Vec<PathBuf>,
}

#[derive(Debug)]
struct PidsRoot {
    dir: PathBuf,
    version: u8,
    next: AtomicU64,
}

#[derive(Debug)]
struct RunCgroup {
    dir: PathBuf,
}

impl Sandbox {
    /// Finds what the kernel offers. Never fails: what is missing becomes a
    /// warning (also logged), and the rest is used.
    pub fn probe(processes: u64) -> Sandbox {
        let mut warnings = Vec::new();
        let landlock_abi = landlock_abi();
        if landlock_abi < 1 {
            warnings.push(
                "Landlock is not available on this kernel: scoring runs can read, write \
                 and connect wherever their user can (rlimits, process group, empty \
                 environment and temporary directory still apply)"
                    .to_owned(),
            );
        } else if landlock_abi < 4 {
            warnings.push(format!(
                "Landlock ABI {landlock_abi} has no network rules: TCP is confined only by \
                 the network namespace, if any"
            ));
        }
        let netns = match try_unshare_net() {
            Ok(()) => true,
            Err(e) => {
                warnings.push(format!(
                    "no network namespace for scoring runs (unshare(CLONE_NEWNET): {e}): \
                     {}",
                    if landlock_abi >= 4 {
                        "TCP is still denied by Landlock, other sockets (UDP) are not confined"
                    } else {
                        "the network is not confined"
                    }
                ));
                false
            }
        };
        let pids = match PidsRoot::create(processes) {
            Ok(root) => Some(root),
            Err(e) => {
                warnings.push(format!("no pids cgroup for scoring runs ({e:#})"));
                None
            }
        };
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        let nproc = if root {
            if pids.is_none() {
                warnings.push(
                    "running as root without a pids cgroup: the number of processes a \
                     scoring run may start is not limited (root ignores RLIMIT_NPROC); a \
                     fork loop is stopped only by the wall-time kill of its process group"
                        .to_owned(),
                );
            }
            None
        } else {
            Some(user_tasks().unwrap_or(0) + processes * 4)
        };
        for w in &warnings {
            tracing::warn!("sandbox: {w}");
        }
        Sandbox {
            landlock_abi,
            netns,
            pids,
            nproc,
            processes,
            warnings,
        }
    }

    /// A sandbox that confines nothing (rlimits, process group, empty
    /// environment and temporary directory still apply, as `score` sets
    /// them). Only for measuring what the sandbox costs; a batch never uses it.
    pub fn disabled_for_comparison() -> Sandbox {
        Sandbox {
            landlock_abi: 0,
            netns: false,
            pids: None,
            nproc: None,
            processes: 0,
            warnings: vec!["confinement disabled for comparison".to_owned()],
        }
    }

    /// One line saying what is enforced, stored with every batch.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if self.landlock_abi >= 1 {
            let abi = self.landlock_abi.min(TARGET_ABI as i32);
            let mut what = vec!["fs"];
            if abi >= 4 {
                what.push("tcp");
            }
            if abi >= 6 {
                what.push("signals, abstract sockets");
            }
            parts.push(format!(
                "landlock abi {} ({})",
                self.landlock_abi,
                what.join(", ")
            ));
        } else {
            parts.push("no landlock".to_owned());
        }
        parts.push(if self.netns { "netns" } else { "no netns" }.to_owned());
        match &self.pids {
            Some(p) => parts.push(format!("pids cgroup v{} max {}", p.version, self.processes)),
            None => parts.push("no pids cgroup".to_owned()),
        }
        match self.nproc {
            Some(n) => parts.push(format!("RLIMIT_NPROC {n}")),
            None => parts.push("RLIMIT_NPROC ignored (root)".to_owned()),
        }
        parts.join("; ")
    }

    /// Everything that is missing, one sentence each.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Whether a run's processes are counted (and so `peak_processes` known).
    pub fn counts_processes(&self) -> bool {
        self.pids.is_some()
    }

    /// Prepares one run: a Landlock ruleset for `exe` and `run_dir`, and a
    /// fresh pids cgroup.
    pub fn prepare_run(&self, exe: &Path, run_dir: &Path) -> Result<RunConfinement> {
        let landlock = if self.landlock_abi >= 1 {
            Some(run_ruleset(exe, run_dir)?)
        } else {
            None
        };
        let (cgroup, cgroup_procs) = match &self.pids {
            Some(root) => {
                let cg = root.run(self.processes)?;
                let procs = std::fs::OpenOptions::new()
                    .write(true)
                    .open(cg.dir.join("cgroup.procs"))
                    .with_context(|| format!("cannot open {}/cgroup.procs", cg.dir.display()))?;
                (Some(cg), Some(procs))
            }
            None => (None, None),
        };
        Ok(RunConfinement {
            landlock,
            cgroup,
            cgroup_procs,
            netns: self.netns,
            nproc: self.nproc,
        })
    }
}

impl RunConfinement {
    /// The raw descriptors and flags the child needs; the parent keeps the
    /// owning values alive until the child has been spawned.
    pub fn child_steps(&self) -> ChildSteps {
        ChildSteps {
            landlock_fd: self.landlock.as_ref().map(|f| f.as_raw_fd()),
            cgroup_procs_fd: self.cgroup_procs.as_ref().map(|f| f.as_raw_fd()),
            netns: self.netns,
            nproc: self.nproc,
        }
    }

    /// Closes what the child needed once it runs (the parent has no use for it).
    pub fn spawned(&mut self) {
        self.landlock = None;
        self.cgroup_procs = None;
    }

    /// The most processes the run held at once, when a cgroup counted them
    /// (`pids.peak`, kernels from 6.1 on).
    pub fn peak_processes(&self) -> Option<u64> {
        let cg = self.cgroup.as_ref()?;
        std::fs::read_to_string(cg.dir.join("pids.peak"))
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    /// Kills every process left in the run's cgroup.
    pub fn kill_all(&self) {
        if let Some(cg) = &self.cgroup {
            cg.kill_all();
        }
    }
}

impl Drop for RunConfinement {
    fn drop(&mut self) {
        if let Some(cg) = self.cgroup.take() {
            cg.kill_all();
            cg.remove();
        }
    }
}

/// What the child does between fork and exec. Copy, no allocation: only
/// async-signal-safe system calls happen in [`ChildSteps::apply`].
#[derive(Debug, Clone, Copy)]
pub struct ChildSteps {
    landlock_fd: Option<i32>,
    cgroup_procs_fd: Option<i32>,
    netns: bool,
    nproc: Option<u64>,
}

impl ChildSteps {
    /// Joins the cgroup, sets `RLIMIT_NPROC`, enters a new network namespace
    /// and restricts itself with Landlock, in that order (the cgroup and the
    /// namespace need privileges that no_new_privs and Landlock keep).
    pub fn apply(&self) -> std::io::Result<()> {
        if let Some(fd) = self.cgroup_procs_fd {
            // "0" is the writing process, in cgroup v1 and v2 alike.
            // SAFETY: writes two bytes from a static buffer to an open fd.
            if unsafe { libc::write(fd, b"0\n".as_ptr().cast(), 2) } < 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        if let Some(n) = self.nproc {
            let limit = libc::rlimit {
                rlim_cur: n,
                rlim_max: n,
            };
            // SAFETY: setrlimit reads a valid struct.
            if unsafe { libc::setrlimit(libc::RLIMIT_NPROC, &limit) } != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        if self.netns {
            // SAFETY: unshare takes a flag word.
            if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        restrict_self(self.landlock_fd)
    }
}

/// Applies no_new_privs and, given a ruleset, Landlock to the calling
/// process. Async-signal-safe.
fn restrict_self(landlock_fd: Option<i32>) -> std::io::Result<()> {
    // SAFETY: prctl with constant arguments.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    if let Some(fd) = landlock_fd {
        // SAFETY: landlock_restrict_self takes a ruleset fd and flags.
        if unsafe { libc::syscall(libc::SYS_landlock_restrict_self, fd, 0u32) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The kernel's Landlock ABI version, or 0 when there is none.
pub fn landlock_abi() -> i32 {
    const LANDLOCK_CREATE_RULESET_VERSION: u32 = 1;
    // SAFETY: with the VERSION flag the kernel reads no attribute struct.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    if v < 0 {
        0
    } else {
        v as i32
    }
}

/// System directories a dynamically linked program loads from.
const LIBRARY_DIRS: &[&str] = &["/lib", "/lib64", "/usr/lib", "/usr/lib64", "/usr/local/lib"];

/// A scoring run's ruleset: read and execute `exe` and the shared
/// libraries, everything in `run_dir`, nothing else; no TCP; scoped
/// signals and abstract sockets.
fn run_ruleset(exe: &Path, run_dir: &Path) -> Result<OwnedFd> {
    let abi = TARGET_ABI;
    let created = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(abi))?
        .handle_access(AccessNet::from_all(abi))?
        .scope(Scope::from_all(abi))?
        .create()?
        .add_rules(path_beneath_rules(
            LIBRARY_DIRS
                .iter()
                .map(Path::new)
                .chain([Path::new("/etc/ld.so.cache"), exe]),
            AccessFs::from_read(abi),
        ))?
        .add_rules(path_beneath_rules([run_dir], AccessFs::from_all(abi)))?;
    Option::<OwnedFd>::from(created).context("the kernel gave no Landlock ruleset")
}

/// Confines a nested cargo (and the rustc, linker and proc macros it runs)
/// with Landlock: read the toolchain, the cargo home, the system's compiler
/// and linker and `paths.read`; read and write `paths.write`. Temporary
/// files go to the first write directory's `tmp/`. Without Landlock the
/// command is left as it is and a warning is logged once.
pub fn confine_cargo(cmd: &mut tokio::process::Command, paths: &BuildPaths) -> Result<()> {
    if landlock_abi() < 1 {
        static WARNED: OnceLock<()> = OnceLock::new();
        WARNED.get_or_init(|| {
            tracing::warn!(
                "sandbox: Landlock is not available; the probe's cargo and rustc are not \
                 confined (include_str! of any readable file compiles)"
            )
        });
        return Ok(());
    }
    if let Some(first) = paths.write.first() {
        if needs_fetch(&first.join("Cargo.lock"), &paths.read) {
            fetch_dependencies(&first.join("Cargo.toml"))?;
        }
        let tmp = first.join("tmp");
        std::fs::create_dir_all(&tmp)
            .with_context(|| format!("cannot create {}", tmp.display()))?;
        cmd.env("TMPDIR", &tmp);
    }
    // Dependencies were fetched before (`fetch_dependencies`); the confined
    // cargo could not reach the network or write the cargo home anyway, and
    // offline it says so at once instead of retrying.
    cmd.env("CARGO_NET_OFFLINE", "true");
    let fd = build_ruleset(paths)?;
    // SAFETY: the closure only makes async-signal-safe system calls; it owns
    // the ruleset fd, which stays open until the command is dropped.
    unsafe {
        cmd.pre_exec(move || restrict_self(Some(fd.as_raw_fd())));
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

/// Resolves and downloads the generated package's dependencies (the
/// harness's) before any confined build: the confined cargo may neither
/// connect nor write the cargo home, so it runs offline. Only our manifest
/// and the task's harness are in the package when this runs (no candidate
/// code, and `cargo fetch` runs no build script). About 0.1 s when
/// everything is already cached.
pub fn fetch_dependencies(manifest: &Path) -> Result<()> {
    let cargo = crate::package::scrubbed_cargo(crate::package::default_toolchain().as_deref());
    let template = cargo.as_std();
    let mut cmd = std::process::Command::new(template.get_program());
    cmd.env_clear();
    for (key, value) in template.get_envs() {
        if let Some(value) = value {
            cmd.env(key, value);
        }
    }
    let out = cmd
        .arg("fetch")
        .arg("--manifest-path")
        .arg(manifest)
        .stdin(std::process::Stdio::null())
        .output()
        .context("cannot start cargo fetch")?;
    if !out.status.success() {
        anyhow::bail!(
            "cargo fetch for {} failed:\n{}",
            manifest.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}

fn build_ruleset(paths: &BuildPaths) -> Result<OwnedFd> {
    let abi = TARGET_ABI;
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| home.as_ref().map(|h| h.join(".cargo")));
    let rustup_home = std::env::var_os("RUSTUP_HOME")
        .map(PathBuf::from)
        .or_else(|| home.as_ref().map(|h| h.join(".rustup")));
    let mut read: Vec<PathBuf> = [
        "/usr",
        "/lib",
        "/lib64",
        "/bin",
        "/sbin",
        "/opt",
        "/proc",
        "/sys",
        "/etc/ld.so.cache",
        "/etc/ld.so.conf",
        "/etc/ld.so.conf.d",
        "/etc/alternatives",
        "/dev/urandom",
        "/dev/random",
    ]
    .iter()
    .map(PathBuf::from)
    .collect();
    read.extend(cargo_home.clone());
    read.extend(rustup_home);
    read.extend(paths.read.iter().cloned());
    // cargo reads `.cargo/config.toml` in every ancestor of the package,
    // and the `Cargo.toml` of every ancestor of a path dependency (looking
    // for its workspace); those files must stay readable or cargo stops.
    // Only those files: nothing else in the ancestors is.
    for dir in paths.write.iter().chain(&paths.read) {
        for ancestor in dir.ancestors().skip(1) {
            for file in [
                ancestor.join(".cargo/config.toml"),
                ancestor.join(".cargo/config"),
                ancestor.join("Cargo.toml"),
            ] {
                if file.is_file() {
                    read.push(file);
                }
            }
        }
    }
    let mut write: Vec<PathBuf> = paths.write.clone();
    write.push(PathBuf::from("/dev/null"));
    // cargo takes its package-cache lock in the cargo home even when
    // nothing is downloaded, and records last use of cached crates there.
    if let Some(ch) = &cargo_home {
        for name in [".package-cache", ".package-cache-mutate", ".global-cache"] {
            let file = ch.join(name);
            if file.exists() {
                write.push(file);
            }
        }
    }
    let created = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(abi))?
        .handle_access(AccessNet::from_all(abi))?
        .create()?
        .add_rules(path_beneath_rules(read, AccessFs::from_read(abi)))?
        .add_rules(path_beneath_rules(write, AccessFs::from_all(abi)))?;
    Option::<OwnedFd>::from(created).context("the kernel gave no Landlock ruleset")
}

/// Forks a child that tries `unshare(CLONE_NEWNET)` and reports back.
fn try_unshare_net() -> std::io::Result<()> {
    // SAFETY: the child only calls unshare and _exit, both async-signal-safe.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(std::io::Error::last_os_error());
    }
    if pid == 0 {
        // SAFETY: as above.
        unsafe {
            let code = if libc::unshare(libc::CLONE_NEWNET) == 0 {
                0
            } else {
                *libc::__errno_location()
            };
            libc::_exit(code);
        }
    }
    let mut status = 0;
    // SAFETY: waits for the child forked above.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    match libc::WEXITSTATUS(status) {
        0 if libc::WIFEXITED(status) => Ok(()),
        errno => Err(std::io::Error::from_raw_os_error(errno)),
    }
}

impl PidsRoot {
    /// Creates `assay-<pid>-<n>` in the first writable pids hierarchy: the
    /// cgroup v2 root when it delegates `pids`, else the v1 `pids` mount.
    fn create(processes: u64) -> Result<PidsRoot> {
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let name = format!(
            "assay-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        let mut errors = Vec::new();
        let candidates: [(u8, &str); 3] = [
            (2, "/sys/fs/cgroup"),
            (2, "/sys/fs/cgroup/unified"),
            (1, "/sys/fs/cgroup/pids"),
        ];
        for (version, base) in candidates {
            let base = Path::new(base);
            if version == 2 {
                let controllers = std::fs::read_to_string(base.join("cgroup.subtree_control"))
                    .unwrap_or_default();
                if !controllers.split_whitespace().any(|c| c == "pids") {
                    continue;
                }
            } else if !base.join("pids.max").exists() && !base.join("cgroup.procs").exists() {
                continue;
            }
            let dir = base.join(&name);
            match std::fs::create_dir(&dir) {
                Ok(()) => {
                    if version == 2 {
                        // Children of this cgroup need the controller too.
                        let _ = std::fs::write(dir.join("cgroup.subtree_control"), "+pids");
                    }
                    let root = PidsRoot {
                        dir,
                        version,
                        next: AtomicU64::new(0),
                    };
                    // A trial run proves pids.max can be set here.
                    let trial = root.run(processes)?;
                    trial.remove();
                    return Ok(root);
                }
                Err(e) => errors.push(format!("{}: {e}", dir.display())),
            }
        }
        if errors.is_empty() {
            anyhow::bail!("no pids controller is mounted")
        }
        anyhow::bail!("cannot create a cgroup: {}", errors.join("; "))
    }

    fn run(&self, processes: u64) -> Result<RunCgroup> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let dir = self.dir.join(format!("r{n}"));
        std::fs::create_dir(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let cg = RunCgroup { dir };
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .open(cg.dir.join("pids.max"))
            .with_context(|| format!("cannot open {}/pids.max", cg.dir.display()))?;
        f.write_all(processes.to_string().as_bytes())
            .with_context(|| format!("cannot set {}/pids.max", cg.dir.display()))?;
        Ok(cg)
    }
}

impl Drop for PidsRoot {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.dir);
    }
}

impl RunCgroup {
    /// SIGKILLs every process in the cgroup until it is empty. `pids.max`
    /// bounds how many there can be, so this ends; a fork racing the kill
    /// is caught on the next pass.
    fn kill_all(&self) {
        let procs = self.dir.join("cgroup.procs");
        for _ in 0..100 {
            let Ok(text) = std::fs::read_to_string(&procs) else {
                return;
            };
            let pids: Vec<i32> = text.lines().filter_map(|l| l.trim().parse().ok()).collect();
            if pids.is_empty() {
                return;
            }
            for pid in pids {
                // SAFETY: kill only sends a signal.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
        tracing::warn!("sandbox: processes remain in {}", self.dir.display());
    }

    fn remove(&self) {
        // A cgroup can be removed once its last process is reaped; the
        // kernel may lag a little behind the kill.
        for attempt in 0..400u64 {
            match std::fs::remove_dir(&self.dir) {
                Ok(()) => return,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
                Err(_) => {
                    std::thread::sleep(std::time::Duration::from_micros(100 * attempt.min(50)))
                }
            }
        }
        tracing::warn!("sandbox: cannot remove {}", self.dir.display());
    }
}

/// Tasks (processes and threads) the effective user runs now, for
/// `RLIMIT_NPROC`, which counts them all.
fn user_tasks() -> Option<u64> {
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    let mut n = 0;
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Ok(status) = std::fs::read_to_string(entry.path().join("status")) else {
            continue;
        };
        let mine = status
            .lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|l| l.split_whitespace().next()?.parse::<u32>().ok())
            == Some(uid);
        if mine {
            n += status
                .lines()
                .find_map(|l| l.strip_prefix("Threads:"))
                .and_then(|l| l.trim().parse::<u64>().ok())
                .unwrap_or(1);
        }
    }
    Some(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn description_names_every_mechanism() {
        let sandbox = Sandbox::probe(8);
        let line = sandbox.describe();
        for part in ["landlock", "netns", "pids cgroup", "RLIMIT_NPROC"] {
            assert!(line.contains(part), "{line}");
        }
        // Whatever is missing is said, never dropped.
        if sandbox.landlock_abi < 1 {
            assert!(sandbox.warnings().iter().any(|w| w.contains("Landlock")));
        }
        if !sandbox.netns {
            assert!(sandbox.warnings().iter().any(|w| w.contains("namespace")));
        }
    }
}
