//! The validator a spec's tables share: the file it reads, and errors
//! that name the file, the key and, where it is known, the line.

use std::path::{Path, PathBuf};

use super::SpecError;

pub(super) struct Validator {
    pub(super) file: PathBuf,
    pub(super) dir: PathBuf,
    /// The spec's text, for the lines of values found out of range.
    pub(super) text: String,
}

impl Validator {
    pub(super) fn file_at(&self, key: &'static str, rel: &Path) -> Result<PathBuf, SpecError> {
        let path = self.dir.join(rel);
        let problem = if rel.as_os_str().is_empty() {
            "is empty"
        } else {
            match std::fs::metadata(&path) {
                Ok(m) if m.is_file() => return Ok(path),
                Ok(m) if m.is_dir() => "is a folder, not a file",
                // A device, a pipe, a socket: it exists, but is no file.
                Ok(_) => "is not a regular file",
                Err(_) => "does not exist",
            }
        };
        Err(SpecError::MissingFile {
            file: self.file.clone(),
            key,
            path,
            problem,
        })
    }

    /// An invalid value whose place in the file is known.
    pub(super) fn invalid_at(
        &self,
        key: &'static str,
        offset: usize,
        message: String,
    ) -> SpecError {
        SpecError::Invalid {
            file: self.file.clone(),
            line: Some(line_of(&self.text, offset)),
            key,
            message,
        }
    }

    pub(super) fn invalid(&self, key: &'static str, message: impl Into<String>) -> SpecError {
        SpecError::Invalid {
            file: self.file.clone(),
            line: None,
            key,
            message: message.into(),
        }
    }
}

pub(super) fn read(path: &Path) -> Result<String, SpecError> {
    crate::support::input::read_to_string(path).map_err(|source| SpecError::Read {
        file: path.to_path_buf(),
        source,
    })
}

/// 1-based line of a byte offset.
pub(crate) fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}
