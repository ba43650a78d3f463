//! Owner: which process is writing a running batch, and whether it is alive.
//!
//! A batch's row names its owner (host, boot id, pid, start time). Another
//! `assay` reading the database can then tell a batch that is being written
//! right now from one whose process was killed: a pid alone is not enough
//! (pids are reused, and mean nothing after a reboot), but a pid with the
//! process's start time in clock ticks since boot, on the same boot of the
//! same host, names one process for good. Reads `/proc`; does no SQL.
//!
//! What cannot be told: a process in another pid namespace that shares the
//! host name and boot (a container started with the host's UTS namespace)
//! looks dead from here, and a process on another host (a database on a
//! network file system) is never judged at all.

/// The process that runs a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    pub host: String,
    /// The kernel's boot id (`/proc/sys/kernel/random/boot_id`).
    pub boot: String,
    pub pid: u32,
    /// Start time in clock ticks since boot (`/proc/PID/stat`, field 22).
    pub start: u64,
}

/// What can be said about an owner from this process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Liveness {
    Alive,
    Dead,
    /// On another host: nothing can be told.
    Unknown,
}

impl Owner {
    /// This process.
    pub fn current() -> Owner {
        let pid = std::process::id();
        Owner {
            host: host_name(),
            boot: boot_id(),
            pid,
            start: start_ticks(pid).unwrap_or(0),
        }
    }

    /// Whether this owner still runs, seen from this process.
    pub fn liveness(&self) -> Liveness {
        let here = Owner::current();
        if self.host != here.host {
            return Liveness::Unknown;
        }
        if self.boot != here.boot {
            // The machine restarted since: every process of that boot is gone.
            return Liveness::Dead;
        }
        if self.pid == here.pid {
            return if self.start == here.start {
                Liveness::Alive
            } else {
                Liveness::Dead
            };
        }
        // Signal 0 checks existence without sending anything. EPERM means the
        // process exists but belongs to someone else.
        let Ok(pid) = libc::pid_t::try_from(self.pid) else {
            return Liveness::Dead;
        };
        // SAFETY: kill with signal 0 only checks whether the pid exists.
        let exists = unsafe { libc::kill(pid, 0) } == 0
            || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
        if !exists {
            return Liveness::Dead;
        }
        match stat(self.pid) {
            Some((start, _)) if start != self.start => Liveness::Dead, // pid reused
            // A zombie has exited; only its parent has not reaped it yet.
            Some((_, 'Z' | 'X')) => Liveness::Dead,
            Some(_) => Liveness::Alive,
            // Exists but its /proc entry is hidden from us (hidepid): assume
            // it is the owner rather than steal a live batch.
            None => Liveness::Alive,
        }
    }
}

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_owned())
        .unwrap_or_default()
}

fn boot_id() -> String {
    procfs::sys::kernel::random::boot_id()
        .map(|s| s.trim().to_owned())
        .unwrap_or_default()
}

fn start_ticks(pid: u32) -> Option<u64> {
    stat(pid).map(|(start, _)| start)
}

/// Start time and state letter of a process.
fn stat(pid: u32) -> Option<(u64, char)> {
    let pid = i32::try_from(pid).ok()?;
    let stat = procfs::process::Process::new(pid).ok()?.stat().ok()?;
    Some((stat.starttime, stat.state))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_alive() {
        let me = Owner::current();
        assert!(me.start > 0, "start time read from /proc");
        assert!(!me.boot.is_empty());
        assert_eq!(me.liveness(), Liveness::Alive);
    }

    #[test]
    fn a_dead_child_is_dead_and_a_reused_pid_is_not_its_owner() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        let owner = Owner {
            start: start_ticks(pid).unwrap_or(1),
            pid,
            ..Owner::current()
        };
        child.wait().unwrap();
        assert_eq!(owner.liveness(), Liveness::Dead);

        // A live process with another start time is not the recorded owner.
        let parent = Owner {
            pid: std::os::unix::process::parent_id(),
            start: 1,
            ..Owner::current()
        };
        assert_eq!(parent.liveness(), Liveness::Dead);
        let parent = Owner {
            start: start_ticks(parent.pid).unwrap(),
            ..parent
        };
        assert_eq!(parent.liveness(), Liveness::Alive);
    }

    #[test]
    fn another_boot_is_dead_and_another_host_unknown() {
        let me = Owner::current();
        let rebooted = Owner {
            boot: "another-boot".into(),
            ..me.clone()
        };
        assert_eq!(rebooted.liveness(), Liveness::Dead);
        let elsewhere = Owner {
            host: format!("{}-elsewhere", me.host),
            ..me
        };
        assert_eq!(elsewhere.liveness(), Liveness::Unknown);
    }
}
