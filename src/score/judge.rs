//! The judge: the one process that holds the expected answers. It links the
//! task's harness and no candidate (`judge_main.rs`), so nothing a candidate
//! does can read the oracle or bend the comparison; a candidate's run only
//! ever sees inputs, and hands back outputs.
//!
//! The judge is confined like every child that runs compiled code: it links
//! no candidate, but it parses what a candidate's run printed with harness
//! code. For the same reason a judge that fails over one run's outputs
//! (crashes, runs out of time or memory, answers garbage) costs only that
//! run's candidate, which gets `judge_failed`; the batch goes on. A panic
//! of the harness's `judge` on a case is caught in the judge and reported
//! as such: a harness fault ([`super::fault`]), since no candidate's code
//! runs in this process; never a wrong answer.

use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use tokio::io::AsyncReadExt;

use super::child::{feed_stdin, keep_stderr};
use crate::sandbox::scratch::{Kind, ScratchDir};
use crate::sandbox::Sandbox;

/// How long the judge may take over one run's outputs.
const JUDGE_TIMEOUT: Duration = Duration::from_secs(120);

/// The least memory the judge gets, whatever the runs' limit: it holds the
/// whole cases file, parsed, beside one run's outputs.
const JUDGE_MIN_MEMORY: u64 = 1 << 30;

/// What the judge keeps of its stderr for a failure's message.
const JUDGE_STDERR_CAP: usize = 4096;

/// A task's oracle as a batch's runs use it.
#[derive(Debug, Clone)]
pub struct Oracle {
    /// The judge, where the sandbox's run user can execute it.
    judge: Arc<Path>,
    sandbox: Arc<Sandbox>,
    memory_bytes: u64,
    cases_text: Arc<str>,
    /// Each case's encoded input, one a line: all a candidate's run gets.
    inputs: Arc<str>,
    total: usize,
}

/// The judge's word on one run's outputs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Judged {
    /// Per output, what the harness's `judge` said of it.
    Verdicts(Vec<Judgement>),
    /// The judge failed over these outputs; why, in one line.
    Failed(String),
}

impl Oracle {
    /// Asks the judge at `judge` for the inputs of `cases_text`, confined by
    /// `sandbox` with at least `memory_bytes`; fails if it gives other than
    /// `total` of them (no candidate is involved yet: the task is broken).
    pub async fn new(
        judge: &Path,
        cases_text: Arc<str>,
        total: usize,
        sandbox: Arc<Sandbox>,
        memory_bytes: u64,
    ) -> Result<Oracle> {
        let judge: Arc<Path> = sandbox.runnable_exe(judge)?.into();
        let memory_bytes = memory_bytes.max(JUDGE_MIN_MEMORY);
        let stdin = cases_text.as_bytes().to_vec();
        let inputs = match run_judge(&judge, "inputs", stdin, &sandbox, memory_bytes).await? {
            Ok(inputs) => inputs,
            Err(why) => bail!("the judge cannot give the cases' inputs: {why}"),
        };
        let got = inputs.lines().count();
        if got != total {
            bail!("the judge gave {got} inputs for {total} cases");
        }
        Ok(Oracle {
            judge,
            sandbox,
            memory_bytes,
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

    /// Judges each `(case, output)`. An error is the host's (the judge
    /// could not be started); a judge that ran and failed is [`Judged::Failed`].
    pub(crate) async fn judge(&self, outputs: &[(usize, &str)]) -> Result<Judged> {
        if outputs.is_empty() {
            return Ok(Judged::Verdicts(Vec::new()));
        }
        let mut stdin = format!("{}\n{}", self.cases_text.len(), self.cases_text).into_bytes();
        for (i, out) in outputs {
            stdin.extend_from_slice(format!("{i} {out}\n").as_bytes());
        }
        let answer = run_judge(
            &self.judge,
            "compare",
            stdin,
            &self.sandbox,
            self.memory_bytes,
        )
        .await?;
        Ok(match answer {
            Ok(answer) => read_answer(&answer, outputs),
            Err(why) => Judged::Failed(why),
        })
    }
}

/// What the harness's `judge` said of one output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Judgement {
    Right,
    Wrong,
    /// It panicked; the panic, on one line.
    Panicked(String),
}

/// Reads the judge's `I p` / `I f` / `I h PANIC` lines, one per output in
/// order.
fn read_answer(answer: &str, outputs: &[(usize, &str)]) -> Judged {
    let mut lines = answer.lines();
    let mut verdicts = Vec::with_capacity(outputs.len());
    for (i, _) in outputs {
        let Some(line) = lines.next() else {
            return Judged::Failed(format!("the judge answered too few cases (none for {i})"));
        };
        let mut words = line.splitn(3, ' ');
        let (j, letter, rest) = (words.next(), words.next(), words.next());
        let ours = j.is_some_and(|j| j.parse() == Ok(*i));
        match (letter, rest) {
            (Some("p"), None) if ours => verdicts.push(Judgement::Right),
            (Some("f"), None) if ours => verdicts.push(Judgement::Wrong),
            (Some("h"), panic) if ours => {
                verdicts.push(Judgement::Panicked(panic.unwrap_or_default().to_owned()))
            }
            _ => {
                let line: String = line.chars().take(80).collect();
                return Judged::Failed(format!("the judge answered `{line}` for case {i}"));
            }
        }
    }
    Judged::Verdicts(verdicts)
}

/// Runs the judge in `mode` over `stdin`, confined as a scoring run is.
/// `Ok(Err(why))` when it ran and failed, timed out or was killed.
async fn run_judge(
    judge: &Path,
    mode: &str,
    stdin: Vec<u8>,
    sandbox: &Sandbox,
    memory_bytes: u64,
) -> Result<std::result::Result<String, String>> {
    let workdir =
        ScratchDir::new(Kind::Run).context("cannot create the judge's working directory")?;
    let mut confinement = sandbox.prepare_run(judge, workdir.path(), memory_bytes)?;
    let (ours, theirs) =
        std::os::unix::net::UnixStream::pair().context("cannot make the judge's input channel")?;
    let mut cmd = tokio::process::Command::new(judge);
    cmd.arg(mode)
        .env_clear()
        .current_dir(workdir.path())
        .stdin(Stdio::from(std::os::fd::OwnedFd::from(theirs)))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    confinement.confine(&mut cmd);
    let mut child = cmd
        .spawn()
        .with_context(|| format!("cannot start the judge {}", judge.display()))?;
    confinement.spawned();
    // The answer is far smaller than what the judge reads; more than this
    // is a runaway judge, not an answer.
    let cap = 16 * stdin.len() as u64 + (1 << 20);
    let writer = feed_stdin(ours, stdin);
    let stdout = child.stdout.take().expect("piped stdout");
    let stderr = tokio::spawn(keep_stderr(
        child.stderr.take().expect("piped stderr"),
        JUDGE_STDERR_CAP,
    ));
    let run = async {
        let mut out = Vec::new();
        let read = stdout.take(cap + 1).read_to_end(&mut out).await;
        if out.len() as u64 > cap {
            let _ = child.start_kill();
        }
        (read.map(|_| out), child.wait().await)
    };
    let ended = tokio::time::timeout(JUDGE_TIMEOUT, run).await;
    writer.finish();
    confinement.kill_all();
    let oom_killed = confinement.oom_killed();
    // Removing the cgroup may wait for the kernel to reap: not on the runtime.
    let _ = tokio::task::spawn_blocking(move || drop(confinement)).await;
    // A process the judge left holding stderr (without a cgroup to kill
    // it) must not hold the batch.
    let err = match tokio::time::timeout(Duration::from_secs(2), stderr).await {
        Ok(Ok(err)) => err,
        _ => String::new(),
    };
    let Ok((out, status)) = ended else {
        return Ok(Err(format!(
            "the judge ({mode}) ran past its {} s limit",
            JUDGE_TIMEOUT.as_secs()
        )));
    };
    let out = match out {
        Ok(out) if out.len() as u64 > cap => {
            return Ok(Err(format!(
                "the judge ({mode}) printed more than {cap} bytes"
            )))
        }
        Ok(out) => String::from_utf8(out).map_err(|_| "not UTF-8"),
        Err(_) => Err("unreadable"),
    };
    let status = status.context("the judge did not finish")?;
    Ok(match (status.success(), out) {
        (true, Ok(out)) => Ok(out),
        (true, Err(e)) => Err(format!("the judge's ({mode}) answer is {e}")),
        (false, _) => Err(failure(mode, status, oom_killed, &err)),
    })
}

/// One line on how the judge ended, with the end of its stderr.
fn failure(mode: &str, status: ExitStatus, oom_killed: bool, stderr: &str) -> String {
    use std::os::unix::process::ExitStatusExt as _;
    let how = match (status.code(), status.signal()) {
        _ if oom_killed => "ran out of memory".to_owned(),
        (Some(code), _) => format!("exited with {code}"),
        (None, Some(signal)) => format!("was killed by signal {signal}"),
        (None, None) => status.to_string(),
    };
    let said = stderr.split_whitespace().collect::<Vec<_>>().join(" ");
    if said.is_empty() {
        format!("the judge ({mode}) {how}")
    } else {
        format!("the judge ({mode}) {how}: {said}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_in_order_gives_each_outputs_verdict() {
        let outputs = [(0, "a"), (3, "b")];
        assert_eq!(
            read_answer("0 p\n3 f\n", &outputs),
            Judged::Verdicts(vec![Judgement::Right, Judgement::Wrong])
        );
        assert_eq!(
            read_answer("0 h panicked at h.rs:1:2: no\n3 p\n", &outputs),
            Judged::Verdicts(vec![
                Judgement::Panicked("panicked at h.rs:1:2: no".into()),
                Judgement::Right
            ])
        );
    }

    #[test]
    fn a_short_or_garbled_answer_is_the_judges_failure() {
        let outputs = [(0, "a"), (3, "b")];
        assert!(matches!(read_answer("0 p\n", &outputs), Judged::Failed(_)));
        assert!(matches!(
            read_answer("0 p\n4 p\n", &outputs),
            Judged::Failed(_)
        ));
        assert!(matches!(
            read_answer("0 p\n3 yes\n", &outputs),
            Judged::Failed(_)
        ));
        assert!(matches!(
            read_answer("0 p\n3 f extra\n", &outputs),
            Judged::Failed(_)
        ));
    }
}
