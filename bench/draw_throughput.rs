//! 1,000 replies at 256 in flight through the test gateway with a fixed
//! per-request time. The gateway runs in a child process (this binary, re-run
//! with ASSAY_BENCH_GATEWAY=1) so the CPU time measured here is the client's
//! alone: the draw, async-openai's stream parsing, and storing every reply
//! in SQLite as the pipeline does.
//!
//! Every request is served the same reply (llama.cpp dialect, one token a
//! chunk), so every request takes the same injected time T, and the ideal
//! wall is ceil(1000 / 256) rounds of T. Two scenarios:
//!
//! - `streamed`: 100 ms to the first token, then 4 ms per token, as an
//!   engine streams (the headline figure);
//! - `burst`: 250 ms, then every chunk at once (a worst case: 256 replies'
//!   chunks land in the same instant and the client parses them all then).
//!
//! Prints draw wall / ideal wall (goal at most 1.05) and client CPU per
//! streamed chunk.
//!
//! `cargo bench --bench draw_throughput`

#[path = "common.rs"]
mod common;

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::time::Duration;

use assay::draw::Plan;
use assay::spec::SplitMode;
use assay_gateway::{Config, Dialect, Gateway, Model};

const N: usize = 1000;
const IN_FLIGHT: usize = 256;
const ROUNDS: usize = 3;
/// (model alias, latency to the first chunk, time per later token)
const SCENARIOS: [(&str, Duration, Duration); 2] = [
    (
        "streamed",
        Duration::from_millis(100),
        Duration::from_millis(4),
    ),
    ("burst", Duration::from_millis(250), Duration::ZERO),
];

/// The one reply every request gets: the tiny fixture's first.
fn reply() -> Vec<assay_gateway::Recorded> {
    common::corpus()[..1].to_vec()
}

fn main() {
    if std::env::var_os("ASSAY_BENCH_GATEWAY").is_some() {
        return serve();
    }
    let mut child = Command::new(std::env::current_exe().unwrap())
        .env("ASSAY_BENCH_GATEWAY", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("the gateway process starts");
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    let base_url = line.trim().to_owned();

    let rt = tokio::runtime::Runtime::new().unwrap();
    let tokens = assay_gateway::tokens(&reply()[0].content).len();
    let rounds = N.div_ceil(IN_FLIGHT);
    println!(
        "draw_throughput: {N} replies, {IN_FLIGHT} in flight, every reply {tokens} tokens \
         (llama.cpp dialect: one token a chunk), client and gateway in separate processes"
    );
    println!(
        "{:<9} {:>5} {:>9} {:>9} {:>7} {:>7} {:>12} {:>13}",
        "scenario",
        "round",
        "ideal (s)",
        "wall (s)",
        "ratio",
        "chunks",
        "client CPU-s",
        "CPU us/chunk"
    );
    let mut summary = Vec::new();
    for (alias, latency, per_token) in SCENARIOS {
        let plan = Plan::http(
            vec![common::pool(alias, &base_url, alias, IN_FLIGHT)],
            SplitMode::Fixed,
            None,
        );
        let per_request = latency + per_token * (tokens as u32 - 1);
        let ideal = rounds as f64 * per_request.as_secs_f64();
        let mut ratios = Vec::new();
        let mut per_chunk = Vec::new();
        for round in 1..=ROUNDS {
            let cpu0 = cpu_seconds();
            let d = rt.block_on(common::draw(&plan, N));
            let cpu = cpu_seconds() - cpu0;
            assert_eq!((d.replies, d.failed), (N, 0), "every reply, none failed");
            let ratio = d.wall.as_secs_f64() / ideal;
            let us = cpu / d.chunks as f64 * 1e6;
            // How much later than injected each request ended (ms): what
            // the wall lost inside requests rather than between them.
            let t = per_request.as_secs_f64() * 1e3;
            let mut late: Vec<f64> = d.latencies.iter().map(|l| l - t).collect();
            late.sort_by(|a, b| a.partial_cmp(b).unwrap());
            println!(
                "{alias:<9} {round:>5} {ideal:>9.3} {:>9.3} {ratio:>7.3} {:>7} {cpu:>12.3} {us:>13.1} {:>7.1}/{:>7.1}",
                d.wall.as_secs_f64(),
                d.chunks,
                late[late.len() / 2],
                late[late.len() - 1]
            );
            ratios.push(ratio);
            per_chunk.push(us);
        }
        summary.push((alias, common::median(ratios), common::median(per_chunk)));
    }
    for (alias, ratio, us) in summary {
        println!(
            "{alias}: median draw wall / ideal wall = {ratio:.3} (goal <= 1.05), client CPU per chunk = {us:.1} us"
        );
    }
    drop(child.stdin.take());
    let _ = child.wait();
}

/// The gateway process: prints its base URL, serves until stdin closes.
fn serve() {
    let mut config = Config::new();
    for (alias, latency, per_token) in SCENARIOS {
        config = config.model(
            alias,
            Model::new(Dialect::LlamaCpp, reply()).latency(latency, per_token),
        );
    }
    // Two threads: the gateway has a process to itself and must not be the
    // bottleneck of what is measured here.
    let gw = Gateway::start_on_threads(config, 2).unwrap();
    println!("{}", gw.base_url());
    let mut sink = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut sink);
    drop(gw);
}

/// User + system CPU seconds of this process so far.
fn cpu_seconds() -> f64 {
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes into the struct we own.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    t(ru.ru_utime) + t(ru.ru_stime)
}
