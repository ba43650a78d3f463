//! Sandbox: what confines a candidate's scoring run and the probe's
//! compiler, beyond the resource limits `score` sets itself.
//!
//! Six mechanisms, each used where the kernel offers it, and each reported
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
//! - **A memory cgroup** per run (cgroup v2 `memory.max`, or the v1
//!   `memory.limit_in_bytes`), swap off where the kernel accounts it: bounds
//!   the memory of all the run's processes together, which `RLIMIT_AS`
//!   (per process, virtual) does not. An OOM kill inside it is counted
//!   (`memory.events` / `memory.oom_control`) and becomes the run's verdict.
//! - **An unprivileged uid** (65534, or `ASSAY_SANDBOX_UID`) when assay runs
//!   as root, so a candidate cannot raise its rlimits or use any other
//!   capability. The scorer is copied where that uid can execute it if it
//!   cannot reach the original; the run's directory is handed to it.
//! - **`RLIMIT_NPROC`**, when the pids cgroup is missing or assay is not
//!   root. It counts every process of the user, so it is set to what the
//!   user already runs plus the run's allowance: a weak limit, kept because
//!   it is what an unprivileged machine has.
//!
//! Everything a child does to confine itself happens between `fork` and
//! `exec`, so it is limited to async-signal-safe system calls: rulesets are
//! built and cgroups created in the parent, and the child only joins them.
//! The order is fixed by the privileges each step needs: join the cgroups
//! and enter a new network namespace (both need root's privileges), then
//! drop to the unprivileged uid, then `no_new_privs` and Landlock (which
//! need none). See docs/sandbox.md for what is enforced where.

use std::fs::File;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::SystemTime;

use anyhow::{Context, Result};
use landlock::{
    path_beneath_rules, Access, AccessFs, AccessNet, CompatLevel, Compatible, Ruleset, RulesetAttr,
    RulesetCreatedAttr, Scope, ABI,
};

/// The Landlock ABI whose rules assay asks for. Rules of later ABIs are not
/// used until they are tested here; on older kernels the crate drops what
/// the kernel lacks (best effort) and [`Sandbox::describe`] says what is left.
const TARGET_ABI: ABI = ABI::V6;

/// The uid and gid scoring runs drop to when assay runs as root, unless
/// `ASSAY_SANDBOX_UID` names others: `nobody` and `nogroup` on Debian and
/// most distributions.
const DEFAULT_RUN_AS: RunAs = RunAs {
    uid: 65534,
    gid: 65534,
};

/// The variable naming the uid (`UID` or `UID:GID`) scoring runs drop to
/// when assay runs as root.
pub const RUN_AS_VARIABLE: &str = "ASSAY_SANDBOX_UID";

/// At most this many cgroups per run: one per hierarchy holding a
/// controller assay uses (a v1 `pids` and a v1 `memory`, or one v2 group).
const MAX_RUN_CGROUPS: usize = 2;

/// What the machine offers, found once per batch.
#[derive(Debug)]
pub struct Sandbox {
    /// The kernel's Landlock ABI version, 0 if none.
    landlock_abi: i32,
    /// Whether `unshare(CLONE_NEWNET)` works here.
    netns: bool,
    /// The per-batch cgroups under which each run gets its own: one v2
    /// group holding both controllers, or one per v1 hierarchy.
    cgroups: Vec<CgroupRoot>,
    /// The unprivileged user runs switch to, when assay is root.
    run_as: Option<RunAs>,
    /// `RLIMIT_NPROC` for each run, when it means anything.
    nproc: Option<u64>,
    /// Processes one run may hold.
    processes: u64,
    /// Copies of scoring binaries the run's user could not reach.
    exe_copies: Mutex<ExeCopies>,
    warnings: Vec<String>,
}

/// The unprivileged user a scoring run becomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct RunAs {
    uid: u32,
    gid: u32,
}

/// One run's confinement, prepared in the parent. Dropping it kills
/// whatever is left of the run and removes its cgroups.
#[derive(Debug)]
pub struct RunConfinement {
    landlock: Option<OwnedFd>,
    cgroups: Vec<RunCgroup>,
    /// `cgroup.procs` of each of the run's cgroups, opened for the child to join.
    cgroup_procs: Vec<File>,
    netns: bool,
    run_as: Option<RunAs>,
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

/// A controller assay puts each run under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Controller {
    Pids,
    Memory,
}

impl Controller {
    fn name(self) -> &'static str {
        match self {
            Controller::Pids => "pids",
            Controller::Memory => "memory",
        }
    }
}

/// A batch's cgroup in one hierarchy; each run gets a child of it.
#[derive(Debug)]
struct CgroupRoot {
    dir: PathBuf,
    version: u8,
    controllers: Vec<Controller>,
    /// Whether the run's swap can be limited (v1 `memory.memsw.*`, v2
    /// `memory.swap.max`), when `controllers` holds `Memory`.
    swap_limited: bool,
    next: AtomicU64,
}

#[derive(Debug)]
struct RunCgroup {
    dir: PathBuf,
    version: u8,
    controllers: Vec<Controller>,
}

/// Scoring binaries copied to a directory the run's user can traverse.
#[derive(Debug, Default)]
struct ExeCopies {
    dir: Option<tempfile::TempDir>,
    /// (original, its modification time, the copy)
    copies: Vec<(PathBuf, Option<SystemTime>, PathBuf)>,
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
        let (cgroups, missing) = CgroupRoot::create_all(processes);
        for (controller, why) in missing {
            warnings.push(match controller {
                Controller::Pids => format!("no pids cgroup for scoring runs ({why})"),
                Controller::Memory => format!(
                    "no memory cgroup for scoring runs ({why}): RLIMIT_AS bounds each \
                     process's address space, not the memory of a run's processes together \
                     (up to the process limit times memory_mb)"
                ),
            });
        }
        let has_pids = cgroups.iter().any(|c| c.has(Controller::Pids));
        if cgroups
            .iter()
            .any(|c| c.has(Controller::Memory) && !c.swap_limited)
            && swap_exists()
        {
            warnings.push(
                "the kernel does not account swap per cgroup: a run's memory cgroup bounds \
                 its RAM, and it may use swap besides"
                    .to_owned(),
            );
        }
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        let run_as = if root {
            match run_as_from_env().and_then(|who| try_drop_to(who).map(|()| who)) {
                Ok(who) => Some(who),
                Err(e) => {
                    warnings.push(format!(
                        "scoring runs keep root ({e:#}): a candidate can raise its own rlimits \
                         (CAP_SYS_RESOURCE) and use root's other capabilities where Landlock \
                         does not stop it"
                    ));
                    None
                }
            }
        } else {
            None
        };
        let nproc = match (root, run_as, has_pids) {
            // One uid shared by every concurrent run: a per-user limit would
            // let one run's fork loop starve the others, so the pids cgroup,
            // which counts per run, is the only process limit.
            (true, Some(_), true) => None,
            (true, Some(who), false) => Some(user_tasks(who.uid).unwrap_or(0) + processes * 4),
            (true, None, _) => {
                if !has_pids {
                    warnings.push(
                        "running as root without a pids cgroup: the number of processes a \
                         scoring run may start is not limited (root ignores RLIMIT_NPROC); a \
                         fork loop is stopped only by the wall-time kill of its process group"
                            .to_owned(),
                    );
                }
                None
            }
            (false, _, _) => {
                // SAFETY: geteuid has no preconditions.
                let uid = unsafe { libc::geteuid() };
                Some(user_tasks(uid).unwrap_or(0) + processes * 4)
            }
        };
        if run_as.is_some() && landlock_abi < 6 {
            warnings.push(
                "concurrent scoring runs share one uid and Landlock cannot scope signals \
                 here (ABI 6+): a run can signal another run's processes"
                    .to_owned(),
            );
        }
        for w in &warnings {
            tracing::warn!("sandbox: {w}");
        }
        Sandbox {
            landlock_abi,
            netns,
            cgroups,
            run_as,
            nproc,
            processes,
            exe_copies: Mutex::default(),
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
            cgroups: Vec::new(),
            run_as: None,
            nproc: None,
            processes: 0,
            exe_copies: Mutex::default(),
            warnings: vec!["confinement disabled for comparison".to_owned()],
        }
    }

    /// One line saying what is enforced, stored with every batch;
    /// `memory_bytes` is the runs' memory limit (the spec's).
    pub fn describe(&self, memory_bytes: u64) -> String {
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
        match self.root_with(Controller::Pids) {
            Some(p) => parts.push(format!("pids cgroup v{} max {}", p.version, self.processes)),
            None => parts.push("no pids cgroup".to_owned()),
        }
        match self.root_with(Controller::Memory) {
            Some(m) => parts.push(format!(
                "memory cgroup v{} max {} MB{}",
                m.version,
                memory_bytes >> 20,
                if m.swap_limited { ", no swap" } else { "" }
            )),
            None => parts.push("no memory cgroup".to_owned()),
        }
        if let Some(who) = self.run_as {
            parts.push(format!("uid {} gid {}", who.uid, who.gid));
        }
        match (self.nproc, self.run_as) {
            (Some(n), _) => parts.push(format!("RLIMIT_NPROC {n}")),
            (None, Some(_)) => parts.push("RLIMIT_NPROC unset (pids cgroup)".to_owned()),
            (None, None) => parts.push("RLIMIT_NPROC ignored (root)".to_owned()),
        }
        parts.join("; ")
    }

    /// Everything that is missing, one sentence each.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Whether a run's processes are counted (and so `peak_processes` known).
    pub fn counts_processes(&self) -> bool {
        self.root_with(Controller::Pids).is_some()
    }

    /// Whether a memory cgroup bounds each run's processes together.
    pub fn limits_memory(&self) -> bool {
        self.root_with(Controller::Memory).is_some()
    }

    /// The uid runs switch to, when assay is root and can switch.
    pub fn run_uid(&self) -> Option<u32> {
        self.run_as.map(|who| who.uid)
    }

    fn root_with(&self, controller: Controller) -> Option<&CgroupRoot> {
        self.cgroups.iter().find(|c| c.has(controller))
    }

    /// A path of `exe` the run's user can execute: `exe` itself when every
    /// directory above it is searchable by that user, else a copy in a
    /// directory of our own under the system's temporary directory (made
    /// once per binary and batch, removed with the sandbox).
    pub fn runnable_exe(&self, exe: &Path) -> Result<PathBuf> {
        let exe = std::fs::canonicalize(exe)
            .with_context(|| format!("cannot resolve {}", exe.display()))?;
        let Some(who) = self.run_as else {
            return Ok(exe);
        };
        if unreachable_part(&exe, who).is_none() {
            return Ok(exe);
        }
        let modified = std::fs::metadata(&exe).and_then(|m| m.modified()).ok();
        let mut copies = self.exe_copies.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, _, copy)) = copies
            .copies
            .iter()
            .find(|(orig, when, _)| *orig == exe && *when == modified)
        {
            return Ok(copy.clone());
        }
        if copies.dir.is_none() {
            let dir = tempfile::Builder::new()
                .prefix("assay-scorer-")
                .tempdir_in(std::env::temp_dir())
                .context("cannot create a directory for the scorer's copy")?;
            std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))
                .with_context(|| format!("cannot open up {}", dir.path().display()))?;
            copies.dir = Some(dir);
        }
        let dir = copies.dir.as_ref().expect("made above").path();
        let name = exe
            .file_name()
            .map_or_else(|| "scorer".into(), |n| n.to_string_lossy().into_owned());
        let copy = dir.join(format!("{}-{name}", copies.copies.len()));
        std::fs::copy(&exe, &copy)
            .with_context(|| format!("cannot copy {} to {}", exe.display(), copy.display()))?;
        // Owned by root, not writable by the run's user.
        std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o555))
            .with_context(|| format!("cannot set the mode of {}", copy.display()))?;
        if let Some(part) = unreachable_part(&copy, who) {
            anyhow::bail!(
                "uid {} can reach neither {} nor its copy {} ({} is not searchable for \
                 it): make one of them reachable, or point TMPDIR elsewhere",
                who.uid,
                exe.display(),
                copy.display(),
                part.display()
            );
        }
        copies.copies.push((exe, modified, copy.clone()));
        Ok(copy)
    }

    /// Prepares one run: a Landlock ruleset for `exe` and `run_dir`, a fresh
    /// cgroup in each hierarchy (`pids.max` at the process limit, the memory
    /// limit at `memory_bytes`), and `run_dir` handed to the run's user.
    pub fn prepare_run(
        &self,
        exe: &Path,
        run_dir: &Path,
        memory_bytes: u64,
    ) -> Result<RunConfinement> {
        if let Some(who) = self.run_as {
            std::os::unix::fs::chown(run_dir, Some(who.uid), Some(who.gid))
                .with_context(|| format!("cannot hand {} to uid {}", run_dir.display(), who.uid))?;
        }
        let landlock = if self.landlock_abi >= 1 {
            Some(run_ruleset(exe, run_dir)?)
        } else {
            None
        };
        let mut cgroups = Vec::new();
        let mut cgroup_procs = Vec::new();
        for root in &self.cgroups {
            let cg = root.run(self.processes, memory_bytes)?;
            let procs = std::fs::OpenOptions::new()
                .write(true)
                .open(cg.dir.join("cgroup.procs"))
                .with_context(|| format!("cannot open {}/cgroup.procs", cg.dir.display()))?;
            cgroups.push(cg);
            cgroup_procs.push(procs);
        }
        Ok(RunConfinement {
            landlock,
            cgroups,
            cgroup_procs,
            netns: self.netns,
            run_as: self.run_as,
            nproc: self.nproc,
        })
    }
}

impl RunConfinement {
    /// The raw descriptors and flags the child needs; the parent keeps the
    /// owning values alive until the child has been spawned.
    pub fn child_steps(&self) -> ChildSteps {
        let mut cgroup_procs_fds = [-1; MAX_RUN_CGROUPS];
        for (slot, file) in cgroup_procs_fds.iter_mut().zip(&self.cgroup_procs) {
            *slot = file.as_raw_fd();
        }
        ChildSteps {
            landlock_fd: self.landlock.as_ref().map(|f| f.as_raw_fd()),
            cgroup_procs_fds,
            netns: self.netns,
            run_as: self.run_as,
            nproc: self.nproc,
        }
    }

    /// Closes what the child needed once it runs (the parent has no use for it).
    pub fn spawned(&mut self) {
        self.landlock = None;
        self.cgroup_procs.clear();
    }

    /// The most processes the run held at once, when a cgroup counted them
    /// (`pids.peak`, kernels from 6.1 on).
    pub fn peak_processes(&self) -> Option<u64> {
        let cg = self.cgroups.iter().find(|c| c.has(Controller::Pids))?;
        std::fs::read_to_string(cg.dir.join("pids.peak"))
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    /// Whether the kernel OOM-killed a process of the run at its memory
    /// cgroup's limit (false without a memory cgroup).
    pub fn oom_killed(&self) -> bool {
        self.cgroups
            .iter()
            .filter(|c| c.has(Controller::Memory))
            .any(|c| c.oom_kills() > 0)
    }

    /// Whether the run has a memory cgroup whose OOM kills can be watched.
    pub fn watches_memory(&self) -> bool {
        self.cgroups.iter().any(|c| c.has(Controller::Memory))
    }

    /// Kills every process left in the run's cgroups.
    pub fn kill_all(&self) {
        for cg in &self.cgroups {
            cg.kill_all();
        }
    }
}

impl Drop for RunConfinement {
    fn drop(&mut self) {
        for cg in self.cgroups.drain(..) {
            cg.kill_all_patiently();
            cg.remove();
        }
    }
}

/// What the child does between fork and exec. Copy, no allocation: only
/// async-signal-safe system calls happen in [`ChildSteps::apply`].
#[derive(Debug, Clone, Copy)]
pub struct ChildSteps {
    landlock_fd: Option<i32>,
    /// -1 where unused.
    cgroup_procs_fds: [i32; MAX_RUN_CGROUPS],
    netns: bool,
    run_as: Option<RunAs>,
    nproc: Option<u64>,
}

impl ChildSteps {
    /// In this order: joins the cgroups, sets `RLIMIT_NPROC`, enters a new
    /// network namespace, drops to the unprivileged user, then sets
    /// no_new_privs and restricts itself with Landlock. Joining the cgroups
    /// and unsharing need root's privileges, so they come before the drop;
    /// the drop needs `CAP_SETUID`, which no_new_privs and Landlock keep but
    /// which must be gone before the candidate runs.
    ///
    /// Dropping privileges clears the parent-death signal (the kernel resets
    /// it on any change of credentials): the caller sets it after this.
    pub fn apply(&self) -> std::io::Result<()> {
        for fd in self.cgroup_procs_fds.into_iter().filter(|fd| *fd >= 0) {
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
        if let Some(who) = self.run_as {
            drop_privileges(who)?;
        }
        restrict_self(self.landlock_fd)
    }
}

/// Becomes `who`: no supplementary groups, its gid, then its uid (real,
/// effective and saved, so there is no way back). Async-signal-safe
/// system calls only.
fn drop_privileges(who: RunAs) -> std::io::Result<()> {
    // SAFETY: setgroups with an empty list reads nothing; setresgid and
    // setresuid take plain ids.
    unsafe {
        if libc::setgroups(0, std::ptr::null()) != 0
            || libc::setresgid(who.gid, who.gid, who.gid) != 0
            || libc::setresuid(who.uid, who.uid, who.uid) != 0
        {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Where the unprivileged user `ASSAY_SANDBOX_UID` names (`UID` or
/// `UID:GID`; the gid defaults to the uid), or 65534.
fn run_as_from_env() -> Result<RunAs> {
    match std::env::var_os(RUN_AS_VARIABLE) {
        None => Ok(DEFAULT_RUN_AS),
        Some(value) => parse_run_as(&value.to_string_lossy()),
    }
}

/// `UID` or `UID:GID`, numeric and not 0.
fn parse_run_as(value: &str) -> Result<RunAs> {
    let parse = |s: &str| -> Result<u32> {
        s.trim()
            .parse::<u32>()
            .ok()
            .filter(|id| *id != 0)
            .with_context(|| format!("{RUN_AS_VARIABLE}={value}: not a non-zero numeric id"))
    };
    let (uid, gid) = match value.split_once(':') {
        Some((u, g)) => (parse(u)?, parse(g)?),
        None => {
            let uid = parse(value)?;
            (uid, uid)
        }
    };
    Ok(RunAs { uid, gid })
}

/// Forks a child that drops to `who` and reports back, so a uid the kernel
/// refuses (unmapped in a user namespace, say) is found before any run.
fn try_drop_to(who: RunAs) -> Result<()> {
    // SAFETY: the child only makes async-signal-safe calls, then _exit.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(std::io::Error::last_os_error()).context("cannot fork");
    }
    if pid == 0 {
        let code = match drop_privileges(who) {
            Ok(()) => 0,
            Err(e) => e.raw_os_error().unwrap_or(libc::EPERM),
        };
        // SAFETY: as above.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: waits for the child forked above.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    match libc::WEXITSTATUS(status) {
        0 if libc::WIFEXITED(status) => Ok(()),
        errno => Err(std::io::Error::from_raw_os_error(errno))
            .with_context(|| format!("cannot switch to uid {} gid {}", who.uid, who.gid)),
    }
}

/// The first part of `path` (a directory above it, or the file itself) that
/// `who`, with no supplementary groups, cannot search or execute; `None`
/// when it can run `path`. Mode bits only (no ACLs: a refusal there shows
/// as the run failing to start).
fn unreachable_part(path: &Path, who: RunAs) -> Option<PathBuf> {
    let allowed = |p: &Path| {
        let Ok(meta) = std::fs::metadata(p) else {
            return false;
        };
        let mode = meta.mode();
        let bit = if meta.uid() == who.uid {
            0o100
        } else if meta.gid() == who.gid {
            0o010
        } else {
            0o001
        };
        mode & bit != 0
    };
    let mut parts: Vec<&Path> = path.ancestors().collect();
    parts.reverse();
    parts
        .into_iter()
        .find(|p| !allowed(p))
        .map(Path::to_path_buf)
}

/// Whether the machine has any swap space.
fn swap_exists() -> bool {
    std::fs::read_to_string("/proc/swaps").is_ok_and(|s| s.lines().count() > 1)
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

impl CgroupRoot {
    /// Makes the batch's cgroups, named `assay-<pid>-<n>`: a v2 group for
    /// whichever of `pids` and `memory` the unified hierarchy delegates (one
    /// group, since a process is in one v2 cgroup only), then a v1 group for
    /// each controller still missing, nested in assay's own cgroup of that
    /// hierarchy where it can be (so the runs stay inside whatever limits
    /// assay itself is under), else at the hierarchy's root. Returns them,
    /// and each controller none of them holds with why.
    fn create_all(processes: u64) -> (Vec<CgroupRoot>, Vec<(Controller, String)>) {
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let name = format!(
            "assay-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        let wanted = [Controller::Pids, Controller::Memory];
        let mut roots: Vec<CgroupRoot> = Vec::new();
        let mut errors: Vec<(Controller, String)> = Vec::new();
        for base in ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"] {
            let base = Path::new(base);
            if !base.join("cgroup.controllers").exists() {
                continue;
            }
            let delegated =
                std::fs::read_to_string(base.join("cgroup.subtree_control")).unwrap_or_default();
            let controllers: Vec<Controller> = wanted
                .into_iter()
                .filter(|c| delegated.split_whitespace().any(|d| d == c.name()))
                .collect();
            if controllers.is_empty() {
                continue;
            }
            remove_stale(base);
            match CgroupRoot::make(base.join(&name), 2, &controllers, processes) {
                Ok(root) => {
                    roots.push(root);
                    break;
                }
                Err(e) => errors.extend(controllers.iter().map(|c| (*c, format!("{e:#}")))),
            }
        }
        for controller in wanted {
            if roots.iter().any(|r| r.has(controller)) {
                continue;
            }
            for base in v1_bases(controller) {
                remove_stale(&base);
                match CgroupRoot::make(base.join(&name), 1, &[controller], processes) {
                    Ok(root) => {
                        roots.push(root);
                        break;
                    }
                    Err(e) => errors.push((controller, format!("{e:#}"))),
                }
            }
        }
        let missing = wanted
            .into_iter()
            .filter(|c| !roots.iter().any(|r| r.has(*c)))
            .map(|c| {
                let why: Vec<&str> = errors
                    .iter()
                    .filter(|(e, _)| *e == c)
                    .map(|(_, why)| why.as_str())
                    .collect();
                let why = if why.is_empty() {
                    format!("no {} controller is mounted", c.name())
                } else {
                    format!("cannot create a cgroup: {}", why.join("; "))
                };
                (c, why)
            })
            .collect();
        (roots, missing)
    }

    /// Creates `dir` for `controllers` and proves with a trial run that
    /// every limit can be set there.
    fn make(
        dir: PathBuf,
        version: u8,
        controllers: &[Controller],
        processes: u64,
    ) -> Result<CgroupRoot> {
        std::fs::create_dir(&dir).with_context(|| format!("{}", dir.display()))?;
        let mut root = CgroupRoot {
            dir,
            version,
            controllers: controllers.to_vec(),
            swap_limited: false,
            next: AtomicU64::new(0),
        };
        if version == 2 {
            // Children of this cgroup need the controllers too.
            let enable: Vec<String> = controllers
                .iter()
                .map(|c| format!("+{}", c.name()))
                .collect();
            write_control(&root.dir.join("cgroup.subtree_control"), &enable.join(" "))?;
        }
        // Dropping `root` on an error removes its directory.
        let trial = root.run(processes, 1 << 30)?;
        root.swap_limited = trial.dir.join(swap_file(version)).exists();
        trial.remove();
        Ok(root)
    }

    fn has(&self, controller: Controller) -> bool {
        self.controllers.contains(&controller)
    }

    /// A fresh child cgroup for one run, its limits set.
    fn run(&self, processes: u64, memory_bytes: u64) -> Result<RunCgroup> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let dir = self.dir.join(format!("r{n}"));
        std::fs::create_dir(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let cg = RunCgroup {
            dir,
            version: self.version,
            controllers: self.controllers.clone(),
        };
        if let Err(e) = cg.set_limits(processes, memory_bytes) {
            cg.remove();
            return Err(e);
        }
        Ok(cg)
    }
}

impl Drop for CgroupRoot {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// Removes the cgroups an assay that is gone left in `parent`
/// (`assay-<pid>-<n>` with no process `<pid>`): a SIGKILL gives it no
/// chance to remove its own. `rmdir` refuses a cgroup that holds a process
/// or a child, so only empty ones go, their empty runs first; one whose
/// pid is alive (ours, another batch's, or a reused pid) is left alone.
fn remove_stale(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("assay-"))
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if Path::new("/proc").join(pid.to_string()).exists() {
            continue;
        }
        let dir = entry.path();
        for run in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            if run.file_type().is_ok_and(|t| t.is_dir()) {
                let _ = std::fs::remove_dir(run.path());
            }
        }
        let _ = std::fs::remove_dir(&dir);
    }
}

/// Where a v1 hierarchy holding `controller` lets assay make its cgroup:
/// assay's own cgroup in it (from /proc/self/cgroup), then its root.
/// Empty when no v1 hierarchy holds it.
fn v1_bases(controller: Controller) -> Vec<PathBuf> {
    let mount = Path::new("/sys/fs/cgroup").join(controller.name());
    if !mount.join("cgroup.procs").exists() || mount.join("cgroup.controllers").exists() {
        return Vec::new();
    }
    let own = std::fs::read_to_string("/proc/self/cgroup")
        .unwrap_or_default()
        .lines()
        .find_map(|line| {
            let mut fields = line.splitn(3, ':');
            let (_, list, path) = (fields.next()?, fields.next()?, fields.next()?);
            list.split(',')
                .any(|c| c == controller.name())
                .then(|| path.trim_start_matches('/').to_owned())
        });
    let mut bases = Vec::new();
    if let Some(own) = own.filter(|p| !p.is_empty() && !p.split('/').any(|c| c == "..")) {
        bases.push(mount.join(own));
    }
    bases.push(mount);
    bases
}

/// The file that limits a memory cgroup's swap.
fn swap_file(version: u8) -> &'static str {
    if version == 2 {
        "memory.swap.max"
    } else {
        "memory.memsw.limit_in_bytes"
    }
}

fn write_control(file: &Path, value: &str) -> Result<()> {
    std::fs::write(file, value)
        .with_context(|| format!("cannot write {value} to {}", file.display()))
}

impl RunCgroup {
    fn has(&self, controller: Controller) -> bool {
        self.controllers.contains(&controller)
    }

    fn set_limits(&self, processes: u64, memory_bytes: u64) -> Result<()> {
        if self.has(Controller::Pids) {
            write_control(&self.dir.join("pids.max"), &processes.to_string())?;
        }
        if self.has(Controller::Memory) {
            let bytes = memory_bytes.to_string();
            let swap = self.dir.join(swap_file(self.version));
            if self.version == 2 {
                write_control(&self.dir.join("memory.max"), &bytes)?;
                if swap.exists() {
                    write_control(&swap, "0")?;
                }
                // One OOM kill ends the whole run at once (the verdict is
                // out_of_memory either way); older kernels lack the file.
                let _ = std::fs::write(self.dir.join("memory.oom.group"), "1");
            } else {
                write_control(&self.dir.join("memory.limit_in_bytes"), &bytes)?;
                // memory + swap at the memory limit: no swap at all.
                if swap.exists() {
                    write_control(&swap, &bytes)?;
                }
                // A hint only; a v1 parent with several children may refuse it.
                let _ = std::fs::write(self.dir.join("memory.swappiness"), "0");
            }
        }
        Ok(())
    }

    /// How many processes the kernel OOM-killed in this cgroup.
    fn oom_kills(&self) -> u64 {
        let file = if self.version == 2 {
            "memory.events"
        } else {
            "memory.oom_control"
        };
        std::fs::read_to_string(self.dir.join(file))
            .unwrap_or_default()
            .lines()
            .find_map(|l| l.strip_prefix("oom_kill "))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(0)
    }

    /// SIGKILLs every process in the cgroup, pass after pass for about
    /// 20 ms, so a fork racing the kill is caught on the next pass. True
    /// once the cgroup is empty. `pids.max` bounds how many there can be.
    fn kill_all(&self) -> bool {
        self.kill_for(std::time::Duration::from_millis(20))
    }

    /// As [`RunCgroup::kill_all`], for up to two seconds (a killed process
    /// freeing a lot of memory on a busy machine can take longer than a
    /// pass), then says so if any is left. For the blocking drop only.
    fn kill_all_patiently(&self) {
        if !self.kill_for(std::time::Duration::from_secs(2)) {
            tracing::warn!("sandbox: processes remain in {}", self.dir.display());
        }
    }

    fn kill_for(&self, patience: std::time::Duration) -> bool {
        let procs = self.dir.join("cgroup.procs");
        let start = std::time::Instant::now();
        let mut pause = std::time::Duration::from_micros(200);
        loop {
            let Ok(text) = std::fs::read_to_string(&procs) else {
                return true;
            };
            let pids: Vec<i32> = text.lines().filter_map(|l| l.trim().parse().ok()).collect();
            if pids.is_empty() {
                return true;
            }
            if start.elapsed() > patience {
                return false;
            }
            for pid in pids {
                // SAFETY: kill only sends a signal.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(std::time::Duration::from_millis(5));
        }
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

/// Tasks (processes and threads) user `uid` runs now, for `RLIMIT_NPROC`,
/// which counts them all.
fn user_tasks(uid: u32) -> Option<u64> {
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
        let line = sandbox.describe(64 << 20);
        for part in [
            "landlock",
            "netns",
            "pids cgroup",
            "memory cgroup",
            "RLIMIT_NPROC",
        ] {
            assert!(line.contains(part), "{line}");
        }
        if sandbox.limits_memory() {
            assert!(line.contains("max 64 MB"), "the limit itself: {line}");
        }
        // Whatever is missing is said, never dropped.
        if sandbox.landlock_abi < 1 {
            assert!(sandbox.warnings().iter().any(|w| w.contains("Landlock")));
        }
        if !sandbox.netns {
            assert!(sandbox.warnings().iter().any(|w| w.contains("namespace")));
        }
        if !sandbox.limits_memory() {
            assert!(sandbox
                .warnings()
                .iter()
                .any(|w| w.contains("memory cgroup")));
        }
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 && sandbox.run_uid().is_none() {
            assert!(sandbox.warnings().iter().any(|w| w.contains("keep root")));
        }
        if let Some(uid) = sandbox.run_uid() {
            assert!(line.contains(&format!("uid {uid}")), "{line}");
        }
    }

    #[test]
    fn cgroups_of_a_dead_assay_are_removed_and_no_other() {
        let parent = tempfile::tempdir().unwrap();
        // Above the kernel's largest pid (2^22), so never a live process.
        let dead = parent.path().join("assay-4999999-0");
        std::fs::create_dir_all(dead.join("r3")).unwrap();
        let alive = parent
            .path()
            .join(format!("assay-{}-0", std::process::id()));
        std::fs::create_dir_all(alive.join("r0")).unwrap();
        let other = parent.path().join("assay-other");
        std::fs::create_dir(&other).unwrap();
        // A cgroup still holding something stays (here: a file, as a
        // process would keep rmdir from succeeding).
        let busy = parent.path().join("assay-4999998-1");
        std::fs::create_dir(&busy).unwrap();
        std::fs::write(busy.join("cgroup.procs"), "1\n").unwrap();
        remove_stale(parent.path());
        assert!(!dead.exists());
        assert!(alive.join("r0").exists() && other.exists() && busy.exists());
    }

    #[test]
    fn the_run_user_is_numeric_and_never_root() {
        let who = parse_run_as("1234").unwrap();
        assert_eq!((who.uid, who.gid), (1234, 1234));
        let who = parse_run_as("1234:99").unwrap();
        assert_eq!((who.uid, who.gid), (1234, 99));
        for bad in ["0", "0:5", "5:0", "nobody", "", "1:2:3"] {
            assert!(parse_run_as(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_private_directory_hides_the_scorer_from_the_run_user() {
        let who = RunAs {
            uid: 65534,
            gid: 65534,
        };
        let dir = tempfile::tempdir().unwrap();
        let inner = dir.path().join("batch");
        std::fs::create_dir(&inner).unwrap();
        let exe = inner.join("scorer");
        std::fs::write(&exe, b"").unwrap();
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        // Unless the temporary directory's owner is 65534 itself.
        if std::fs::metadata(dir.path()).unwrap().uid() != who.uid {
            assert_eq!(unreachable_part(&exe, who).as_deref(), Some(dir.path()));
        }
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o644)).unwrap();
        if unreachable_part(dir.path(), who).is_none() {
            // Searchable all the way down, but not executable.
            assert_eq!(unreachable_part(&exe, who).as_deref(), Some(exe.as_path()));
            std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
            assert_eq!(unreachable_part(&exe, who), None);
        }
    }
}
