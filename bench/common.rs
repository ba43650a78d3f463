//! Shared by the draw benchmarks: build HTTP pools against a gateway and
//! drive one draw to its end, storing every reply as the pipeline does.

use std::time::{Duration, Instant};

use assay::draw::http::HttpPool;
use assay::draw::pools::PoolConfig;
use assay::draw::{DrawEvent, EarlyStop, Plan};
use assay::store::{NewBatch, Store};
use assay::support::progress::Progress;

pub fn pool(name: &str, base_url: &str, model: &str, in_flight: usize) -> HttpPool {
    let cfg: PoolConfig = toml::from_str(&format!(
        "base_url = \"{base_url}\"\nmodel = \"{model}\"\nmax_in_flight = {in_flight}\n\
         sampling = {{ temperature = 0.6 }}\n"
    ))
    .unwrap();
    HttpPool::new(name, cfg, None, "write double", EarlyStop::Never).unwrap()
}

pub struct Drew {
    pub wall: Duration,
    pub replies: usize,
    pub failed: usize,
    pub cancelled: usize,
    pub chunks: u64,
    /// Each reply's measured latency (ms), request start to stream end.
    pub latencies: Vec<f64>,
    pub by_pool: Vec<(String, usize)>,
}

/// Draws `n` replies with `plan`, storing each in a fresh SQLite file.
pub async fn draw(plan: &Plan, n: usize) -> Drew {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("bench.db")).await.unwrap();
    let batch = store
        .begin_batch(&NewBatch {
            task: "bench",
            spec_path: std::path::Path::new("bench"),
            pool: &plan.label(),
            n,
            draw: None,
        })
        .await
        .unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::channel(64);
    let started = Instant::now();
    let drawing = {
        let plan = plan.clone();
        tokio::spawn(async move { plan.draw(n, 0, tx, &Progress::hidden()).await })
    };
    let mut drew = Drew {
        wall: Duration::ZERO,
        replies: 0,
        failed: 0,
        cancelled: 0,
        chunks: 0,
        latencies: Vec::new(),
        by_pool: Vec::new(),
    };
    // As the pipeline does: what arrived together goes in one transaction.
    while let Some(e) = rx.recv().await {
        let mut events = vec![e];
        while let Ok(more) = rx.try_recv() {
            events.push(more);
        }
        let mut arrived = Vec::new();
        for e in events {
            match e {
                DrawEvent::Reply(d) => {
                    drew.replies += 1;
                    drew.failed += usize::from(!d.reply.outcome.is_ok());
                    drew.chunks += d.reply.chunks.unwrap_or(0);
                    drew.latencies.extend(d.reply.latency_ms);
                    match drew.by_pool.iter_mut().find(|(p, _)| *p == d.pool) {
                        Some((_, k)) => *k += 1,
                        None => drew.by_pool.push((d.pool.clone(), 1)),
                    }
                    arrived.push(d);
                }
                DrawEvent::Cancelled { pool, attempts } => {
                    store
                        .record_cancelled(batch, &pool, &attempts)
                        .await
                        .unwrap();
                    drew.cancelled += 1;
                }
                DrawEvent::PoolStopped { pool, reason } => panic!("pool {pool} stopped: {reason}"),
            }
        }
        store.record_draws(batch, &arrived).await.unwrap();
    }
    drawing.await.unwrap().unwrap();
    drew.wall = started.elapsed();
    store.close().await;
    drew
}

/// The tiny fixture's replies, the gateway's corpus.
pub fn corpus() -> Vec<assay_gateway::Recorded> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/tiny/replies.jsonl"
    );
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            assay_gateway::Recorded {
                content: v["content"].as_str().unwrap_or_default().to_owned(),
                reasoning: None,
            }
        })
        .collect()
}

pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}
