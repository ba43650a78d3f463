//! The runner of every scoring image: the crate `assay-runner`, which assay
//! writes into each task's package (not a module of assay). An image's root
//! is `mod candidate;` and a `main` that hands this crate the one function
//! that runs the candidate's entry on an encoded input, so the image links
//! the harness, this runner and that one candidate, nothing else. A crate of
//! its own, so that the code generation of what it uses of std (threads,
//! I/O, formatting) is done once per task, not once per image.
//!
//! Protocol: the parent writes one line holding a fresh nonce and the index
//! of the first case to run (not 0 when a run is resumed under per-case
//! isolation), then one encoded input a line (the harness's `input_line`, made
//! by the judge), and closes stdin. Everything is read before any case runs.
//! No expected answer is ever in this process: the judge, a process that links
//! the harness and no candidate, compares what comes back. Results go to
//! stdout as lines that start with the nonce, each preceded by a newline so
//! that text a candidate printed without one cannot run into them:
//! `case I out OUTPUT` (the harness's encoding, one line), `case I panic`, or
//! `case I bad` (the harness could not decode the input).

/// Runs the cases this process is given on stdin through `run` and
/// reports the outputs on stdout, as the protocol above says; then returns.
pub fn main(run: fn(&str) -> Result<String, String>) {
    use std::io::{Read, Write};

    let mut input = String::new();
    if std::io::stdin().read_to_string(&mut input).is_err() {
        std::process::exit(101);
    }
    let (head, inputs) = input.split_once('\n').unwrap_or((input.as_str(), ""));
    let (nonce, first) = head.trim().split_once(' ').unwrap_or((head.trim(), "0"));
    let nonce = nonce.to_owned();
    let first: usize = first.parse().unwrap_or(0);
    let lines: Vec<String> = inputs.lines().map(str::to_owned).collect();
    drop(input);
    let emit = move |line: std::fmt::Arguments<'_>| {
        let mut out = std::io::stdout().lock();
        let _ = write!(out, "\n{nonce} {line}\n");
        let _ = out.flush();
    };
    emit(format_args!("total {}", lines.len()));
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
            for (i, line) in lines.iter().enumerate().skip(first) {
                match std::panic::catch_unwind(|| run(line)) {
                    Ok(Ok(out)) => {
                        // One line per result, whatever the harness encoded.
                        let out = out.replace(['\n', '\r'], " ");
                        emit(format_args!("case {i} out {out}"));
                    }
                    Ok(Err(_)) => emit(format_args!("case {i} bad")),
                    Err(_) => emit(format_args!("case {i} panic")),
                }
            }
            emit(format_args!("done"));
        });
    match worker.map(|w| w.join()) {
        Ok(Ok(())) => {}
        _ => std::process::exit(104),
    }
}
