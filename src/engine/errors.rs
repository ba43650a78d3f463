//! One error-file format for every unit that did not build, a task's
//! candidate or a suite's program: a header line naming the unit and its
//! verdict, a blank line, then what rustc said. The store keeps the same
//! diagnostics beside the verdict, so the file is a convenience on the
//! machine that built it, never the only copy: `show --errors` prints the
//! same text from the store (`report::errors`).

use std::fmt::Display;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::report::errors::file_text;

/// Writes `dir/file_name` and returns its path.
pub fn write(
    dir: &Path,
    file_name: &str,
    unit: &str,
    verdict: &dyn Display,
    diagnostics: &str,
) -> Result<PathBuf> {
    let path = dir.join(file_name);
    std::fs::write(&path, file_text(unit, verdict, diagnostics))
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_header_a_blank_line_then_rustc_s_words() {
        let dir = tempfile::tempdir().unwrap();
        let path = super::write(
            dir.path(),
            "c3.txt",
            "candidate 3",
            &"compile_error(E0308)",
            "error[E0308]: mismatched types",
        )
        .unwrap();
        assert_eq!(
            std::fs::read_to_string(path).unwrap(),
            "candidate 3: compile_error(E0308)\n\nerror[E0308]: mismatched types"
        );
    }
}
