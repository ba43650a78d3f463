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

use std::os::unix::process::ExitStatusExt as _;
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use tokio::io::AsyncReadExt;

use super::child::{nonce, send_all};
use crate::sandbox::scratch::{Kind, ScratchDir};
use crate::sandbox::{RunConfinement, Sandbox};

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
    /// The batch's judge, serving one run's outputs at a time; `None` once
    /// it was lost (killed, timed out, or ended), until the next run starts
    /// another.
    server: Arc<tokio::sync::Mutex<Option<Server>>>,
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
    /// Starts the judge at `judge` over `cases_text`, confined by `sandbox`
    /// with at least `memory_bytes`, and takes the cases' inputs from it;
    /// fails if it gives other than `total` of them (no candidate is
    /// involved yet: the task is broken).
    pub async fn new(
        judge: &Path,
        cases_text: Arc<str>,
        total: usize,
        sandbox: Arc<Sandbox>,
        memory_bytes: u64,
    ) -> Result<Oracle> {
        let judge: Arc<Path> = sandbox.runnable_exe(judge)?.into();
        let memory_bytes = memory_bytes.max(JUDGE_MIN_MEMORY);
        let (server, inputs) = Server::start(&judge, &cases_text, &sandbox, memory_bytes).await?;
        let inputs = match inputs {
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
            server: Arc::new(tokio::sync::Mutex::new(server)),
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

    /// Judges each `(case, output)`, in a child of the batch's judge forked
    /// for these outputs alone. An error is the host's (the judge could not
    /// be started); a judge that ran and failed is [`Judged::Failed`], and
    /// a judge lost over it (killed, past its time) is replaced for the
    /// next run.
    pub(crate) async fn judge(&self, outputs: &[(usize, &str)]) -> Result<Judged> {
        if outputs.is_empty() {
            return Ok(Judged::Verdicts(Vec::new()));
        }
        let nonce = nonce()?;
        let mut request = format!("{nonce} {}\n", outputs.len()).into_bytes();
        for (i, out) in outputs {
            // An output is one line (`protocol` splits on newlines).
            request.extend_from_slice(format!("{i} {out}\n").as_bytes());
        }
        let mut server = self.server.lock().await;
        if server.is_none() {
            let started = Server::start(
                &self.judge,
                &self.cases_text,
                &self.sandbox,
                self.memory_bytes,
            )
            .await?;
            match started {
                (started, Ok(_)) => *server = started,
                (_, Err(why)) => return Ok(Judged::Failed(why)),
            }
        }
        let running = server.as_mut().expect("started above");
        let answer = running.exchange("compare", &nonce, request).await?;
        if answer.lost || !running.alone() {
            // A judge that cannot be trusted to start the next run's
            // answer clean is not used again.
            if let Some(lost) = server.take() {
                lost.stop().await;
            }
        }
        Ok(match answer.said {
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

/// The batch's judge process, confined as a scoring run is, with the
/// cases loaded.
struct Server {
    child: tokio::process::Child,
    stdin: Arc<std::os::unix::net::UnixStream>,
    stdout: tokio::process::ChildStdout,
    stderr: tokio::process::ChildStderr,
    /// `None` once stopped.
    confinement: Option<RunConfinement>,
    /// Removed after the confinement has killed what ran in it.
    _workdir: ScratchDir,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("pid", &self.child.id())
            .finish()
    }
}

/// What the judge said to one request, and whether it is lost for the next.
struct Exchanged {
    /// Its answer, or why it failed, in one line.
    said: std::result::Result<String, String>,
    /// It ended, was killed, or ran past its limit.
    lost: bool,
}

/// How the judge's child (or the judge) ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ended {
    Code(i32),
    Signal(i32),
}

impl Server {
    /// Starts the judge over `cases_text`, and takes the cases' inputs from
    /// it. `Err` is the host's (cannot start it); the inputs are `Err(why)`
    /// when it ran and failed, and then no server is kept.
    async fn start(
        judge: &Path,
        cases_text: &str,
        sandbox: &Sandbox,
        memory_bytes: u64,
    ) -> Result<(Option<Server>, std::result::Result<String, String>)> {
        let workdir =
            ScratchDir::new(Kind::Run).context("cannot create the judge's working directory")?;
        let mut confinement = sandbox.prepare_run(judge, workdir.path(), memory_bytes)?;
        let (ours, theirs) = std::os::unix::net::UnixStream::pair()
            .context("cannot make the judge's input channel")?;
        let mut cmd = tokio::process::Command::new(judge);
        cmd.arg("serve")
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
        // The child's end of stdin closes here with `cmd`.
        drop(cmd);
        confinement.spawned();
        let mut server = Server {
            stdout: child.stdout.take().expect("piped stdout"),
            stderr: child.stderr.take().expect("piped stderr"),
            child,
            stdin: Arc::new(ours),
            confinement: Some(confinement),
            _workdir: workdir,
        };
        let nonce = nonce()?;
        let mut head = format!("{nonce} {}\n", cases_text.len()).into_bytes();
        head.extend_from_slice(cases_text.as_bytes());
        let answer = server.exchange("inputs", &nonce, head).await?;
        if answer.lost || answer.said.is_err() {
            server.stop().await;
            return Ok((None, answer.said));
        }
        Ok((Some(server), answer.said))
    }

    /// Sends `request` (tagged `nonce`) and reads the answer up to the
    /// judge's end line for it, with its stderr up to its end mark, within
    /// [`JUDGE_TIMEOUT`].
    async fn exchange(&mut self, mode: &str, nonce: &str, request: Vec<u8>) -> Result<Exchanged> {
        let oom_before = self.oom_kills();
        // The answer is far smaller than what the judge reads; more than
        // this is a runaway judge, not an answer.
        let cap = 16 * request.len() + (1 << 20);
        let stdin = self.stdin.clone();
        let writer = tokio::task::spawn_blocking(move || send_all(&stdin, &request));
        let out_mark = format!("\n{nonce} end ");
        let err_mark = format!("\n{nonce} end");
        let reading = async {
            tokio::join!(
                read_to_mark(&mut self.stdout, &out_mark, cap, true),
                read_to_mark(&mut self.stderr, &err_mark, JUDGE_STDERR_CAP, false)
            )
        };
        let read = tokio::time::timeout(JUDGE_TIMEOUT, reading).await;
        let Ok((out, err)) = read else {
            self.kill();
            let _ = writer.await;
            return Ok(Exchanged {
                said: Err(format!(
                    "the judge ({mode}) ran past its {} s limit",
                    JUDGE_TIMEOUT.as_secs()
                )),
                lost: true,
            });
        };
        let err = String::from_utf8_lossy(&err.text).into_owned();
        let oom_killed = self.oom_kills() > oom_before;
        let said = match out.end {
            // The child ended (the judge answers for it once it has).
            Some(Ok(line)) => {
                let ended = parse_ended(&line);
                match (ended, String::from_utf8(out.text)) {
                    (Some(Ended::Code(0)), Ok(answer)) if !oom_killed => {
                        let _ = writer.await;
                        return Ok(Exchanged {
                            said: Ok(answer),
                            lost: false,
                        });
                    }
                    (Some(Ended::Code(0)), Err(_)) if !oom_killed => {
                        Err(format!("the judge's ({mode}) answer is not UTF-8"))
                    }
                    (Some(ended), _) => Err(failure(mode, ended, oom_killed, &err)),
                    (None, _) => {
                        let line: String = line.chars().take(80).collect();
                        self.kill();
                        let _ = writer.await;
                        return Ok(Exchanged {
                            said: Err(format!("the judge ({mode}) ended `{line}`")),
                            lost: true,
                        });
                    }
                }
            }
            Some(Err(())) => {
                self.kill();
                let _ = writer.await;
                return Ok(Exchanged {
                    said: Err(format!("the judge ({mode}) printed more than {cap} bytes")),
                    lost: true,
                });
            }
            // The judge itself ended.
            None => {
                self.kill();
                let status = self
                    .child
                    .wait()
                    .await
                    .context("the judge did not finish")?;
                let ended = match (status.code(), status.signal()) {
                    (Some(code), _) => Ended::Code(code),
                    (None, Some(signal)) => Ended::Signal(signal),
                    (None, None) => Ended::Code(-1),
                };
                let oom_killed = oom_killed || self.oom_kills() > oom_before;
                let _ = writer.await;
                return Ok(Exchanged {
                    said: Err(failure(mode, ended, oom_killed, &err)),
                    lost: true,
                });
            }
        };
        let _ = writer.await;
        Ok(Exchanged { said, lost: false })
    }

    /// Whether the judge is the only process left in its cgroup, so that
    /// nothing a request's child started can write into the next answer.
    /// Without a pids cgroup, what the child forked is not counted.
    fn alone(&self) -> bool {
        self.confinement
            .as_ref()
            .and_then(|c| c.processes())
            .is_none_or(|n| n <= 1)
    }

    fn oom_kills(&self) -> u64 {
        self.confinement.as_ref().map_or(0, |c| c.oom_kills())
    }

    /// Kills the judge and everything in its cgroup.
    fn kill(&mut self) {
        let _ = self.child.start_kill();
        if let Some(confinement) = &self.confinement {
            confinement.kill_all();
        }
    }

    /// Kills the judge and removes its cgroup, off the runtime's threads.
    async fn stop(mut self) {
        self.kill();
        let confinement = self.confinement.take();
        // Removing the cgroup may wait for the kernel to reap.
        let _ = tokio::task::spawn_blocking(move || drop(confinement)).await;
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // Kills it, then (the confinement's drop) everything in its cgroup,
        // and removes the cgroup; the working directory goes after.
        let _ = self.child.start_kill();
        drop(self.confinement.take());
    }
}

/// What one stream held up to a request's end mark.
struct ReadToMark {
    /// What came before the mark (its first `cap` bytes, unless strict).
    text: Vec<u8>,
    /// The rest of the mark's line: `None` when the stream ended first,
    /// `Some(Err(()))` when a strict read met more than its cap first.
    end: Option<std::result::Result<String, ()>>,
}

/// Reads `stream` up to `mark` and the end of its line. Past `cap` bytes,
/// a `strict` read gives up; any other keeps the first `cap` bytes and
/// reads on for the mark.
async fn read_to_mark(
    stream: &mut (impl tokio::io::AsyncRead + Unpin),
    mark: &str,
    cap: usize,
    strict: bool,
) -> ReadToMark {
    let mark = mark.as_bytes();
    // Bytes kept past `cap` before any is dropped: a mark that began
    // before the cap is never cut.
    let margin = mark.len() + 64;
    let mut data: Vec<u8> = Vec::new();
    // Where the mark may still begin.
    let mut from = 0;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match find(&data[from..], mark).map(|at| at + from) {
            Some(at) if strict && at > cap => {
                return ReadToMark {
                    text: data,
                    end: Some(Err(())),
                }
            }
            Some(at) => {
                let rest = &data[at + mark.len()..];
                if let Some(nl) = rest.iter().position(|b| *b == b'\n') {
                    let line = String::from_utf8_lossy(&rest[..nl]).into_owned();
                    data.truncate(if strict { at } else { at.min(cap) });
                    return ReadToMark {
                        text: data,
                        end: Some(Ok(line)),
                    };
                }
                from = at;
            }
            None => from = data.len().saturating_sub(mark.len() - 1),
        }
        if data.len() > cap + 2 * margin {
            if strict {
                return ReadToMark {
                    text: data,
                    end: Some(Err(())),
                };
            }
            // Bytes searched already, short of a mark found.
            let end = (data.len() - margin).min(from);
            if end > cap + margin {
                from -= end - (cap + margin);
                data.drain(cap + margin..end);
            }
        }
        let n = stream.read(&mut buf).await.unwrap_or(0);
        if n == 0 {
            if !strict {
                data.truncate(cap);
            }
            return ReadToMark {
                text: data,
                end: None,
            };
        }
        data.extend_from_slice(&buf[..n]);
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// `exit CODE` or `signal SIGNAL`, as the judge reports its child's end.
fn parse_ended(line: &str) -> Option<Ended> {
    match line.split_once(' ')? {
        ("exit", code) => code.parse().ok().map(Ended::Code),
        ("signal", signal) => signal.parse().ok().map(Ended::Signal),
        _ => None,
    }
}

/// One line on how the judge ended, with the end of its stderr.
fn failure(mode: &str, ended: Ended, oom_killed: bool, stderr: &str) -> String {
    let how = match ended {
        _ if oom_killed => "ran out of memory".to_owned(),
        Ended::Code(code) => format!("exited with {code}"),
        Ended::Signal(signal) => format!("was killed by signal {signal}"),
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

    /// Reads what `chunks` stream up to `mark`, as the judge's reader does.
    fn read(
        chunks: &[&[u8]],
        mark: &str,
        cap: usize,
        strict: bool,
    ) -> (Vec<u8>, Option<Result<String, ()>>) {
        let mut stream = std::io::Cursor::new(chunks.concat());
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let read = rt.block_on(read_to_mark(&mut stream, mark, cap, strict));
        (read.text, read.end)
    }

    #[test]
    fn an_answer_ends_at_its_own_mark() {
        let (text, end) = read(&[b"0 p\n3 f\n\nN end exit 0\n"], "\nN end ", 100, true);
        assert_eq!(text, b"0 p\n3 f\n");
        assert_eq!(end, Some(Ok("exit 0".to_owned())));
        // Another request's mark is text, not an end.
        let (text, end) = read(&[b"x\nM end exit 0\n"], "\nN end ", 100, true);
        assert_eq!(text, b"x\nM end exit 0\n");
        assert_eq!(end, None);
    }

    #[test]
    fn past_its_cap_a_strict_read_gives_up_and_stderr_keeps_its_start() {
        let long = vec![b'a'; 10_000];
        let (_, end) = read(&[&long, b"\nN end exit 0\n"], "\nN end ", 100, true);
        assert_eq!(end, Some(Err(())));
        let (text, end) = read(&[&long, b"\nN end\n"], "\nN end", 100, false);
        assert_eq!(text, vec![b'a'; 100]);
        assert_eq!(end, Some(Ok(String::new())));
    }

    #[test]
    fn the_judges_end_lines() {
        assert_eq!(parse_ended("exit 0"), Some(Ended::Code(0)));
        assert_eq!(parse_ended("signal 6"), Some(Ended::Signal(6)));
        assert_eq!(parse_ended("exit x"), None);
        assert_eq!(parse_ended("done"), None);
    }
}
