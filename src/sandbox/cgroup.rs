//! Cgroups (v2 where the unified hierarchy delegates a controller, else v1):
//! a batch's group per hierarchy, a child per run with `pids.max` and the
//! memory limit, killing everything in it, and removing what a dead assay
//! left behind.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{Context, Result};
use rustix::process::{Pid, Signal};

/// A controller assay puts each run under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Controller {
    Pids,
    Memory,
}

impl Controller {
    pub(super) fn name(self) -> &'static str {
        match self {
            Controller::Pids => "pids",
            Controller::Memory => "memory",
        }
    }
}

/// A batch's cgroup in one hierarchy; each run gets a child of it.
#[derive(Debug)]
pub(super) struct CgroupRoot {
    pub(super) dir: PathBuf,
    pub(super) version: u8,
    pub(super) controllers: Vec<Controller>,
    /// Whether the run's swap can be limited (v1 `memory.memsw.*`, v2
    /// `memory.swap.max`), when `controllers` holds `Memory`.
    pub(super) swap_limited: bool,
    next: AtomicU64,
}

#[derive(Debug)]
pub(super) struct RunCgroup {
    pub(super) dir: PathBuf,
    pub(super) version: u8,
    pub(super) controllers: Vec<Controller>,
}

/// Whether the machine has any swap space.
pub(super) fn swap_exists() -> bool {
    std::fs::read_to_string("/proc/swaps").is_ok_and(|s| s.lines().count() > 1)
}

impl CgroupRoot {
    /// Makes the batch's cgroups, named `assay-<pid>-<n>`: a v2 group for
    /// whichever of `pids` and `memory` the unified hierarchy delegates (one
    /// group, since a process is in one v2 cgroup only), then a v1 group for
    /// each controller still missing, nested in assay's own cgroup of that
    /// hierarchy where it can be (so the runs stay inside whatever limits
    /// assay itself is under), else at the hierarchy's root. Returns them,
    /// and each controller none of them holds with why.
    pub(super) fn create_all(processes: u64) -> (Vec<CgroupRoot>, Vec<(Controller, String)>) {
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
    pub(super) fn make(
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

    pub(super) fn has(&self, controller: Controller) -> bool {
        self.controllers.contains(&controller)
    }

    /// A fresh child cgroup for one run, its limits set.
    pub(super) fn run(&self, processes: u64, memory_bytes: u64) -> Result<RunCgroup> {
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
pub(super) fn remove_stale(parent: &Path) {
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
    pub(super) fn has(&self, controller: Controller) -> bool {
        self.controllers.contains(&controller)
    }

    pub(super) fn set_limits(&self, processes: u64, memory_bytes: u64) -> Result<()> {
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
    pub(super) fn oom_kills(&self) -> u64 {
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
    pub(super) fn kill_all(&self) -> bool {
        self.kill_for(std::time::Duration::from_millis(20))
    }

    /// As [`RunCgroup::kill_all`], for up to two seconds (a killed process
    /// freeing a lot of memory on a busy machine can take longer than a
    /// pass), then says so if any is left. For the blocking drop only.
    pub(super) fn kill_all_patiently(&self) {
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
            let pids: Vec<Pid> = text
                .lines()
                .filter_map(|l| l.trim().parse().ok().filter(|p| *p > 0))
                .filter_map(Pid::from_raw)
                .collect();
            if pids.is_empty() {
                return true;
            }
            if start.elapsed() > patience {
                return false;
            }
            for pid in pids {
                // One already gone is ESRCH: nothing left to kill.
                let _ = rustix::process::kill_process(pid, Signal::KILL);
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(std::time::Duration::from_millis(5));
        }
    }

    pub(super) fn remove(&self) {
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
