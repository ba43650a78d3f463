//! The transport async-openai is given: one plain send per call, never a
//! retry, and every non-2xx response handed back whole ([`HttpFailure`]:
//! status, `Retry-After` in either of its forms, the body) for the pool's
//! own retry policy to judge.

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, SystemTime};

use async_openai::error::OpenAIError;
use async_openai::middleware::HttpRequestFactory;

/// Error bodies are kept up to this many bytes.
pub(super) const BODY_LIMIT: usize = 4096;

/// A non-2xx response, kept whole for the caller to record.
#[derive(Debug)]
pub(super) struct HttpFailure {
    pub(super) status: u16,
    pub(super) retry_after: Option<Duration>,
    pub(super) body: String,
}

impl std::fmt::Display for HttpFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HTTP {}", self.status)
    }
}

impl std::error::Error for HttpFailure {}

/// The transport: one plain send per call, no retry, non-2xx as
/// [`HttpFailure`].
#[derive(Clone)]
pub(super) struct NoRetry {
    pub(super) http: reqwest::Client,
}

type HttpFuture =
    Pin<Box<dyn Future<Output = Result<reqwest::Response, OpenAIError>> + Send + 'static>>;

impl tower::Service<HttpRequestFactory> for NoRetry {
    type Response = reqwest::Response;
    type Error = OpenAIError;
    type Future = HttpFuture;

    fn poll_ready(
        &mut self,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), OpenAIError>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, factory: HttpRequestFactory) -> HttpFuture {
        let http = self.http.clone();
        Box::pin(async move {
            let request = factory.build().await?;
            let response = http.execute(request).await?;
            let status = response.status();
            if status.is_success() {
                return Ok(response);
            }
            let retry_after = response
                .headers()
                .get(reqwest::header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| retry_after(v, SystemTime::now()));
            let body = match response.bytes().await {
                Ok(b) => truncate(String::from_utf8_lossy(&b).into_owned()),
                Err(e) => format!("(the body could not be read: {e})"),
            };
            Err(OpenAIError::Boxed(Box::new(HttpFailure {
                status: status.as_u16(),
                retry_after,
                body,
            })))
        })
    }
}

pub(super) fn truncate(mut s: String) -> String {
    if s.len() > BODY_LIMIT {
        let mut end = BODY_LIMIT;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
    s
}

/// The wait a `Retry-After` value asks for at `now`: delta-seconds (a
/// decimal fraction accepted too), or an HTTP date (one already past asks
/// for no wait). `None` when it is neither. A wait too long for a
/// `Duration` is the longest one, which no pool honours.
fn retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0)
            .then(|| Duration::try_from_secs_f64(secs).unwrap_or(Duration::MAX));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_in_delta_seconds() {
        let now = SystemTime::UNIX_EPOCH;
        let cases: &[(&str, Option<Duration>)] = &[
            ("120", Some(Duration::from_secs(120))),
            (" 0 ", Some(Duration::ZERO)),
            ("1.5", Some(Duration::from_millis(1500))),
            ("-1", None),
            ("NaN", None),
            ("inf", None),
            ("soon", None),
            ("", None),
            ("1e30", Some(Duration::MAX)),
        ];
        for (value, want) in cases {
            assert_eq!(retry_after(value, now), *want, "{value:?}");
        }
    }

    #[test]
    fn retry_after_as_an_http_date() {
        // Wed, 21 Oct 2015 07:28:00 GMT
        let at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_445_412_480);
        let before = |s| at - Duration::from_secs(s);
        let cases: &[(&str, SystemTime, Option<Duration>)] = &[
            (
                "Wed, 21 Oct 2015 07:28:00 GMT",
                before(90),
                Some(Duration::from_secs(90)),
            ),
            // RFC 9110 asks recipients to read the two obsolete forms too.
            (
                "Wednesday, 21-Oct-15 07:28:00 GMT",
                before(5),
                Some(Duration::from_secs(5)),
            ),
            (
                "Wed Oct 21 07:28:00 2015",
                before(5),
                Some(Duration::from_secs(5)),
            ),
            ("Wed, 21 Oct 2015 07:28:00 GMT", at, Some(Duration::ZERO)),
            (
                "Wed, 21 Oct 2015 07:28:00 GMT",
                at + Duration::from_secs(60),
                Some(Duration::ZERO),
            ),
            ("Wed, 32 Oct 2015 07:28:00 GMT", at, None),
        ];
        for (value, now, want) in cases {
            assert_eq!(retry_after(value, *now), *want, "{value:?}");
        }
    }

    #[test]
    fn a_body_is_cut_at_a_char_boundary() {
        let s = "é".repeat(BODY_LIMIT);
        let cut = truncate(s);
        assert!(cut.len() <= BODY_LIMIT && cut.len() >= BODY_LIMIT - 1);
        assert!(cut.chars().all(|c| c == 'é'));
        assert_eq!(truncate("short".into()), "short");
    }
}
