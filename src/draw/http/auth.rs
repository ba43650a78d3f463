//! The pool's endpoint and key, as async-openai asks for them. The key
//! lives in a `SecretString` and leaves it only for the one header marked
//! sensitive.

use async_openai::config::Config;
use reqwest::header::{HeaderMap, HeaderValue, AUTHORIZATION};
use secrecy::{ExposeSecret, SecretString};

/// The pool's endpoint and key, as async-openai asks for them.
#[derive(Clone)]
pub(super) struct PoolAuth {
    base: String,
    key: Option<SecretString>,
    /// What `api_key` returns for a pool without a key.
    none: SecretString,
}

impl PoolAuth {
    /// The endpoint under `base_url` with `key`, if it can be sent at all.
    pub(super) fn new(base_url: &str, key: Option<SecretString>) -> Result<PoolAuth, String> {
        if key.as_ref().is_some_and(|k| bearer(k).is_none()) {
            return Err("the key holds characters a header cannot carry".into());
        }
        Ok(PoolAuth {
            base: base_url.trim_end_matches('/').to_owned(),
            key,
            none: SecretString::from(String::new()),
        })
    }
}

/// The `Authorization` value for `key`, marked sensitive so that no
/// `Debug` of the headers shows it; `None` if a header cannot carry it.
fn bearer(key: &SecretString) -> Option<HeaderValue> {
    let mut value = HeaderValue::from_str(&format!("Bearer {}", key.expose_secret())).ok()?;
    value.set_sensitive(true);
    Some(value)
}

impl Config for PoolAuth {
    fn headers(&self) -> HeaderMap {
        let mut headers = HeaderMap::new();
        // Checked in `PoolAuth::new`.
        if let Some(value) = self.key.as_ref().and_then(bearer) {
            headers.insert(AUTHORIZATION, value);
        }
        headers
    }

    fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    fn query(&self) -> Vec<(&str, &str)> {
        Vec::new()
    }

    fn api_base(&self) -> &str {
        &self.base
    }

    fn api_key(&self) -> &SecretString {
        self.key.as_ref().unwrap_or(&self.none)
    }
}
