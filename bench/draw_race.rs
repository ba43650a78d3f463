//! Race against fixed split: two pools on the test gateway, one 5x slower
//! (latency and per-token time both), the same batch drawn both ways in one
//! run, alternating, three times each. Prints the walls and race / fixed
//! (goal: at most 0.6).
//!
//! `cargo bench --bench draw_race`

#[path = "common.rs"]
mod common;

use std::time::Duration;

use assay::draw::Plan;
use assay::spec::SplitMode;
use assay_gateway::{Config, Dialect, Gateway, Model};

const N: usize = 64;
const IN_FLIGHT: usize = 4;
const ROUNDS: usize = 3;

fn main() {
    let vllm = Dialect::Vllm {
        tokens_per_chunk: 4,
    };
    let fast = Model::new(vllm, common::corpus())
        .latency(Duration::from_millis(40), Duration::from_millis(1));
    let slow = Model::new(vllm, common::corpus())
        .latency(Duration::from_millis(200), Duration::from_millis(5));
    let gw = Gateway::start_on_thread(Config::new().model("fast", fast).model("slow", slow))
        .expect("gateway starts");
    let rt = tokio::runtime::Runtime::new().unwrap();
    let pools = || {
        vec![
            common::pool("fast", &gw.base_url(), "fast", IN_FLIGHT),
            common::pool("slow", &gw.base_url(), "slow", IN_FLIGHT),
        ]
    };
    let fixed = Plan::http(pools(), SplitMode::Fixed, Some(vec![1, 1]));
    let race = Plan::http(pools(), SplitMode::Race, None);

    println!("draw_race: {N} replies, 2 pools x {IN_FLIGHT} in flight, slow pool 5x slower");
    println!(
        "{:<6} {:>5} {:>9} {:>10} {:>10} {:>9}",
        "mode", "round", "wall (s)", "from fast", "from slow", "cancelled"
    );
    let mut walls = (Vec::new(), Vec::new());
    for round in 1..=ROUNDS {
        for (mode, plan) in [("fixed", &fixed), ("race", &race)] {
            let d = rt.block_on(common::draw(plan, N));
            assert_eq!(
                (d.replies, d.failed),
                (N, 0),
                "{mode}: every reply, none failed"
            );
            let from = |p: &str| d.by_pool.iter().find(|(n, _)| n == p).map_or(0, |x| x.1);
            println!(
                "{mode:<6} {round:>5} {:>9.3} {:>10} {:>10} {:>9}",
                d.wall.as_secs_f64(),
                from("fast"),
                from("slow"),
                d.cancelled
            );
            let w = d.wall.as_secs_f64();
            if mode == "fixed" {
                walls.0.push(w)
            } else {
                walls.1.push(w)
            }
        }
    }
    let (f, r) = (common::median(walls.0), common::median(walls.1));
    println!("median wall: fixed {f:.3} s, race {r:.3} s");
    println!("race / fixed = {:.2} (goal <= 0.6)", r / f);
}
