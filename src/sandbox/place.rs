//! Placing an executable where a child will exec it, so that the exec
//! cannot fail with `ETXTBSY` ("Text file busy").
//!
//! Linux refuses to exec a file that any process holds open for writing.
//! A copy written by assay's own process holds its destination open for
//! writing while it writes, and every child that another thread forks
//! meanwhile gets a duplicate of that descriptor. The descriptor is
//! close-on-exec, so the child holds it only until its own exec; but a
//! confined child's exec comes after it joins its cgroups, enters a new
//! network namespace, drops its uid and restricts itself with Landlock,
//! and an exec of the fresh copy in that window fails (issue 25: a scorer
//! copy, exec'd right after it was written while other runs were
//! starting). A lock could close the window only if every fork in the
//! process took it: cargo's, the lanes', a library caller's.
//!
//! So the copy is written by a process of its own: [`place_executable`]
//! forks a child (no exec) that writes it and exits. assay's process never
//! holds a descriptor open for writing on the copy, so no child forked by
//! any other thread can inherit one; the writing child forks nothing and
//! has exited when the function returns. When the copy is exec'd, no
//! process anywhere holds it open for writing.

use std::ffi::{CStr, CString};
use std::fs::File;
use std::os::fd::{AsFd as _, BorrowedFd, IntoRawFd as _, OwnedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{Context, Result};
use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;

use super::fork::in_child;

/// A placed executable's mode: anyone may read and run it, nobody write it.
const MODE: Mode = Mode::from_raw_mode(0o555);

/// The most bytes one `copy_file_range` call is asked for.
const KERNEL_CHUNK: usize = 1 << 30;

/// The copying child's buffer, where the kernel cannot copy by itself.
const BUFFER_BYTES: usize = 64 << 10;

/// Puts a copy of the executable `from` at `to` (replacing what is there),
/// mode 0555, written by a child process so that no process holds it open
/// for writing once this returns (see the module's comment). The copy is
/// written under a temporary name beside `to` and renamed into place, so
/// `to` is never a partial file. Every path a run execs that assay wrote
/// itself is placed here.
pub fn place_executable(from: &Path, to: &Path) -> Result<()> {
    // Read-only: a read descriptor that a fork inherits blocks no exec.
    let source = File::open(from).with_context(|| format!("cannot read {}", from.display()))?;
    let len = source
        .metadata()
        .with_context(|| format!("cannot read {}", from.display()))?
        .len();
    let part = part_path(to)?;
    let part_c = CString::new(part.as_os_str().as_bytes())
        .with_context(|| format!("{} has a NUL byte", part.display()))?;
    let placed = copy_in_child(&source, len, &part_c).and_then(|()| std::fs::rename(&part, to));
    if let Err(e) = placed {
        let _ = std::fs::remove_file(&part);
        return Err(e)
            .with_context(|| format!("cannot copy {} to {}", from.display(), to.display()));
    }
    Ok(())
}

/// A fresh name beside `to` for the copy while it is written: hidden, and
/// unique to this process and call.
fn part_path(to: &Path) -> Result<PathBuf> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let name = to
        .file_name()
        .with_context(|| format!("{} names no file", to.display()))?;
    Ok(to.with_file_name(format!(
        ".{}.{}-{}.part",
        name.to_string_lossy(),
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )))
}

/// Forks a child that creates `dest` and copies `source` (`len` bytes)
/// into it, then waits for it.
fn copy_in_child(source: &File, len: u64, dest: &CStr) -> std::io::Result<()> {
    let source = source.as_fd();
    // SAFETY: the child makes only async-signal-safe system calls (open,
    // copy_file_range, pread, write, fchmod, close: rustix's raw system
    // calls) on memory prepared before the fork: `source`, `dest`, and a
    // buffer on its stack.
    let status = unsafe {
        in_child(|| match write_copy(source, len, dest) {
            Ok(()) => 0,
            Err(errno) => errno.raw_os_error(),
        })
    }?;
    match status.exit_status() {
        Some(0) => Ok(()),
        Some(errno) => Err(std::io::Error::from_raw_os_error(errno)),
        None => Err(std::io::Error::other(format!(
            "the copying process died of signal {}",
            status.terminating_signal().unwrap_or(0)
        ))),
    }
}

/// The child's work: creates `dest` (never an existing file), copies
/// `source` into it from its start, sets mode 0555 (whatever the umask)
/// and closes it, reporting a failed close too (where a network
/// filesystem reports a failed write). Async-signal-safe.
fn write_copy(source: BorrowedFd<'_>, len: u64, dest: &CStr) -> Result<(), Errno> {
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::CLOEXEC;
    let out = rustix::fs::open(dest, flags, MODE)?;
    let copied = copy_all(source, len, &out).and_then(|()| rustix::fs::fchmod(&out, MODE));
    // SAFETY: the descriptor was opened above and `into_raw_fd` gave it
    // up, so it is closed here once. An `OwnedFd`'s drop would close it
    // too, but drops the error; no safe close reports one.
    let closed = unsafe { rustix::io::try_close(out.into_raw_fd()) };
    copied.and(closed)
}

/// Copies `len` bytes of `source` from offset 0 to `out`'s position: in
/// the kernel where it can (`copy_file_range`; no bytes through this
/// process), else, from where that stopped, through a buffer on the stack.
/// Reads at explicit offsets, so the descriptor the child shares with its
/// parent keeps its position.
fn copy_all(source: BorrowedFd<'_>, len: u64, out: &OwnedFd) -> Result<(), Errno> {
    let mut offset: u64 = 0;
    while offset < len {
        // `None` for the output offset: `out`'s own position.
        match rustix::fs::copy_file_range(source, Some(&mut offset), out, None, KERNEL_CHUNK) {
            Ok(1..) => continue,
            // Nothing where the file says there is more: a filesystem
            // whose kernel copy reads nothing; the buffer decides.
            Ok(0) => break,
            Err(Errno::INTR) => continue,
            // Across filesystems, or a filesystem without it.
            Err(Errno::XDEV | Errno::INVAL | Errno::NOSYS | Errno::OPNOTSUPP) => break,
            Err(e) => return Err(e),
        }
    }
    let mut buf = [0u8; BUFFER_BYTES];
    loop {
        match rustix::io::pread(source, &mut buf[..], offset) {
            Ok(0) => return Ok(()),
            Ok(n) => {
                write_all(out, &buf[..n])?;
                offset += n as u64;
            }
            Err(Errno::INTR) => {}
            Err(e) => return Err(e),
        }
    }
}

fn write_all(out: &OwnedFd, mut bytes: &[u8]) -> Result<(), Errno> {
    while !bytes.is_empty() {
        match rustix::io::write(out, bytes) {
            Ok(0) => return Err(Errno::IO),
            Ok(n) => bytes = &bytes[n..],
            Err(Errno::INTR) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    /// An executable of the system's to copy: `true` wherever it lives.
    fn system_true() -> PathBuf {
        ["/usr/bin/true", "/bin/true"]
            .into_iter()
            .map(PathBuf::from)
            .find(|p| p.exists())
            .expect("a `true` binary")
    }

    #[test]
    fn a_placed_copy_is_whole_read_only_and_runs() {
        let dir = tempfile::tempdir().unwrap();
        let to = dir.path().join("image");
        let from = system_true();
        place_executable(&from, &to).unwrap();
        assert_eq!(std::fs::read(&to).unwrap(), std::fs::read(&from).unwrap());
        let mode = std::fs::metadata(&to).unwrap().permissions().mode();
        assert_eq!(mode & 0o7777, 0o555);
        assert!(std::process::Command::new(&to).status().unwrap().success());
        // Nothing but the copy: the temporary name was renamed away.
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("image")]);
    }

    #[test]
    fn a_placed_copy_replaces_what_was_there() {
        let dir = tempfile::tempdir().unwrap();
        let (one, two, to) = (
            dir.path().join("one"),
            dir.path().join("two"),
            dir.path().join("to"),
        );
        std::fs::write(&one, "first").unwrap();
        std::fs::write(&two, "second, longer").unwrap();
        place_executable(&one, &to).unwrap();
        place_executable(&two, &to).unwrap();
        assert_eq!(std::fs::read_to_string(&to).unwrap(), "second, longer");
    }

    /// Across filesystems the kernel's copy refuses (`EXDEV`), and the
    /// buffer copies: a file on the memory filesystem placed on the disk.
    #[test]
    fn a_copy_across_filesystems_is_whole() {
        let Ok(shm) = tempfile::tempdir_in("/dev/shm") else {
            return;
        };
        let from = shm.path().join("big");
        // Several buffers' worth, not a multiple of one.
        let bytes: Vec<u8> = (0..(3 * BUFFER_BYTES + 17)).map(|i| i as u8).collect();
        std::fs::write(&from, &bytes).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let to = dir.path().join("big");
        place_executable(&from, &to).unwrap();
        assert_eq!(std::fs::read(&to).unwrap(), bytes);
    }

    #[test]
    fn a_copy_that_fails_says_why_and_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing");
        let err = place_executable(&missing, &dir.path().join("to")).unwrap_err();
        assert!(
            format!("{err:#}").contains(&missing.display().to_string()),
            "{err:#}"
        );
        // The child cannot create the copy: no such directory.
        let to = dir.path().join("no-such-dir").join("to");
        let err = place_executable(&system_true(), &to).unwrap_err();
        let text = format!("{err:#}");
        assert!(text.contains(&to.display().to_string()), "{text}");
        assert!(text.contains("No such file or directory"), "{text}");
        // The child creates the copy, then cannot read a directory
        // (EISDIR): the partial file goes too.
        let out = dir.path().join("out");
        std::fs::create_dir(&out).unwrap();
        let err = place_executable(dir.path(), &out.join("to")).unwrap_err();
        assert!(format!("{err:#}").contains("Is a directory"), "{err:#}");
        assert_eq!(std::fs::read_dir(&out).unwrap().count(), 0);
    }
}
