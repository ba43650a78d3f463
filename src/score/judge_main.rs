// The judge's `main`, appended by assay to a generated root that links the
// harness and no candidate. Not a module of assay. The judge holds the
// oracle: it is the only process that reads the expected answers, and no
// candidate's code is in it.
//
// One judge serves a batch (`judge serve`): it loads the cases once, then
// answers each run's outputs in a child forked for that run alone, so the
// cases are parsed once per batch and nothing one run's outputs do to the
// harness (its statics, a crash, a stray print) reaches another run's
// answer. The server itself runs only the harness's `load_cases` and
// `input_line`, never its `judge` on a candidate's output.
//
// stdin: one line `NONCE LEN`, then the cases file (LEN bytes); then
// requests until stdin ends, each one line `NONCE N` and N lines `I OUTPUT`
// (the output as the candidate's run encoded it).
// stdout: each case's encoded input (`input_line`), one a line, in order,
// then the line `NONCE end exit 0` (preceded by a newline; stderr gets
// `NONCE end` first). For each
// request, one line per answered case from its child, `I p` when the
// harness's `judge` accepts it, `I f` otherwise, and `I h PANIC` when
// `judge` panicked (`PANIC` is the panic as the hook saw it, on one line): a
// harness fault, never the answer's (score::fault); then, once the child
// has ended, `NONCE end exit CODE` or `NONCE end signal SIGNAL` (preceded by
// a newline). stderr: what the child wrote, then `NONCE end` (preceded by a
// newline), written before the line on stdout.

unsafe extern "C" {
    fn fork() -> i32;
    fn waitpid(pid: i32, status: *mut i32, options: i32) -> i32;
}

fn main() {
    use std::io::{BufRead, Read, Write};

    let mode = std::env::args().nth(1).unwrap_or_default();
    if mode != "serve" {
        eprintln!("assay judge: unknown mode `{mode}`");
        std::process::exit(102);
    }
    let mut stdin = std::io::stdin().lock();
    let (nonce, len) = head(&mut stdin);
    let mut text = vec![0u8; len];
    if stdin.read_exact(&mut text).is_err() {
        std::process::exit(101);
    }
    let text = String::from_utf8_lossy(&text);
    let cases = match __assay_harness::load_cases(&text) {
        Ok(cases) => cases,
        Err(e) => {
            eprintln!("assay judge: cases do not load: {e}");
            std::process::exit(103);
        }
    };
    // The last panic, as its hook saw it: where and why, on one line.
    static PANIC: std::sync::Mutex<String> = std::sync::Mutex::new(String::new());
    std::panic::set_hook(Box::new(|info| {
        let mut last = PANIC.lock().unwrap_or_else(|e| e.into_inner());
        *last = info.to_string().replace(['\n', '\r'], " ");
    }));
    {
        let mut out = std::io::BufWriter::new(std::io::stdout().lock());
        for case in &cases {
            let line = __assay_harness::input_line(case);
            let _ = writeln!(out, "{}", line.replace(['\n', '\r'], " "));
        }
        let _ = write!(std::io::stderr(), "\n{nonce} end\n");
        let _ = write!(out, "\n{nonce} end exit 0\n");
        if out.flush().is_err() {
            std::process::exit(104);
        }
    }
    loop {
        let mut line = String::new();
        match stdin.read_line(&mut line) {
            Ok(0) => std::process::exit(0),
            Ok(_) => {}
            Err(_) => std::process::exit(101),
        }
        let Some((nonce, n)) = line
            .trim()
            .split_once(' ')
            .and_then(|(nonce, n)| Some((nonce.to_owned(), n.parse::<usize>().ok()?)))
        else {
            eprintln!("assay judge: bad request");
            std::process::exit(102);
        };
        let mut answers = Vec::with_capacity(n);
        for _ in 0..n {
            let mut answer = String::new();
            if stdin.read_line(&mut answer).map_or(true, |read| read == 0) {
                std::process::exit(101);
            }
            answers.push(answer);
        }
        // SAFETY: this process has one thread and nothing buffered for
        // stdout; the child judges, flushes and exits.
        let pid = unsafe { fork() };
        if pid == 0 {
            let mut out = std::io::BufWriter::new(std::io::stdout().lock());
            for answer in &answers {
                let Some((i, output)) = answer.trim_end_matches(['\n', '\r']).split_once(' ')
                else {
                    continue;
                };
                let Some(case) = i.parse::<usize>().ok().and_then(|i| cases.get(i)) else {
                    continue;
                };
                let verdict = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    __assay_harness::judge(case, output)
                }));
                let _ = match verdict {
                    Ok(true) => writeln!(out, "{i} p"),
                    Ok(false) => writeln!(out, "{i} f"),
                    Err(_) => {
                        let panic = PANIC.lock().unwrap_or_else(|e| e.into_inner());
                        writeln!(out, "{i} h {panic}")
                    }
                };
            }
            std::process::exit(if out.flush().is_err() { 104 } else { 0 });
        }
        let ended = if pid < 0 {
            "exit 105".to_owned()
        } else {
            let mut status = 0;
            // SAFETY: waits for our own child into a local.
            while unsafe { waitpid(pid, &mut status, 0) } < 0 {
                if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
                    std::process::exit(106);
                }
            }
            if status & 0x7f == 0 {
                format!("exit {}", (status >> 8) & 0xff)
            } else {
                format!("signal {}", status & 0x7f)
            }
        };
        let _ = write!(std::io::stderr(), "\n{nonce} end\n");
        let mut out = std::io::stdout().lock();
        if write!(out, "\n{nonce} end {ended}\n")
            .and_then(|()| out.flush())
            .is_err()
        {
            std::process::exit(104);
        }
    }
}

// The first line: `NONCE LEN`.
fn head(stdin: &mut impl std::io::BufRead) -> (String, usize) {
    let mut line = String::new();
    if stdin.read_line(&mut line).is_err() {
        std::process::exit(101);
    }
    match line.trim().split_once(' ') {
        Some((nonce, len)) if len.parse::<usize>().is_ok() => {
            (nonce.to_owned(), len.parse().unwrap_or(0))
        }
        _ => {
            eprintln!("assay judge: bad length");
            std::process::exit(102);
        }
    }
}
