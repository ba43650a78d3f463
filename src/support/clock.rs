//! UTC timestamps as assay stores them: text, `YYYY-MM-DDTHH:MM:SS.sssZ`.
//!
//! Taken from this machine's clock and written as text, so both store
//! backends hold the same thing and order it the same way (the text sorts
//! as the time does). The calendar is humantime's RFC 3339.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Now, to the millisecond, as the store writes it.
pub fn utc_now() -> String {
    format_utc_ms(epoch_ms())
}

/// Now, to the second (`YYYY-MM-DDTHH:MM:SSZ`), for what people read.
pub fn utc_now_secs() -> String {
    humantime::format_rfc3339_seconds(SystemTime::now()).to_string()
}

fn epoch_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Formats milliseconds since the epoch.
pub fn format_utc_ms(ms: u64) -> String {
    let at = UNIX_EPOCH + Duration::from_millis(ms);
    humantime::format_rfc3339_millis(at).to_string()
}

/// Seconds since the epoch of a stored timestamp (with or without
/// milliseconds); `None` if it is not one.
pub fn parse_utc(s: &str) -> Option<f64> {
    let at = humantime::parse_rfc3339(s).ok()?;
    Some(at.duration_since(UNIX_EPOCH).ok()?.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_format_as_sqlite_did() {
        assert_eq!(format_utc_ms(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(format_utc_ms(951_782_400_123), "2000-02-29T00:00:00.123Z");
        assert_eq!(format_utc_ms(4_107_542_399_999), "2100-02-28T23:59:59.999Z");
        assert_eq!(
            format_utc_ms((1_796_169_600 + 3_723) * 1000),
            "2026-12-02T01:02:03.000Z"
        );
    }

    #[test]
    fn stored_dates_parse_back() {
        for ms in [0, 951_782_400_123, 1_796_000_000_456, 4_107_542_399_999] {
            let back = parse_utc(&format_utc_ms(ms)).unwrap();
            assert!((back - ms as f64 / 1e3).abs() < 1e-6, "{ms}: {back}");
        }
        assert_eq!(parse_utc("2026-12-03T16:24:16Z"), Some(1_796_315_056.0));
        assert_eq!(parse_utc("2026-13-03T16:24:16Z"), None);
        assert_eq!(parse_utc("yesterday"), None);
    }
}
