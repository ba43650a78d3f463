//! Hints: the command lines assay prints for the user to type next
//! (`finish it with ...`, `next: ...`, `see ...`). One renderer, so every
//! printed command names the flags that reach the same data (`--db`,
//! `--out`) and quotes each word as a POSIX shell reads it: a hint that
//! opens another database, or splits a path at its space, sends the user
//! somewhere else. Pure, no IO.

use std::ffi::OsStr;
use std::fmt;
use std::path::{Path, PathBuf};

/// The database every command opens when neither `--db` nor `ASSAY_DB`
/// names one.
pub const DEFAULT_DB: &str = "assay.db";

/// The flags that lead a later command to the data this one used: the
/// store as the user named it, and the output folder when one was given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reach {
    /// `--db` as given (flag or `ASSAY_DB`); `None` for the default, which
    /// the next command opens by itself.
    db: Option<String>,
    out: Option<PathBuf>,
}

impl Reach {
    /// `db` is the `--db` value as given (a path or URL; never one with a
    /// password, which `Db` refuses), `out` the `--out` value, if any.
    pub fn new(db: &str, out: Option<&Path>) -> Reach {
        Reach {
            db: (db != DEFAULT_DB).then(|| db.to_owned()),
            out: out.map(Path::to_path_buf),
        }
    }

    /// The store only: for commands whose data is all in the database.
    pub fn db(db: &str) -> Reach {
        Reach::new(db, None)
    }
}

/// A command line for the user: `assay` and its words, each shell-quoted
/// when shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandLine {
    words: Vec<String>,
}

impl CommandLine {
    /// `assay` followed by `words` (a subcommand and its arguments).
    pub fn assay<I, S>(words: I) -> CommandLine
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        CommandLine {
            words: std::iter::once("assay".to_owned())
                .chain(words.into_iter().map(|w| lossy(w.as_ref())))
                .collect(),
        }
    }

    /// One more word (a flag, a value, a path).
    pub fn arg(mut self, word: impl AsRef<OsStr>) -> CommandLine {
        self.words.push(lossy(word.as_ref()));
        self
    }

    /// The flags that reach the same data, at the end.
    pub fn reaching(mut self, reach: &Reach) -> CommandLine {
        if let Some(db) = &reach.db {
            self.words.extend(["--db".to_owned(), db.clone()]);
        }
        if let Some(out) = &reach.out {
            self.words
                .extend(["--out".to_owned(), lossy(out.as_os_str())]);
        }
        self
    }

    /// The words as a program would receive them (what a shell makes of
    /// the rendered line).
    pub fn words(&self) -> &[String] {
        &self.words
    }
}

fn lossy(word: &OsStr) -> String {
    word.to_string_lossy().into_owned()
}

impl fmt::Display for CommandLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, word) in self.words.iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            // Only a NUL cannot be quoted, and no argument can hold one.
            match shlex::try_quote(word) {
                Ok(quoted) => f.write_str(&quoted)?,
                Err(_) => f.write_str(&word.replace('\0', ""))?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_command_is_shown_as_typed() {
        let c = CommandLine::assay(["run", "--resume", "3"]);
        assert_eq!(c.to_string(), "assay run --resume 3");
    }

    #[test]
    fn the_default_database_is_not_named_and_any_other_is() {
        let resume = || CommandLine::assay(["run", "--resume", "1"]);
        assert_eq!(
            resume().reaching(&Reach::db(DEFAULT_DB)).to_string(),
            "assay run --resume 1"
        );
        assert_eq!(
            resume().reaching(&Reach::db("r2.db")).to_string(),
            "assay run --resume 1 --db r2.db"
        );
        assert_eq!(
            resume()
                .reaching(&Reach::new("r2.db", Some(Path::new("out"))))
                .to_string(),
            "assay run --resume 1 --db r2.db --out out"
        );
    }

    /// Each word comes back whole from a real POSIX shell's reading of
    /// the line, whatever it holds.
    #[test]
    fn every_word_survives_the_shell() {
        let words = [
            "weird dir/x",
            "it's",
            "a\"b",
            "$HOME",
            "`x`",
            "a;b",
            "*",
            "~",
            "~/x",
            "new\nline",
            "",
            "-n",
            "ünï",
            "!x",
            "a=b",
            "postgres://assay@127.0.0.1:5432/runs?sslmode=disable",
        ];
        let c = CommandLine::assay(["task", "check"]);
        let c = words.iter().fold(c, |c, w| c.arg(w));
        let line = c.to_string();
        // `set --` makes the rendered words the shell's arguments, as a
        // user pasting the line would get them.
        let script = format!("set -- {}; printf '%s\\0' \"$@\"", &line["assay ".len()..]);
        let out = std::process::Command::new("/bin/sh")
            .args(["-c", &script])
            .env("HOME", "/nowhere")
            .output()
            .unwrap();
        assert!(out.status.success(), "{line}");
        let read: Vec<String> = String::from_utf8(out.stdout)
            .unwrap()
            .split_terminator('\0')
            .map(str::to_owned)
            .collect();
        assert_eq!(read, &c.words()[1..], "{line}");
        let line = CommandLine::assay(["task", "check", "weird dir/x"]).to_string();
        assert_eq!(line, "assay task check 'weird dir/x'");
    }
}
