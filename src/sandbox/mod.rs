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
//!   cannot reach the original ([`place_executable`], which every copy of
//!   an executable assay makes goes through, so that no exec of it can
//!   fail with `ETXTBSY`); the run's directory is handed to it.
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

mod cargo;
mod cgroup;
pub mod compile;
mod fork;
mod landlock;
mod netns;
mod place;
pub mod scratch;
mod user;

use std::fs::File;
use std::os::fd::{AsFd as _, OwnedFd};
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use anyhow::{Context, Result};
use rustix::io::Errno;
use rustix::process::{Resource, Rlimit};

pub use cargo::{confine_cargo, BuildPaths};
pub use landlock::landlock_abi;
pub use place::place_executable;
pub use user::RUN_AS_VARIABLE;

use cgroup::{swap_exists, CgroupRoot, Controller, RunCgroup};
use landlock::{restrict_self, run_ruleset, TARGET_ABI};
use netns::{new_network_namespace, try_unshare_net};
use user::{drop_privileges, run_as_from_env, try_drop_to, unreachable_part, user_tasks, RunAs};

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

/// One run's confinement, prepared in the parent. Dropping it kills
/// whatever is left of the run and removes its cgroups.
#[derive(Debug)]
pub struct RunConfinement {
    /// What the child uses between fork and exec; shared with its
    /// [`ChildSteps`], let go of once the child runs.
    fds: Option<Arc<ChildFds>>,
    cgroups: Vec<RunCgroup>,
    netns: bool,
    run_as: Option<RunAs>,
    nproc: Option<u64>,
}

/// The descriptors a run's child uses between fork and exec. Shared (an
/// `Arc`) by the parent's [`RunConfinement`] and the child's
/// [`ChildSteps`], so they stay open as long as either may need them.
#[derive(Debug)]
struct ChildFds {
    /// The run's Landlock ruleset.
    landlock: Option<OwnedFd>,
    /// `cgroup.procs` of each of the run's cgroups (one per hierarchy
    /// holding a controller assay uses: a v1 `pids` and a v1 `memory`, or
    /// one v2 group), opened for the child to join.
    cgroup_procs: Vec<File>,
}

/// Scoring binaries copied to a directory the run's user can traverse.
#[derive(Debug, Default)]
struct ExeCopies {
    dir: Option<scratch::ScratchDir>,
    /// (original, its modification time, the copy)
    copies: Vec<(PathBuf, Option<SystemTime>, PathBuf)>,
}

impl Sandbox {
    /// Finds what the kernel offers. Never fails: what is missing becomes a
    /// warning (also logged), and the rest is used.
    pub fn probe(processes: u64) -> Sandbox {
        let sandbox = Sandbox::find(processes);
        for w in &sandbox.warnings {
            tracing::warn!("sandbox: {w}");
        }
        sandbox
    }

    /// [`Sandbox::probe`] without logging the warnings, for a child that is
    /// not a batch's (the case checker): the batch says them once.
    pub fn find(processes: u64) -> Sandbox {
        // What an assay killed before it could clean up left behind.
        for dir in scratch::sweep() {
            tracing::debug!(dir = %dir.display(), "removed a dead assay's scratch directory");
        }
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
        let root = rustix::process::geteuid().is_root();
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
                let uid = rustix::process::geteuid().as_raw();
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
    /// directory above it is searchable by that user, else a copy
    /// ([`place_executable`]) in a directory of our own under the system's
    /// temporary directory (made once per binary and batch, removed with
    /// the sandbox).
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
            let dir = scratch::ScratchDir::new(scratch::Kind::Scorer)
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
        // Exec'd as soon as this returns, while other runs start: placed
        // so that none of their children can hold it open for writing.
        // Owned by root, mode 0555: not writable by the run's user.
        place_executable(&exe, &copy)?;
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
            fds: Some(Arc::new(ChildFds {
                landlock,
                cgroup_procs,
            })),
            cgroups,
            netns: self.netns,
            run_as: self.run_as,
            nproc: self.nproc,
        })
    }
}

impl RunConfinement {
    /// The descriptors and flags the child needs. It shares the
    /// descriptors, so they stay open until both it and this confinement
    /// have let go of them ([`RunConfinement::spawned`]).
    pub fn child_steps(&self) -> ChildSteps {
        ChildSteps {
            fds: self.fds.clone(),
            netns: self.netns,
            run_as: self.run_as,
            nproc: self.nproc,
        }
    }

    /// Has `cmd`'s child take these steps between fork and exec (after
    /// `RLIMIT_CORE` 0), for a child that needs nothing else of a scoring
    /// run's set-up (the case checker). Call [`RunConfinement::spawned`]
    /// once it runs.
    pub fn confine(&self, cmd: &mut tokio::process::Command) {
        let steps = self.child_steps();
        let none = Rlimit {
            current: Some(0),
            maximum: Some(0),
        };
        // SAFETY: the closure runs between fork and exec and makes only
        // async-signal-safe system calls (setrlimit, then
        // `ChildSteps::apply`'s); it allocates nothing.
        unsafe {
            cmd.pre_exec(move || {
                rustix::process::setrlimit(Resource::Core, none)?;
                steps.apply()
            });
        }
    }

    /// Closes what the child needed once it runs (the parent has no use for it).
    pub fn spawned(&mut self) {
        self.fds = None;
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

    /// How many processes the kernel OOM-killed in the run's memory cgroup
    /// so far (0 without one).
    pub fn oom_kills(&self) -> u64 {
        self.cgroups
            .iter()
            .filter(|c| c.has(Controller::Memory))
            .map(|c| c.oom_kills())
            .sum()
    }

    /// How many processes the run's pids cgroup holds now, when there is
    /// one.
    pub fn processes(&self) -> Option<usize> {
        let cg = self.cgroups.iter().find(|c| c.has(Controller::Pids))?;
        let procs = std::fs::read_to_string(cg.dir.join("cgroup.procs")).ok()?;
        Some(procs.lines().filter(|l| !l.trim().is_empty()).count())
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

/// What the child does between fork and exec. Made and cloned in the
/// parent; the child only reads it (no allocation, no drop): only
/// async-signal-safe system calls happen in [`ChildSteps::apply`].
#[derive(Debug, Clone)]
pub struct ChildSteps {
    /// `None` once the confinement let go of them: the child is running.
    fds: Option<Arc<ChildFds>>,
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
        // Steps taken after the confinement let go of its descriptors
        // would run unconfined: refused (an errno, which allocates nothing).
        let fds = self.fds.as_deref().ok_or(Errno::BADF)?;
        for procs in &fds.cgroup_procs {
            // "0" is the writing process, in cgroup v1 and v2 alike.
            rustix::io::write(procs, b"0\n")?;
        }
        if let Some(n) = self.nproc {
            let limit = Rlimit {
                current: Some(n),
                maximum: Some(n),
            };
            rustix::process::setrlimit(Resource::Nproc, limit)?;
        }
        if self.netns {
            new_network_namespace()?;
        }
        if let Some(who) = self.run_as {
            drop_privileges(who)?;
        }
        restrict_self(fds.landlock.as_ref().map(|fd| fd.as_fd()))
    }
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
        if rustix::process::geteuid().is_root() && sandbox.run_uid().is_none() {
            assert!(sandbox.warnings().iter().any(|w| w.contains("keep root")));
        }
        if let Some(uid) = sandbox.run_uid() {
            assert!(line.contains(&format!("uid {uid}")), "{line}");
        }
        if std::env::var_os(EXPECT_DEGRADED).is_some() {
            // Run as an unprivileged user by the test below: no network
            // namespace and no cgroup of its own, so the warnings above
            // were all reached.
            assert!(!sandbox.netns, "{line}");
            assert!(!sandbox.limits_memory(), "{line}");
            assert!(sandbox.warnings().len() >= 2, "{:?}", sandbox.warnings());
        }
    }

    /// Steps whose descriptors are gone (taken after `spawned`) would run
    /// without Landlock or cgroups: refused before any system call.
    #[test]
    fn steps_without_their_descriptors_are_refused() {
        let steps = ChildSteps {
            fds: None,
            netns: false,
            run_as: None,
            nproc: None,
        };
        let err = steps.apply().unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EBADF), "{err}");
    }

    const EXPECT_DEGRADED: &str = "ASSAY_TEST_EXPECT_DEGRADED_SANDBOX";

    /// Root has every part of the sandbox, so the test above never reaches
    /// its warnings there: run it again as uid 65534, which has none of the
    /// privileged parts. (Where the suite already runs unprivileged, the
    /// test above reaches them itself.)
    #[test]
    fn an_unprivileged_user_is_told_each_part_it_lacks() {
        use std::os::unix::process::CommandExt;
        if !rustix::process::geteuid().is_root() {
            return;
        }
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "sandbox::tests::description_names_every_mechanism",
                "--nocapture",
            ])
            .env(EXPECT_DEGRADED, "1")
            .current_dir("/")
            .uid(65534)
            .gid(65534)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(stdout.contains("1 passed"), "{stdout}");
    }
}
