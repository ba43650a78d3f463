// The judge's `main`, appended by assay to a generated root that links the
// harness and no candidate. Not a module of assay. The judge holds the
// oracle: it is the only process that reads the expected answers, and no
// candidate's code is in it.
//
// `judge inputs`: stdin is the cases file; stdout is each case's encoded
// input (`input_line`), one a line, in order.
// `judge compare`: stdin is one line with the cases file's length in bytes,
// the cases file, then one line per answered case, `I OUTPUT` (the output as
// the candidate's run encoded it); stdout is one line per answered case, `I
// p` when the harness's `judge` accepts it, `I f` otherwise, and `I h PANIC`
// when `judge` panicked (`PANIC` is the panic as the hook saw it, on one
// line): a harness fault, never the answer's (score::fault).

fn main() {
    use std::io::{Read, Write};

    let mode = std::env::args().nth(1).unwrap_or_default();
    let mut stdin = Vec::new();
    if std::io::stdin().read_to_end(&mut stdin).is_err() {
        std::process::exit(101);
    }
    let stdin = String::from_utf8_lossy(&stdin);
    let (cases_text, answers) = match mode.as_str() {
        "inputs" => (&stdin[..], ""),
        "compare" => {
            let (len, rest) = stdin.split_once('\n').unwrap_or(("", ""));
            let len: usize = len.trim().parse().unwrap_or(0);
            if len > rest.len() || !rest.is_char_boundary(len) {
                eprintln!("assay judge: bad length");
                std::process::exit(102);
            }
            rest.split_at(len)
        }
        _ => {
            eprintln!("assay judge: unknown mode `{mode}`");
            std::process::exit(102);
        }
    };
    let cases = match __assay_harness::load_cases(cases_text) {
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
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    if mode == "inputs" {
        for case in &cases {
            let line = __assay_harness::input_line(case);
            let _ = writeln!(out, "{}", line.replace(['\n', '\r'], " "));
        }
    } else {
        for answer in answers.lines() {
            let Some((i, output)) = answer.split_once(' ') else {
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
    }
    if out.flush().is_err() {
        std::process::exit(104);
    }
}
