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
use std::os::fd::{AsRawFd as _, RawFd};
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{Context, Result};

/// A placed executable's mode: anyone may read and run it, nobody write it.
const MODE: libc::mode_t = 0o555;

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
    let source = source.as_raw_fd();
    // SAFETY: between fork and _exit the child makes only async-signal-safe
    // system calls (open, copy_file_range, pread, write, fchmod, close), on
    // memory prepared before the fork, as the child of a multi-threaded
    // process must.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(std::io::Error::last_os_error());
    }
    if pid == 0 {
        let code = match write_copy(source, len, dest) {
            Ok(()) => 0,
            Err(errno) => errno,
        };
        // SAFETY: as above.
        unsafe { libc::_exit(code) };
    }
    let status = reap(pid)?;
    if !libc::WIFEXITED(status) {
        return Err(std::io::Error::other(format!(
            "the copying process died of signal {}",
            libc::WTERMSIG(status)
        )));
    }
    match libc::WEXITSTATUS(status) {
        0 => Ok(()),
        errno => Err(std::io::Error::from_raw_os_error(errno)),
    }
}

/// Waits for the child `pid`; its wait status.
fn reap(pid: libc::pid_t) -> std::io::Result<i32> {
    let mut status = 0;
    loop {
        // SAFETY: waits for our own child, writing into a valid local.
        if unsafe { libc::waitpid(pid, &mut status, 0) } == pid {
            return Ok(status);
        }
        let err = std::io::Error::last_os_error();
        if err.kind() != std::io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

/// The child's work: creates `dest` (never an existing file), copies
/// `source` into it from its start, sets mode 0555 (whatever the umask)
/// and closes it, reporting a failed close too (where a network
/// filesystem reports a failed write). Async-signal-safe; errors are
/// errno values.
fn write_copy(source: RawFd, len: u64, dest: &CStr) -> Result<(), i32> {
    let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC;
    // SAFETY: `dest` is a valid C string; open takes the mode as a vararg.
    let out = unsafe { libc::open(dest.as_ptr(), flags, libc::c_uint::from(MODE)) };
    if out < 0 {
        return Err(errno());
    }
    let copied = copy_all(source, len, out).and_then(|()| {
        // SAFETY: fchmod on the descriptor opened above.
        ok_or_errno(unsafe { libc::fchmod(out, MODE) })
    });
    // SAFETY: closes the descriptor opened above, once.
    let closed = ok_or_errno(unsafe { libc::close(out) });
    copied.and(closed)
}

/// Copies `len` bytes of `source` from offset 0 to `out`'s position: in
/// the kernel where it can (`copy_file_range`; no bytes through this
/// process), else, from where that stopped, through a buffer on the stack.
/// Reads at explicit offsets, so the descriptor the child shares with its
/// parent keeps its position.
fn copy_all(source: RawFd, len: u64, out: RawFd) -> Result<(), i32> {
    let mut offset: libc::off64_t = 0;
    while (offset as u64) < len {
        // SAFETY: valid descriptors and offset; a null output offset
        // means `out`'s own position.
        let n = unsafe {
            libc::copy_file_range(
                source,
                &mut offset,
                out,
                std::ptr::null_mut(),
                KERNEL_CHUNK,
                0,
            )
        };
        match n {
            1.. => continue,
            // Nothing where the file says there is more: a filesystem
            // whose kernel copy reads nothing; the buffer decides.
            0 => break,
            _ => match errno() {
                libc::EINTR => continue,
                // Across filesystems, or a filesystem without it.
                libc::EXDEV | libc::EINVAL | libc::ENOSYS | libc::EOPNOTSUPP => break,
                e => return Err(e),
            },
        }
    }
    let mut buf = [0u8; BUFFER_BYTES];
    loop {
        // SAFETY: reads into a buffer of this length.
        let n = unsafe { libc::pread64(source, buf.as_mut_ptr().cast(), buf.len(), offset) };
        match n {
            0 => return Ok(()),
            1.. => {
                write_all(out, &buf[..n as usize])?;
                offset += n as libc::off64_t;
            }
            _ if errno() == libc::EINTR => {}
            _ => return Err(errno()),
        }
    }
}

fn write_all(out: RawFd, mut bytes: &[u8]) -> Result<(), i32> {
    while !bytes.is_empty() {
        // SAFETY: writes from a valid buffer of this length.
        let n = unsafe { libc::write(out, bytes.as_ptr().cast(), bytes.len()) };
        match n {
            1.. => bytes = &bytes[n as usize..],
            0 => return Err(libc::EIO),
            _ if errno() == libc::EINTR => {}
            _ => return Err(errno()),
        }
    }
    Ok(())
}

fn ok_or_errno(r: libc::c_int) -> Result<(), i32> {
    if r == 0 {
        Ok(())
    } else {
        Err(errno())
    }
}

/// The calling thread's errno; reads a thread-local, allocates nothing.
fn errno() -> i32 {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
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
