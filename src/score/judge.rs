//! The judge: the one process that holds the expected answers. It links the
//! task's harness and no candidate (`judge_main.rs`), so nothing a candidate
//! does can read the oracle or bend the comparison; a candidate's run only
//! ever sees inputs, and hands back outputs.

use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use tokio::io::AsyncReadExt;

use super::child::feed_stdin;

/// How long the judge may take over one run's outputs before it counts as
/// broken (it is the harness's code, not a candidate's: a host error).
const JUDGE_TIMEOUT: Duration = Duration::from_secs(120);

/// A task's oracle as a batch's runs use it.
#[derive(Debug, Clone)]
pub struct Oracle {
    judge: Arc<Path>,
    cases_text: Arc<str>,
    /// Each case's encoded input, one a line: all a candidate's run gets.
    inputs: Arc<str>,
    total: usize,
}

impl Oracle {
    /// Asks the judge at `judge` for the inputs of `cases_text`; fails if it
    /// gives other than `total` of them.
    pub async fn new(judge: &Path, cases_text: Arc<str>, total: usize) -> Result<Oracle> {
        let inputs = run_judge(judge, "inputs", cases_text.as_bytes().to_vec()).await?;
        let got = inputs.lines().count();
        if got != total {
            bail!("the judge gave {got} inputs for {total} cases");
        }
        Ok(Oracle {
            judge: judge.into(),
            cases_text,
            inputs: inputs.into(),
            total,
        })
    }

    pub fn total(&self) -> usize {
        self.total
    }

    pub fn judge_exe(&self) -> &Path {
        &self.judge
    }

    /// The inputs of cases `first..`, one a line.
    pub(crate) fn inputs(&self) -> &str {
        &self.inputs
    }

    /// Judges each `(case, output)`; true where the harness accepts it.
    pub(crate) async fn judge(&self, outputs: &[(usize, &str)]) -> Result<Vec<bool>> {
        if outputs.is_empty() {
            return Ok(Vec::new());
        }
        let mut stdin = format!("{}\n{}", self.cases_text.len(), self.cases_text).into_bytes();
        for (i, out) in outputs {
            stdin.extend_from_slice(format!("{i} {out}\n").as_bytes());
        }
        let answer = run_judge(&self.judge, "compare", stdin).await?;
        let mut verdicts = vec![false; outputs.len()];
        let mut lines = answer.lines();
        for (slot, (i, _)) in verdicts.iter_mut().zip(outputs) {
            let line = lines.next().context("the judge answered too few cases")?;
            match line.split_once(' ') {
                Some((j, letter)) if j.parse() == Ok(*i) => *slot = letter == "p",
                _ => bail!("the judge answered `{line}` for case {i}"),
            }
        }
        Ok(verdicts)
    }
}

async fn run_judge(judge: &Path, mode: &str, stdin: Vec<u8>) -> Result<String> {
    let (ours, theirs) =
        std::os::unix::net::UnixStream::pair().context("cannot make the judge's input channel")?;
    let mut child = tokio::process::Command::new(judge)
        .arg(mode)
        .env_clear()
        .current_dir("/")
        .stdin(Stdio::from(std::os::fd::OwnedFd::from(theirs)))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("cannot start the judge {}", judge.display()))?;
    let writer = feed_stdin(ours, stdin);
    let mut stdout = child.stdout.take().expect("piped stdout");
    let mut stderr = child.stderr.take().expect("piped stderr");
    let run = async {
        let mut out = String::new();
        let mut err = String::new();
        let (a, b) = tokio::join!(
            stdout.read_to_string(&mut out),
            stderr.read_to_string(&mut err)
        );
        a.context("cannot read the judge's answer")?;
        let _ = b;
        let status = child.wait().await.context("the judge did not finish")?;
        anyhow::Ok((status, out, err))
    };
    let (status, out, err) = tokio::time::timeout(JUDGE_TIMEOUT, run)
        .await
        .context("the judge ran past its time limit")??;
    writer.finish();
    if !status.success() {
        bail!("the judge ({mode}) failed ({status}): {}", err.trim());
    }
    Ok(out)
}
