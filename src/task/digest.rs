//! The digest of what decides a task's verdicts and scores: a batch
//! stores it, and a resume or a cached task check compares it.

use std::path::Path;

use crate::spec::Spec;

/// A digest of everything in the spec that decides verdicts and scores: the
/// entry, the cases, the committed candidate, the harness crate's files, the
/// limits and the admission rule. The draw section (how many, which corpus)
/// is left out: it decides which replies come, not what they are worth.
pub fn spec_digest(spec: &Spec) -> String {
    let mut h = blake3::Hasher::new();
    let mut field = |name: &str, bytes: &[u8]| {
        h.update(name.as_bytes());
        h.update(&(bytes.len() as u64).to_le_bytes());
        h.update(bytes);
    };
    field("entry", spec.entry.as_bytes());
    field("cases", spec.cases.text.as_bytes());
    field("committed", spec.committed.source.as_bytes());
    field("wall_ms", &spec.limits.wall.as_millis().to_le_bytes());
    field("min_score", &spec.admit.min_score.to_le_bytes());
    let mut files = Vec::new();
    harness_files(&spec.harness.dir, &spec.harness.dir, &mut files);
    files.sort();
    for (rel, bytes) in files {
        field(&rel, &bytes);
    }
    h.finalize().to_hex()[..32].to_owned()
}

/// Whether an entry of a harness crate's folder named `name` is part of
/// the crate: not a build output (`target`, `Cargo.lock`) and not hidden.
/// The digest reads these, and a queued task carries these.
pub fn is_harness_source(name: &str) -> bool {
    !(name.starts_with('.') || name == "target" || name == "Cargo.lock")
}

/// The harness crate's files, minus build outputs and hidden entries.
fn harness_files(root: &Path, dir: &Path, out: &mut Vec<(String, Vec<u8>)>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        if !is_harness_source(&entry.file_name().to_string_lossy()) {
            continue;
        }
        let path = entry.path();
        if path.is_dir() {
            harness_files(root, &path, out);
        } else if let Ok(bytes) = std::fs::read(&path) {
            let rel = path.strip_prefix(root).unwrap_or(&path);
            out.push((rel.display().to_string(), bytes));
        }
    }
}
