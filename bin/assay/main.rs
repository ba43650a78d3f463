//! The `assay` command: parses flags, calls the library and maps the
//! outcome to an exit code (`assay::engine::exit::ExitClass`: 0 ok, 1 failed, 2 bad
//! input, 3 the store went away, 130 stopped). `args` holds the flags,
//! `cmd` one file per command.

use std::process::ExitCode;

use clap::Parser;

use assay::engine::exit::ExitClass;

mod args;
mod cmd;
mod values;

fn main() -> ExitCode {
    // Started by a confined cargo as its RUSTC_WORKSPACE_WRAPPER: limit and
    // run one target's rustc, nothing else (`sandbox::compile`).
    if let Some(settings) = std::env::var_os(assay::sandbox::compile::WRAPPER_VAR) {
        let code = assay::sandbox::compile::run_wrapper(&settings.to_string_lossy());
        return ExitCode::from(u8::try_from(code).unwrap_or(101));
    }
    // Every build this process starts wraps its rustc in this binary.
    if let Ok(exe) = std::env::current_exe() {
        assay::sandbox::compile::set_wrapper_exe(exe);
    }
    // `assay show 3 | head` should end quietly, as other Unix tools do, not
    // panic on the closed pipe.
    // SAFETY: restoring the default disposition of a signal at start-up,
    // before any thread exists.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = args::Cli::parse();
    init_logging(cli.verbose);
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let outcome = runtime.block_on(cmd::dispatch(cli.command));
    // A blocking task may still wait (for a task package's lock, after
    // Ctrl-C); dropping the runtime would wait for it forever.
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    match outcome {
        Ok(code) => code,
        Err(e) => {
            let class = ExitClass::of(&e);
            if class == ExitClass::Interrupted {
                // Not an error: the user asked for it, and nothing was lost.
                eprintln!("assay: {e:#}");
            } else {
                eprintln!("error: {e:#}");
            }
            ExitCode::from(class.code())
        }
    }
}

fn init_logging(verbose: u8) {
    use tracing_subscriber::EnvFilter;
    let default = match verbose {
        // async-openai logs a malformed chunk at error level; assay records it.
        0 => "warn,async_openai=off",
        1 => "assay=info",
        _ => "assay=debug",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        // Colour only for a person at a terminal, never in a log file.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
}
