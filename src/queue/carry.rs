//! What a queued item carries instead of paths (issue 36): a task's files
//! by content, and a pools file's text.
//!
//! Queueing packs the files a task's spec names (the spec, the prompt, the
//! cases, the committed candidate, the replay corpus, a repair template)
//! and its harness crate into a [`CarriedTask`]: each file's path inside
//! the task's folder, its executable bit and the blake3 digest of its
//! bytes, which are stored once per distinct content as blobs
//! (`Store::put_blobs`); the set has a digest of its own. A lane writes
//! the set into a folder of its own ([`write_task`]), checking each blob
//! against its name and the set against its digest, and runs from there,
//! so editing or deleting the task's folder after queueing changes
//! nothing queued. Only regular files and folders inside the task's
//! folder are packed (a symlink is followed only to a file inside it),
//! and a task holds at most [`MAX_TASK_BYTES`].
//!
//! A pools file travels as its text ([`CarriedPools`]): it holds no key
//! (only the names of the variables holding them, read on each lane) and
//! no password (`base_url` with one is refused).

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::spec::Spec;
use crate::task::is_harness_source;

/// The most a queued task's files may hold together: the bundled tasks
/// hold under 0.5 MiB; a task past this is a folder holding more than
/// its task.
pub const MAX_TASK_BYTES: u64 = 32 << 20;

/// A task's files as an item carries them: names and digests, the bytes
/// being in the store's blobs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CarriedTask {
    /// The spec's `name`, for `assay queue`.
    pub name: String,
    /// The spec file's path among `files`.
    pub spec: String,
    /// Every file, sorted by path.
    pub files: Vec<CarriedFile>,
    /// The digest of all the above ([`CarriedTask::digest_of`]).
    pub digest: String,
}

/// One file of a carried task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CarriedFile {
    /// Inside the task's folder, `/`-separated, no `.` or `..`.
    pub path: String,
    /// The blake3 digest of its bytes, hex: its blob's name.
    pub blob: String,
    pub size: u64,
    /// The one mode bit that matters to a task (a script it runs).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub executable: bool,
}

/// A pools file as an item carries it: its text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CarriedPools {
    pub text: String,
}

/// A packed task: what the item names, and the bytes to store as blobs.
#[derive(Debug, Clone)]
pub struct Packed {
    pub task: CarriedTask,
    /// Blob digest to bytes, one entry per distinct content.
    pub blobs: BTreeMap<String, Vec<u8>>,
}

/// Why a task or pools file cannot be packed, or a carried task written.
#[derive(Debug, thiserror::Error)]
pub enum CarryError {
    #[error("{}: cannot read: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: outside the task's folder {}: a queued task carries only what its folder holds", path.display(), root.display())]
    Outside { path: PathBuf, root: PathBuf },
    #[error("{}: a symlink to a folder: a queued task's folders must be real ones", path.display())]
    LinkedFolder { path: PathBuf },
    #[error("{}: not a regular file or folder: a queued task carries only those", path.display())]
    NotRegular { path: PathBuf },
    #[error("{}: the task's files pass {} MiB with this one: a queued task travels in the store, so it must stay under that", path.display(), MAX_TASK_BYTES >> 20)]
    TooLarge { path: PathBuf },
    #[error("{}: a path that is not UTF-8 cannot be queued", path.display())]
    NotUtf8 { path: PathBuf },
    #[error("queued task {task}: `{path}` is not a path inside a task's folder")]
    BadPath { task: String, path: String },
    #[error("queued task {task}: {path}: its blob {blob} is not in the store")]
    MissingBlob {
        task: String,
        path: String,
        blob: String,
    },
    #[error("queued task {task}: {path}: the stored bytes do not match their digest {blob}")]
    BlobMismatch {
        task: String,
        path: String,
        blob: String,
    },
    #[error("queued task {task}: its files do not match its digest {digest} (they give {found})")]
    DigestMismatch {
        task: String,
        digest: String,
        found: String,
    },
    #[error("{}: cannot write: {source}", path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

impl CarriedTask {
    /// The digest of a task's name, spec path and files (each file's path,
    /// blob, size and executable bit, in order), blake3 hex: two tasks
    /// with the same digest materialize to the same folder.
    pub fn digest_of(name: &str, spec: &str, files: &[CarriedFile]) -> String {
        let mut h = blake3::Hasher::new();
        let mut field = |bytes: &[u8]| {
            h.update(&(bytes.len() as u64).to_le_bytes());
            h.update(bytes);
        };
        field(b"assay carried task 1");
        field(name.as_bytes());
        field(spec.as_bytes());
        for f in files {
            field(f.path.as_bytes());
            field(f.blob.as_bytes());
            field(&f.size.to_le_bytes());
            field(&[u8::from(f.executable)]);
        }
        h.finalize().to_hex().to_string()
    }

    /// `absolute@1a2b3c4d5e6f`: the task and the start of its digest.
    pub fn describe(&self) -> String {
        format!(
            "{}@{}",
            self.name,
            &self.digest[..self.digest.len().min(12)]
        )
    }

    /// The blobs it names, each once.
    pub fn blob_names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self.files.iter().map(|f| f.blob.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        names
    }
}

impl CarriedPools {
    /// Reads a pools file to carry (bounded, as every named file is).
    pub fn read(path: &Path) -> Result<CarriedPools, CarryError> {
        let text =
            crate::support::input::read_to_string(path).map_err(|source| CarryError::Read {
                path: path.to_path_buf(),
                source,
            })?;
        Ok(CarriedPools { text })
    }

    /// The name a lane gives its copy: the digest of the text.
    pub fn file_name(&self) -> String {
        format!(
            "pools-{}.toml",
            &blake3::hash(self.text.as_bytes()).to_hex()[..32]
        )
    }
}

/// Packs the task `spec` was loaded from: the files it names and its
/// harness crate (what `task::is_harness_source` keeps, as the task's
/// digest reads it), as they are now.
pub fn pack_task(spec: &Spec) -> Result<Packed, CarryError> {
    let root = spec.dir.canonicalize().map_err(|source| CarryError::Read {
        path: spec.dir.clone(),
        source,
    })?;
    let mut packer = Packer {
        dir: &spec.dir,
        root,
        files: BTreeMap::new(),
        total: 0,
    };
    let spec_path = packer.file(&spec.path)?;
    for path in [
        Some(&spec.prompt_path),
        Some(&spec.cases.path),
        Some(&spec.committed.path),
        Some(&spec.draw.replay),
        spec.repair.template.path.as_ref(),
    ]
    .into_iter()
    .flatten()
    {
        packer.file(path)?;
    }
    packer.folder(&spec.harness.dir)?;
    let mut blobs = BTreeMap::new();
    let files: Vec<CarriedFile> = packer
        .files
        .into_iter()
        .map(|(path, (bytes, executable))| {
            let blob = blake3::hash(&bytes).to_hex().to_string();
            let file = CarriedFile {
                path,
                blob: blob.clone(),
                size: bytes.len() as u64,
                executable,
            };
            blobs.insert(blob, bytes);
            file
        })
        .collect();
    let digest = CarriedTask::digest_of(&spec.name, &spec_path, &files);
    Ok(Packed {
        task: CarriedTask {
            name: spec.name.clone(),
            spec: spec_path,
            files,
            digest,
        },
        blobs,
    })
}

/// Collects a task's files under their paths inside its folder.
struct Packer<'a> {
    /// The folder as the spec names it (the files' paths start with it).
    dir: &'a Path,
    /// The same folder, canonical: nothing outside it is packed.
    root: PathBuf,
    /// Path inside the folder to bytes and executable bit.
    files: BTreeMap<String, (Vec<u8>, bool)>,
    total: u64,
}

impl Packer<'_> {
    /// Packs one file; its path inside the folder.
    fn file(&mut self, path: &Path) -> Result<String, CarryError> {
        let rel = self.inside(path)?;
        if self.files.contains_key(&rel) {
            return Ok(rel);
        }
        let read = |source| CarryError::Read {
            path: path.to_path_buf(),
            source,
        };
        // Followed: a symlink to a file inside the folder is packed as
        // that file's bytes under the name the spec uses.
        let meta = std::fs::metadata(path).map_err(read)?;
        if meta.is_dir() {
            return Err(CarryError::LinkedFolder {
                path: path.to_path_buf(),
            });
        }
        if !meta.is_file() {
            return Err(CarryError::NotRegular {
                path: path.to_path_buf(),
            });
        }
        let too_large = || CarryError::TooLarge {
            path: path.to_path_buf(),
        };
        if self.total + meta.len() > MAX_TASK_BYTES {
            return Err(too_large());
        }
        let bytes = std::fs::read(path).map_err(read)?;
        // It may have grown since its size was read.
        self.total += bytes.len() as u64;
        if self.total > MAX_TASK_BYTES {
            return Err(too_large());
        }
        let executable = meta.permissions().mode() & 0o111 != 0;
        self.files.insert(rel.clone(), (bytes, executable));
        Ok(rel)
    }

    /// Packs a folder's files and folders, in name order.
    fn folder(&mut self, dir: &Path) -> Result<(), CarryError> {
        self.inside(dir)?;
        let read = |source| CarryError::Read {
            path: dir.to_path_buf(),
            source,
        };
        let mut entries = std::fs::read_dir(dir)
            .map_err(read)?
            .map(|e| e.map(|e| e.path()))
            .collect::<Result<Vec<PathBuf>, _>>()
            .map_err(read)?;
        entries.sort();
        for path in entries {
            let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
            if !is_harness_source(&name.unwrap_or_default()) {
                continue;
            }
            let own = std::fs::symlink_metadata(&path).map_err(|source| CarryError::Read {
                path: path.clone(),
                source,
            })?;
            if own.is_dir() {
                self.folder(&path)?;
            } else {
                // A symlink (to a file inside, else refused) or a file.
                self.file(&path)?;
            }
        }
        Ok(())
    }

    /// `path`'s place in the task's folder, `/`-separated: as named (no
    /// `..` leaving the folder) and as resolved (no symlink leading out).
    fn inside(&self, path: &Path) -> Result<String, CarryError> {
        let outside = || CarryError::Outside {
            path: path.to_path_buf(),
            root: self.root.clone(),
        };
        // The spec's own path is as the user typed it, maybe relative;
        // the folder and the paths in it are absolute.
        let absolute = std::path::absolute(path).map_err(|source| CarryError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let rel = absolute.strip_prefix(self.dir).map_err(|_| outside())?;
        let mut parts = Vec::new();
        for part in rel.components() {
            match part {
                Component::Normal(p) => {
                    parts.push(p.to_str().ok_or_else(|| CarryError::NotUtf8 {
                        path: path.to_path_buf(),
                    })?)
                }
                Component::CurDir => {}
                Component::ParentDir | Component::RootDir | Component::Prefix(_) => {
                    return Err(outside())
                }
            }
        }
        let resolved = path.canonicalize().map_err(|source| CarryError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        if !resolved.starts_with(&self.root) {
            return Err(outside());
        }
        Ok(parts.join("/"))
    }
}

/// Writes a carried task into `dir` (created, with its parents), from
/// `blobs` (digest to bytes, as the store gave them): checks the set
/// against its digest, each file's path and each blob against its name
/// first, and writes nothing if any is wrong. Returns the spec's path
/// there.
pub fn write_task(
    task: &CarriedTask,
    blobs: &BTreeMap<String, Vec<u8>>,
    dir: &Path,
) -> Result<PathBuf, CarryError> {
    let found = CarriedTask::digest_of(&task.name, &task.spec, &task.files);
    if found != task.digest {
        return Err(CarryError::DigestMismatch {
            task: task.describe(),
            digest: task.digest.clone(),
            found,
        });
    }
    let mut checked = Vec::with_capacity(task.files.len());
    for f in &task.files {
        let rel = relative(task, &f.path)?;
        let bytes = blobs.get(&f.blob).ok_or_else(|| CarryError::MissingBlob {
            task: task.describe(),
            path: f.path.clone(),
            blob: f.blob.clone(),
        })?;
        if blake3::hash(bytes).to_hex().as_str() != f.blob || bytes.len() as u64 != f.size {
            return Err(CarryError::BlobMismatch {
                task: task.describe(),
                path: f.path.clone(),
                blob: f.blob.clone(),
            });
        }
        checked.push((rel, bytes, f.executable));
    }
    let spec = spec_in(task, dir)?;
    for (rel, bytes, executable) in checked {
        let path = dir.join(rel);
        let write = |source| CarryError::Write {
            path: path.clone(),
            source,
        };
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(write)?;
        }
        std::fs::write(&path, bytes).map_err(write)?;
        let mode = if executable { 0o755 } else { 0o644 };
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).map_err(write)?;
    }
    Ok(spec)
}

/// Where `task`'s spec is in a copy of it at `dir`; refused unless the
/// spec is one of its files.
pub fn spec_in(task: &CarriedTask, dir: &Path) -> Result<PathBuf, CarryError> {
    if !task.files.iter().any(|f| f.path == task.spec) {
        return Err(CarryError::BadPath {
            task: task.describe(),
            path: task.spec.clone(),
        });
    }
    Ok(dir.join(relative(task, &task.spec)?))
}

/// Whether `dir` holds exactly the bytes of `task`'s files (a lane's copy
/// made earlier, still as written).
pub fn holds_task(task: &CarriedTask, dir: &Path) -> bool {
    task.files.iter().all(|f| {
        relative(task, &f.path).is_ok_and(|rel| {
            std::fs::read(dir.join(rel))
                .is_ok_and(|bytes| blake3::hash(&bytes).to_hex().as_str() == f.blob)
        })
    })
}

/// A carried path as a relative path of normal parts only: an item read
/// from the store names nothing outside the folder it is written to.
fn relative(task: &CarriedTask, path: &str) -> Result<PathBuf, CarryError> {
    let rel = Path::new(path);
    if path.is_empty() || !rel.components().all(|c| matches!(c, Component::Normal(_))) {
        return Err(CarryError::BadPath {
            task: task.describe(),
            path: path.to_owned(),
        });
    }
    Ok(rel.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn copy_dir(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for entry in std::fs::read_dir(from).unwrap() {
            let entry = entry.unwrap();
            let dest = to.join(entry.file_name());
            if entry.file_type().unwrap().is_dir() {
                copy_dir(&entry.path(), &dest);
            } else {
                std::fs::copy(entry.path(), &dest).unwrap();
            }
        }
    }

    /// A copy of the tiny fixture task, with a script of its harness
    /// executable: the folder it is in (dropped last) and the task.
    fn tiny() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let task = dir.path().join("tiny");
        copy_dir(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tiny"),
            &task,
        );
        let script = task.join("harness/gen.sh");
        std::fs::write(&script, "#!/bin/sh\necho cases\n").unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o750)).unwrap();
        (dir, task)
    }

    fn pack(task: &Path) -> Result<Packed, CarryError> {
        pack_task(&Spec::load(task).unwrap())
    }

    #[test]
    fn a_task_packs_the_files_its_spec_names_and_its_harness() {
        let (_dir, task) = tiny();
        // Not named by the spec: stays behind.
        std::fs::write(task.join("notes.md"), "scratch").unwrap();
        std::fs::create_dir_all(task.join("harness/target/release")).unwrap();
        std::fs::write(task.join("harness/target/release/big"), "built").unwrap();
        let packed = pack(&task).unwrap();
        let paths: Vec<&str> = packed.task.files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "cases.jsonl",
                "committed.rs",
                "harness/Cargo.toml",
                "harness/gen.sh",
                "harness/src/lib.rs",
                "prompt.md",
                "replies.jsonl",
                "spec.toml"
            ]
        );
        assert_eq!(packed.task.spec, "spec.toml");
        assert_eq!(packed.task.name, "tiny");
        let executable: Vec<&str> = packed
            .task
            .files
            .iter()
            .filter(|f| f.executable)
            .map(|f| f.path.as_str())
            .collect();
        assert_eq!(executable, ["harness/gen.sh"]);
        assert_eq!(packed.blobs.len(), packed.task.blob_names().len());
        // A spec named from the current folder, as `assay run specs/x` does.
        let relative = pack_task(&Spec::load(Path::new("tests/fixtures/tiny")).unwrap()).unwrap();
        assert_eq!(relative.task.spec, "spec.toml");
        assert_eq!(relative.task.files.len(), paths.len() - 1, "no gen.sh");
    }

    /// The digest is the content's: the same files give the same digest
    /// wherever the folder is, and any change to a file, its name or its
    /// executable bit gives another.
    #[test]
    fn the_digest_follows_the_content_and_nothing_else() {
        let (_a, one) = tiny();
        let (_b, two) = tiny();
        let digest = pack(&one).unwrap().task.digest;
        assert_eq!(digest.len(), 64, "{digest}");
        assert_eq!(pack(&two).unwrap().task.digest, digest, "another folder");
        std::fs::write(two.join("cases.jsonl"), "{}\n").unwrap();
        let edited = pack(&two).unwrap().task;
        assert_ne!(edited.digest, digest, "an edited file");
        let files = &edited.files;
        let mut flipped = files.clone();
        flipped[0].executable = !flipped[0].executable;
        let mut renamed = files.clone();
        renamed[0].path = "cases2.jsonl".into();
        let of = |f: &[CarriedFile]| CarriedTask::digest_of("tiny", "spec.toml", f);
        assert_eq!(of(files), edited.digest);
        assert_ne!(of(&flipped), edited.digest, "a mode bit");
        assert_ne!(of(&renamed), edited.digest, "a name");
        assert_ne!(
            CarriedTask::digest_of("tiny", "other.toml", files),
            edited.digest
        );
    }

    /// Written elsewhere, a packed task loads as a spec, packs to the same
    /// digest, and keeps its executable bits.
    #[test]
    fn a_written_task_is_the_task_that_was_packed() {
        let (_dir, task) = tiny();
        let packed = pack(&task).unwrap();
        std::fs::remove_dir_all(&task).unwrap();
        let lane = tempfile::tempdir().unwrap();
        let into = lane.path().join("copy");
        let spec = write_task(&packed.task, &packed.blobs, &into).unwrap();
        assert_eq!(spec, into.join("spec.toml"));
        assert!(holds_task(&packed.task, &into));
        let again = pack(&into).unwrap();
        assert_eq!(again.task, packed.task);
        let mode = std::fs::metadata(into.join("harness/gen.sh"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o755);
        let mode = std::fs::metadata(into.join("cases.jsonl"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o644);
        // A copy changed since is no longer the task.
        std::fs::write(into.join("committed.rs"), "// changed").unwrap();
        assert!(!holds_task(&packed.task, &into));
    }

    /// A blob or a list that is not what the item's digest says is refused
    /// before anything is written, and so is a path leaving the folder,
    /// even in an item whose digest was made to match it.
    #[test]
    fn a_task_that_does_not_match_its_digest_is_refused_and_nothing_written() {
        let (_dir, task) = tiny();
        let packed = pack(&task).unwrap();
        let lane = tempfile::tempdir().unwrap();
        let into = lane.path().join("copy");
        let cases = packed.task.files[0].blob.clone();

        let mut bad_blob = packed.blobs.clone();
        bad_blob.insert(cases.clone(), b"{}\n".to_vec());
        let e = write_task(&packed.task, &bad_blob, &into).unwrap_err();
        assert!(matches!(e, CarryError::BlobMismatch { .. }), "{e}");
        assert!(e.to_string().contains("cases.jsonl"), "{e}");

        let mut missing = packed.blobs.clone();
        missing.remove(&cases);
        let e = write_task(&packed.task, &missing, &into).unwrap_err();
        assert!(matches!(e, CarryError::MissingBlob { .. }), "{e}");

        let mut listed = packed.task.clone();
        listed.files.pop();
        let e = write_task(&listed, &packed.blobs, &into).unwrap_err();
        assert!(matches!(e, CarryError::DigestMismatch { .. }), "{e}");
        assert!(e.to_string().starts_with("queued task tiny@"), "{e}");

        for path in ["../escape.rs", "/etc/passwd", "", "a/../../b"] {
            let mut escaping = packed.task.clone();
            escaping.files[1].path = path.into();
            escaping.digest =
                CarriedTask::digest_of(&escaping.name, &escaping.spec, &escaping.files);
            let e = write_task(&escaping, &packed.blobs, &into).unwrap_err();
            assert!(matches!(e, CarryError::BadPath { .. }), "{path}: {e}");
        }
        assert!(!into.exists(), "nothing was written");
        assert!(!lane.path().join("escape.rs").exists());
    }

    /// Only regular files and folders inside the task's folder are packed:
    /// a symlink leading out, a symlinked folder, a spec path climbing out
    /// and a pipe are each refused naming the file.
    #[test]
    fn what_is_not_a_file_inside_the_folder_is_refused_naming_it() {
        let (dir, task) = tiny();
        let outside = dir.path().join("secret.txt");
        std::fs::write(&outside, "not the task's").unwrap();
        // A symlink to a file inside is that file.
        std::os::unix::fs::symlink(task.join("prompt.md"), task.join("harness/src/prompt.md"))
            .unwrap();
        let packed = pack(&task).unwrap();
        let linked = packed
            .task
            .files
            .iter()
            .find(|f| f.path == "harness/src/prompt.md");
        assert_eq!(
            linked.map(|f| &f.blob),
            packed
                .task
                .files
                .iter()
                .find(|f| f.path == "prompt.md")
                .map(|f| &f.blob)
        );
        std::fs::remove_file(task.join("harness/src/prompt.md")).unwrap();

        /// Plants something bad in a task: the path the error must name.
        type Plant = dyn Fn(&Path) -> PathBuf;
        let cases: [(&str, &Plant); 4] = [
            ("outside", &|task| {
                let link = task.join("harness/src/leak.rs");
                std::os::unix::fs::symlink(task.join("../secret.txt"), &link).unwrap();
                link
            }),
            ("a symlink to a folder", &|task| {
                let link = task.join("harness/more");
                std::os::unix::fs::symlink(task.join("harness/src"), &link).unwrap();
                link
            }),
            ("not a regular file", &|task| {
                let fifo = task.join("harness/pipe");
                rustix::fs::mknodat(
                    rustix::fs::CWD,
                    &fifo,
                    rustix::fs::FileType::Fifo,
                    rustix::fs::Mode::from_raw_mode(0o600),
                    0,
                )
                .unwrap();
                fifo
            }),
            ("outside", &|task| {
                let spec = std::fs::read_to_string(task.join("spec.toml")).unwrap();
                let spec = spec.replace("prompt = \"prompt.md\"", "prompt = \"../secret.txt\"");
                std::fs::write(task.join("spec.toml"), spec).unwrap();
                task.join("../secret.txt")
            }),
        ];
        for (want, plant) in cases {
            let (_dir, task) = tiny();
            std::fs::write(task.join("../secret.txt"), "not the task's").unwrap();
            let bad = plant(&task);
            let e = pack(&task).unwrap_err();
            let e = e.to_string();
            assert!(e.contains(want), "{want}: {e}");
            assert!(e.starts_with(&bad.display().to_string()), "{e}");
            assert_eq!(e.lines().count(), 1, "{e}");
        }
    }

    #[test]
    fn a_task_past_the_bound_is_refused_naming_the_file() {
        let (_dir, task) = tiny();
        let big = task.join("harness/src/data.bin");
        // Sparse: its size is read, not its bytes.
        std::fs::File::create(&big)
            .unwrap()
            .set_len(MAX_TASK_BYTES)
            .unwrap();
        let e = pack(&task).unwrap_err();
        assert!(matches!(e, CarryError::TooLarge { .. }), "{e}");
        assert_eq!(
            e.to_string(),
            format!(
                "{}: the task's files pass 32 MiB with this one: a queued task travels in the store, so it must stay under that",
                big.display()
            )
        );
    }
}
