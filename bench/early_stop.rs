//! What the draw's early stop costs per stream: `extract::Watch` fed a
//! reply four bytes a chunk (about one token each, as llama.cpp streams),
//! by the reply's length, beside splitting off reasoning and scanning for
//! fences again over the whole text so far after every chunk (the shape of
//! the rule it replaced, without its parse; only up to 32 KB, it is
//! quadratic).
//!
//! The reply is the early stop's worst case: reasoning in a `<think>`
//! block with a draft in a fence, prose padded to the length, a fence that
//! parses without the entry, and the fence that settles it last, so every
//! byte is read before the watch settles.
//!
//! `cargo bench --bench early_stop`

use std::hint::black_box;
use std::time::{Duration, Instant};

use assay::text::extract::Watch;
use assay::text::markdown;

/// How long each measurement runs, at least.
const MEASURE: Duration = Duration::from_secs(1);
const CHUNK: usize = 4;

fn reply(len: usize) -> String {
    let mut text = String::from(
        "<think>The width is twice x.\n```rust\npub fn solve(x: u32) -> u32 { x }\n```\nNo: x + 1.</think>\n",
    );
    let line = "The function adds one to its argument and returns it, wrapping never.\n";
    while text.len() < len {
        text.push_str(line);
    }
    text.push_str(
        "```rust\nfn helper() {}\n```\n```rust\npub fn solve(x: u32) -> u32 { x + 1 }\n```\n",
    );
    text
}

/// Seconds per stream of `text`, fed `CHUNK` bytes at a time to `read`.
fn per_stream(text: &str, mut read: impl FnMut(&str) -> bool) -> f64 {
    let mut runs = 0u32;
    let start = Instant::now();
    while start.elapsed() < MEASURE || runs == 0 {
        let mut end = 0;
        let mut settled = false;
        while end < text.len() {
            end = (end + CHUNK).min(text.len());
            while !text.is_char_boundary(end) {
                end += 1;
            }
            settled = read(&text[..end]);
        }
        assert!(black_box(settled), "the last fence settles it");
        runs += 1;
    }
    start.elapsed().as_secs_f64() / f64::from(runs)
}

fn main() {
    println!(
        "{:>8}  {:>12}  {:>10}  {:>14}  {:>10}",
        "reply", "watch", "ns/byte", "re-read", "ns/byte"
    );
    for kib in [4, 32, 256, 1024] {
        let text = reply(kib * 1024);
        let mut watch = Watch::new("solve");
        let watched = per_stream(&text, |so_far| {
            if so_far.len() <= CHUNK {
                watch = Watch::new("solve");
            }
            watch.read(so_far)
        });
        let reread = (kib <= 32).then(|| {
            per_stream(&text, |so_far| {
                // Only the scan, no parse: a lower bound of any rule that
                // reads the text again after every chunk.
                let answer = markdown::answer(so_far);
                markdown::fences(&answer)
                    .iter()
                    .filter(|f| f.closed)
                    .count()
                    == 2
            })
        });
        let ns = |s: f64| s * 1e9 / text.len() as f64;
        println!(
            "{:>5} KiB  {:>9.3} ms  {:>10.1}  {:>14}  {:>10}",
            kib,
            watched * 1e3,
            ns(watched),
            reread.map_or("-".into(), |s| format!("{:.1} ms", s * 1e3)),
            reread.map_or("-".into(), |s| format!("{:.0}", ns(s))),
        );
    }
}
