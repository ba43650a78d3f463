// The scorer's `main`, appended by assay to the generated scorer root after
// the candidate modules and the `entry` table. Not a module of assay.
//
// Protocol: the parent writes one line holding a fresh nonce and the index
// of the first case to run (not 0 when a run is resumed under per-case
// isolation), then the cases file, to stdin, and closes it. Everything is read before any
// candidate code runs, so a candidate can see neither the nonce nor the cases
// file. Results go to stdout as lines that start with the nonce, each preceded
// by a newline so that text a candidate printed without one cannot run into
// them; a candidate's own printing cannot pass for a result.

fn main() {
    use std::io::{Read, Write};

    let key = std::env::args().nth(1).unwrap_or_default();
    let mut input = String::new();
    if std::io::stdin().read_to_string(&mut input).is_err() {
        std::process::exit(101);
    }
    let (head, cases_text) = input.split_once('\n').unwrap_or((input.as_str(), ""));
    let (nonce, first) = head.trim().split_once(' ').unwrap_or((head.trim(), "0"));
    let nonce = nonce.to_owned();
    let first: usize = first.parse().unwrap_or(0);
    let Some(entry) = entry(&key) else {
        eprintln!("assay scorer: no candidate `{key}`");
        std::process::exit(102);
    };
    let cases = match __assay_harness::load_cases(cases_text) {
        Ok(cases) => cases,
        Err(e) => {
            eprintln!("assay scorer: cases do not load: {e}");
            std::process::exit(103);
        }
    };
    let emit = move |line: std::fmt::Arguments<'_>| {
        let mut out = std::io::stdout().lock();
        let _ = write!(out, "\n{nonce} {line}\n");
        let _ = out.flush();
    };
    emit(format_args!("total {}", cases.len()));
    // A panicking case fails alone; its message would only be noise.
    std::panic::set_hook(Box::new(|_| {}));
    // Cases run on a thread of their own with a main-sized stack: std finds
    // a spawned thread's guard page without reading /proc/self/maps (which
    // the sandbox does not allow), so a stack overflow is still reported and
    // aborts (SIGABRT) the same way with or without Landlock.
    let worker = std::thread::Builder::new()
        .name("cases".into())
        .stack_size(8 << 20)
        .spawn(move || {
            for (i, case) in cases.iter().enumerate().skip(first) {
                let run = std::panic::AssertUnwindSafe(|| __assay_harness::run_case(entry, case));
                let outcome = match std::panic::catch_unwind(run) {
                    Ok(true) => "pass",
                    Ok(false) => "fail",
                    Err(_) => "panic",
                };
                emit(format_args!("case {i} {outcome}"));
            }
            emit(format_args!("done"));
        });
    match worker.map(|w| w.join()) {
        Ok(Ok(())) => {}
        _ => std::process::exit(104),
    }
}
