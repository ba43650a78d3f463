//! Input files: every file a user names (spec, prompt, cases, committed
//! candidate, harness manifest, pools file, replay corpus) is read whole,
//! so it is read with a size limit: `--pools /dev/zero` is an error naming
//! the file, not a process that grows until the kernel kills it.

use std::io::Read;
use std::path::Path;

/// The largest input file assay reads (256 MiB): far above any real task's
/// cases or corpus, far below what would exhaust a machine.
pub const MAX_INPUT_BYTES: u64 = 256 << 20;

/// Reads a UTF-8 file of at most [`MAX_INPUT_BYTES`]; a larger one (or an
/// endless one, a device) is an `InvalidData` error that says so.
pub fn read_to_string(path: &Path) -> std::io::Result<String> {
    read_limited(path, MAX_INPUT_BYTES)
}

fn read_limited(path: &Path, limit: u64) -> std::io::Result<String> {
    let file = std::fs::File::open(path)?;
    let mut text = String::new();
    file.take(limit + 1).read_to_string(&mut text)?;
    if text.len() as u64 > limit {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("larger than {} MiB; not an input file", limit >> 20),
        ));
    }
    Ok(text)
}

/// A parser's message as one line: TOML's can run over several ("invalid
/// table header" then "duplicate key ..."), and bad input is reported on
/// one line.
pub fn one_line(message: &str) -> String {
    message
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(": ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_parser_message_over_several_lines_is_one() {
        assert_eq!(
            one_line("invalid table header\nduplicate key `admit` in document root\n"),
            "invalid table header: duplicate key `admit` in document root"
        );
        assert_eq!(one_line("missing field `name`"), "missing field `name`");
    }

    #[test]
    fn an_endless_file_is_refused_at_the_limit() {
        let e = read_limited(Path::new("/dev/zero"), 1 << 20).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidData);
        assert!(e.to_string().contains("larger than 1 MiB"), "{e}");
    }

    #[test]
    fn a_file_within_the_limit_is_read_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, "abc").unwrap();
        assert_eq!(read_limited(&path, 3).unwrap(), "abc");
        assert!(read_limited(&path, 2).is_err());
    }
}
