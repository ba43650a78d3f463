//! The repair tests' model: the test gateway serving one scripted model as
//! the alias `fixer`, a pools file with one pool of that name pointing at
//! it, and what the gateway was asked. A test writes its own script (which
//! replies, answered to which prompt); this is the plumbing around it.

#![allow(dead_code)]

use std::path::PathBuf;

use assay_gateway::{Config, Gateway, Model, Recorded};

use super::Scratch;

/// The one pool's name, and the gateway's alias for the model behind it.
pub const FIXER: &str = "fixer";

/// The sampling preset the pool sends.
const PRESET: &str = "sampling = { temperature = 0.6, top_p = 0.95, top_k = 20, seed = 1 }";

/// A recorded reply of `content`, with no reasoning.
pub fn reply(content: &str) -> Recorded {
    Recorded {
        content: content.into(),
        reasoning: None,
    }
}

/// The gateway on a thread of its own, serving `model` as [`FIXER`].
pub fn serve(model: Model) -> Gateway {
    Gateway::start_on_thread(Config::new().model(FIXER, model)).unwrap()
}

/// `pools.toml` in the scratch directory: the pool [`FIXER`] on `gw`, one
/// request in flight, so the gateway answers in the order asked.
pub fn pools_file(s: &Scratch, gw: &Gateway) -> PathBuf {
    s.write(
        "pools.toml",
        &format!(
            "[pools.{FIXER}]\nbase_url = \"{}\"\nmodel = \"{FIXER}\"\nmax_in_flight = 1\n{PRESET}\n",
            gw.base_url()
        ),
    )
}

/// The user messages the gateway received, in order.
pub fn asked(gw: &Gateway) -> Vec<String> {
    gw.received()
        .iter()
        .flat_map(|r| {
            r.body["messages"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|m| m["content"].as_str().map(str::to_owned))
                .collect::<Vec<_>>()
        })
        .collect()
}
