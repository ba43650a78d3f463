//! The result channel: a candidate's run reports on stdout in lines that
//! start with a nonce only assay and that run know (see `build/package/runner_lib.rs`).
//! Text a candidate prints cannot pass for a result, and a run can report
//! outputs only, never a verdict: the judge decides pass or fail.

/// A result line longer than this is not a result (it counts against the
/// cap on other output).
pub(crate) const LINE_CAP: usize = 64 << 10;

/// The most bytes of outputs one run may report in all; past it the run is
/// stopped as a flood (`output_cap_exceeded`).
pub(crate) const RESULTS_CAP: usize = 64 << 20;

/// What a run said about one case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Reported {
    /// The candidate's answer, as the harness encoded it.
    Output(String),
    /// The candidate panicked (caught; the run went on).
    Panic,
    /// The harness could not decode the case's input.
    Bad,
}

/// Parses a run's stdout as it streams in.
pub(crate) struct Protocol {
    nonce: String,
    pub total: usize,
    cap: usize,
    pending: Vec<u8>,
    other_bytes: usize,
    result_bytes: usize,
    pub announced: Option<usize>,
    /// The index of the next case expected (starts at the first case asked for).
    pub completed: usize,
    /// What was reported for each case from the first asked for, in order.
    pub reported: Vec<Reported>,
    pub done: bool,
    pub broken: bool,
    pub over_cap: bool,
}

impl Protocol {
    pub fn new(nonce: String, total: usize, first: usize, cap: usize) -> Protocol {
        Protocol {
            nonce,
            total,
            cap,
            pending: Vec::new(),
            other_bytes: 0,
            result_bytes: 0,
            announced: None,
            completed: first,
            reported: Vec::new(),
            done: false,
            broken: false,
            over_cap: false,
        }
    }

    /// Takes a chunk of stdout; false once reading should stop.
    pub fn feed(&mut self, chunk: &[u8]) -> bool {
        let mut rest = chunk;
        while let Some(nl) = rest.iter().position(|b| *b == b'\n') {
            self.pending.extend_from_slice(&rest[..nl]);
            let line = std::mem::take(&mut self.pending);
            self.line(&line);
            rest = &rest[nl + 1..];
        }
        self.pending.extend_from_slice(rest);
        if self.pending.len() > self.cap.max(LINE_CAP) {
            self.other_bytes += self.pending.len();
            self.pending.clear();
        }
        if self.other_bytes > self.cap || self.result_bytes > RESULTS_CAP {
            self.over_cap = true;
        }
        !self.over_cap
    }

    fn line(&mut self, line: &[u8]) {
        let Some(body) = line
            .strip_prefix(self.nonce.as_bytes())
            .and_then(|b| b.strip_prefix(b" "))
            .filter(|b| b.len() <= LINE_CAP)
        else {
            self.other_bytes += line.len() + 1;
            return;
        };
        self.result_bytes += body.len();
        let body = String::from_utf8_lossy(body);
        let mut words = body.splitn(4, ' ');
        let words = [words.next(), words.next(), words.next(), words.next()];
        let case_now = |i: &str| i.parse() == Ok(self.completed) && self.completed < self.total;
        let reported = match words {
            [Some("total"), Some(n), None, None] if self.announced.is_none() => {
                self.announced = n.parse().ok();
                if self.announced != Some(self.total) {
                    self.broken = true;
                }
                return;
            }
            [Some("done"), None, None, None] if !self.done => {
                self.done = true;
                return;
            }
            _ if self.done => None,
            [Some("case"), Some(i), Some("out"), Some(out)] if case_now(i) => {
                Some(Reported::Output(out.to_owned()))
            }
            [Some("case"), Some(i), Some("panic"), None] if case_now(i) => Some(Reported::Panic),
            [Some("case"), Some(i), Some("bad"), None] if case_now(i) => Some(Reported::Bad),
            _ => None,
        };
        match reported {
            Some(r) => {
                self.completed += 1;
                self.reported.push(r);
            }
            None => self.broken = true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(p: &mut Protocol, text: &str) -> bool {
        p.feed(text.as_bytes())
    }

    fn out(s: &str) -> Reported {
        Reported::Output(s.to_owned())
    }

    #[test]
    fn counts_framed_lines_only() {
        let mut p = Protocol::new("n0nce".into(), 3, 0, 1000);
        feed(
            &mut p,
            "\nn0nce total 3\nhello from the candidate\nn0nce case 0 out {\"a\": 1}\n",
        );
        feed(&mut p, "case 1 out 2\n\nn0nce case 1 out 4 5");
        feed(&mut p, "\nn0nce case 2 panic\nn0nce done\n");
        assert_eq!((p.completed, p.done, p.broken), (3, true, false));
        assert_eq!(p.reported, [out("{\"a\": 1}"), out("4 5"), Reported::Panic]);
    }

    #[test]
    fn a_restarted_run_reports_from_its_first_case() {
        let mut p = Protocol::new("n".into(), 4, 2, 1000);
        feed(&mut p, "n total 4\nn case 2 out 1\nn case 3 bad\nn done\n");
        assert_eq!((p.completed, p.done, p.broken), (4, true, false));
        assert_eq!(p.reported, [out("1"), Reported::Bad]);
        let mut p = Protocol::new("n".into(), 4, 2, 1000);
        feed(&mut p, "n total 4\nn case 0 out 1\n");
        assert!(p.broken, "a case before the first asked for is forged");
    }

    #[test]
    fn a_verdict_line_is_no_result() {
        // The old protocol's `pass` is not an answer the judge could accept.
        let mut p = Protocol::new("n".into(), 2, 0, 1000);
        feed(&mut p, "n total 2\nn case 0 pass\n");
        assert!(p.broken);
    }

    #[test]
    fn forged_or_out_of_order_lines_break_the_protocol() {
        let mut p = Protocol::new("n".into(), 2, 0, 1000);
        feed(&mut p, "n total 2\nn case 1 out 1\n");
        assert!(p.broken);
        let mut p = Protocol::new("n".into(), 2, 0, 1000);
        feed(&mut p, "n total 2\nn case 0 out 1\nn case 0 out 1\n");
        assert!(p.broken);
        let mut p = Protocol::new("n".into(), 2, 0, 1000);
        feed(&mut p, "n total 5\n");
        assert!(p.broken);
        let mut p = Protocol::new("n".into(), 1, 0, 1000);
        feed(
            &mut p,
            "n total 1\nn case 0 out 1\nn done\nn case 1 out 2\n",
        );
        assert!(p.broken, "nothing may follow done");
    }

    #[test]
    fn output_past_the_cap_stops_reading() {
        let mut p = Protocol::new("n".into(), 1, 0, 100);
        assert!(feed(&mut p, &"x".repeat(50)));
        assert!(
            feed(&mut p, &"y".repeat(100)),
            "one unfinished line may be long"
        );
        assert!(!feed(&mut p, &"y".repeat(LINE_CAP)));
        assert!(p.over_cap);
        let mut p = Protocol::new("n".into(), 1, 0, 100);
        for _ in 0..10 {
            feed(&mut p, "0123456789abcdef\n");
        }
        assert!(p.over_cap);
    }

    #[test]
    fn results_past_their_cap_are_a_flood() {
        let total = RESULTS_CAP / LINE_CAP + 2;
        let mut p = Protocol::new("n".into(), total, 0, 100);
        let big = "z".repeat(LINE_CAP - 64);
        let mut i = 0;
        while feed(&mut p, &format!("n case {i} out {big}\n")) {
            i += 1;
            assert!(i < total, "never stopped");
        }
        assert!(p.over_cap);
    }
}
