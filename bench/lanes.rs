//! Lanes benchmark (issue 18): the queue's cost per item on a real
//! PostgreSQL server, and how throughput grows with lanes whose items only
//! wait (as lanes waiting on a gateway do), side by side in one run.
//!
//! Each simulated lane is a `Store` of its own (its own connections, as a
//! lane process has) running the real claim / renew / finish statements:
//! claim an item, renew its lease `--renewals` times while the item
//! "works" (`--wait-ms`, split between renewals), finish it, claim the
//! next. Store time is the time spent in those statements; throughput is
//! items finished per second of wall time, and the speedup of L lanes is
//! their throughput over one lane's, measured in the same run.
//!
//! Each lane count runs twice. In lockstep every item waits exactly
//! `--wait-ms`, so all lanes claim, renew and finish at the same instants:
//! the worst case, L statements at once on the server. Jittered, each
//! item's wait is drawn uniformly within `--jitter` (a fraction) of
//! `--wait-ms`, as replies from a gateway take varying times, so the
//! lanes' statements spread out as they do on a rig.
//!
//! `cargo bench --bench lanes -- [--lanes 1,2,4,8,16,32] [--items-per-lane 16]
//! [--wait-ms 400] [--renewals 2] [--jitter 0.25]`
//! The server is `scripts/pg-test-server`'s (started if needed), or
//! `ASSAY_TEST_PG`; each lane count runs in a schema of its own.

#[path = "../tests/common/pg.rs"]
mod pg;

use std::time::{Duration, Instant};

use assay::store::{Db, Store, WorkKind};
use assay::support::owner::Owner;

struct Figures {
    lanes: usize,
    jitter: f64,
    items: usize,
    wall: Duration,
    /// Per item: claim, renewals and finish.
    store_per_item: Duration,
    claim: Duration,
    renew: Duration,
    finish: Duration,
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let flag = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
    };
    let lanes: Vec<usize> = flag("--lanes").map_or_else(
        || vec![1, 2, 4, 8, 16, 32],
        |s| {
            s.split(',')
                .map(|n| n.parse().expect("--lanes: numbers"))
                .collect()
        },
    );
    let per_lane: usize = flag("--items-per-lane").map_or(16, |s| s.parse().expect("a number"));
    let wait = Duration::from_millis(flag("--wait-ms").map_or(400, |s| s.parse().expect("ms")));
    let renewals: u32 = flag("--renewals").map_or(2, |s| s.parse().expect("a number"));
    let jitter: f64 = flag("--jitter").map_or(0.25, |s| s.parse().expect("a fraction"));
    assert!((0.0..1.0).contains(&jitter), "--jitter: a fraction below 1");

    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    println!(
        "PostgreSQL {}; each item waits {} ms with {renewals} lease renewals; {per_lane} items per lane",
        pg::server(),
        wait.as_millis()
    );
    let figures: Vec<Figures> = lanes
        .iter()
        .flat_map(|&l| [(l, 0.0), (l, jitter)])
        .map(|(l, j)| rt.block_on(measure(l, l * per_lane, wait, j, renewals)))
        .collect();
    println!(
        "\nwaits       lanes  items  wall (s)  items/s  speedup vs 1 lane  store ms/item (claim + renew + finish)"
    );
    for f in &figures {
        let rate = f.items as f64 / f.wall.as_secs_f64();
        let one = figures
            .iter()
            .find(|o| o.lanes == 1 && o.jitter == f.jitter)
            .map(|o| o.items as f64 / o.wall.as_secs_f64());
        let speedup = one.map_or("-".to_owned(), |one| format!("{:.1}x", rate / one));
        let shape = if f.jitter == 0.0 {
            "lockstep".to_owned()
        } else {
            format!("±{:.0}%", f.jitter * 100.0)
        };
        println!(
            "{shape:<10}  {:>5}  {:>5}  {:>8.2}  {:>7.2}  {:>17}  {:.2} ({:.2} + {:.2} + {:.2})",
            f.lanes,
            f.items,
            f.wall.as_secs_f64(),
            rate,
            speedup,
            ms(f.store_per_item),
            ms(f.claim),
            ms(f.renew),
            ms(f.finish),
        );
    }
    println!("\nideal: each item waits {} ms, so one lane does at most {:.2} items/s and L lanes L times that",
        wait.as_millis(), 1.0 / wait.as_secs_f64());
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

async fn measure(
    lanes: usize,
    items: usize,
    wait: Duration,
    jitter: f64,
    renewals: u32,
) -> Figures {
    let schema = pg::PgSchema::new();
    let db: Db = schema.url.parse().unwrap();
    let store = Store::open(db.clone()).await.unwrap();
    for i in 0..items {
        store
            .enqueue(WorkKind::Batch, &serde_json::json!({ "item": i }))
            .await
            .unwrap();
    }
    // Every lane connected and warm before the clock starts.
    let mut stores = Vec::new();
    for _ in 0..lanes {
        let s = Store::open(db.clone()).await.unwrap();
        s.work_items().await.unwrap();
        stores.push(s);
    }
    let start = Instant::now();
    let tasks: Vec<_> = stores
        .into_iter()
        .enumerate()
        .map(|(l, s)| {
            let waits = Waits { mean: wait, jitter };
            tokio::spawn(lane(s, format!("lane{l}"), waits, renewals))
        })
        .collect();
    let (mut done, mut claim, mut renew, mut finish) =
        (0, Duration::ZERO, Duration::ZERO, Duration::ZERO);
    for t in tasks {
        let (n, c, r, f) = t.await.unwrap();
        done += n;
        claim += c;
        renew += r;
        finish += f;
    }
    let wall = start.elapsed();
    assert_eq!(done, items, "every item done once");
    store.close().await;
    let per = |d: Duration| d / items as u32;
    Figures {
        lanes,
        jitter,
        items,
        wall,
        store_per_item: per(claim + renew + finish),
        claim: per(claim),
        renew: per(renew),
        finish: per(finish),
    }
}

/// One lane: claims until the queue is empty. Returns items done and the
/// time spent claiming (the final, empty claim included), renewing and
/// finishing.
/// Each item's wait: `mean` within ±`jitter` of it, spread evenly over
/// that range by the golden-ratio sequence of the item's number, so any
/// run of items has nearly the mean wait and the one-lane baseline is not
/// luckier or unluckier than the rest. A property of the item, not of the
/// lane that takes it: lanes that finish early take more, as on a rig.
#[derive(Clone, Copy)]
struct Waits {
    mean: Duration,
    jitter: f64,
}

impl Waits {
    fn of(&self, item: usize) -> Duration {
        let unit = (item as f64 * 0.618_033_988_749_895).fract();
        self.mean.mul_f64(1.0 + self.jitter * (2.0 * unit - 1.0))
    }
}

async fn lane(
    store: Store,
    name: String,
    waits: Waits,
    renewals: u32,
) -> (usize, Duration, Duration, Duration) {
    let owner = Owner::current();
    let (mut done, mut claim, mut renew, mut finish) =
        (0, Duration::ZERO, Duration::ZERO, Duration::ZERO);
    loop {
        let t = Instant::now();
        let item = store.claim_work(&name, &owner, 60_000).await.unwrap();
        claim += t.elapsed();
        let Some(item) = item else { break };
        let number = item.item["item"].as_u64().expect("an item's number") as usize;
        let slice = waits.of(number) / (renewals + 1);
        for _ in 0..renewals {
            tokio::time::sleep(slice).await;
            let t = Instant::now();
            assert!(store.renew_lease(&item, 60_000).await.unwrap());
            renew += t.elapsed();
        }
        tokio::time::sleep(slice).await;
        let t = Instant::now();
        assert!(store.finish_work(&item, None).await.unwrap());
        finish += t.elapsed();
        done += 1;
    }
    store.close().await;
    (done, claim, renew, finish)
}
