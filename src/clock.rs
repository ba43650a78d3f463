//! UTC timestamps as assay stores them: text, `YYYY-MM-DDTHH:MM:SS.sssZ`.
//!
//! Taken from this machine's clock and written as text, so both store
//! backends hold the same thing and order it the same way (the text sorts
//! as the time does).

use std::time::{SystemTime, UNIX_EPOCH};

/// Now, to the millisecond, as the store writes it.
pub fn utc_now() -> String {
    format_utc_ms(epoch_ms())
}

/// Now, to the second (`YYYY-MM-DDTHH:MM:SSZ`), for what people read.
pub fn utc_now_secs() -> String {
    let ms = epoch_ms();
    let (date, time) = civil(ms / 1000);
    format!("{date}T{time}Z")
}

fn epoch_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Formats milliseconds since the epoch.
pub fn format_utc_ms(ms: u64) -> String {
    let (date, time) = civil(ms / 1000);
    format!("{date}T{time}.{:03}Z", ms % 1000)
}

/// Seconds since the epoch of a stored timestamp (with or without
/// milliseconds); `None` if it is not one.
pub fn parse_utc(s: &str) -> Option<f64> {
    let s = s.strip_suffix('Z')?;
    let (date, time) = s.split_once('T')?;
    let mut d = date.splitn(3, '-').map(|p| p.parse::<i64>().ok());
    let (y, m, day) = (d.next()??, d.next()??, d.next()??);
    let mut t = time.splitn(3, ':');
    let h: i64 = t.next()?.parse().ok()?;
    let min: i64 = t.next()?.parse().ok()?;
    let sec: f64 = t.next()?.parse().ok()?;
    if !(1..=12).contains(&m) || !(1..=31).contains(&day) {
        return None;
    }
    let days = days_from_civil(y, m, day);
    Some((days * 86_400 + h * 3600 + min * 60) as f64 + sec)
}

/// (`YYYY-MM-DD`, `HH:MM:SS`) of seconds since the epoch
/// (civil-from-days, proleptic Gregorian).
fn civil(secs: u64) -> (String, String) {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (
        format!("{year:04}-{month:02}-{day:02}"),
        format!("{:02}:{:02}:{:02}", rem / 3600, rem % 3600 / 60, rem % 60),
    )
}

fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
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
