//! Request queue time from the load balancer's `X-Request-Start` header: how long a request
//! waited between the router and the app picking it up (Heroku router, nginx
//! `proxy_set_header X-Request-Start "t=${msec}"`; what Judoscale and New Relic call request
//! queueing). The server-side duration cannot see this wait; it is the signal for "are there
//! enough threads".

use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub const HEADER: &str = "x-request-start";

/// Earliest plausible stamp (2001-09-09): smaller values are garbage, not old requests.
const EARLIEST_SECS: f64 = 1e9;

/// The header's time as seconds since the Unix epoch, or `None` for anything unparsable.
///
/// Accepts `t=` or a bare number, as seconds with a fraction (`1700000000.123`, nginx's
/// `${msec}`) or as an integer of seconds, milliseconds, microseconds or nanoseconds — the
/// unit is told apart by magnitude, as the agents that read this header do.
pub fn parse(value: &str) -> Option<f64> {
    let v = value.trim();
    let v = v.strip_prefix("t=").unwrap_or(v).trim();
    if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return None;
    }
    let n: f64 = v.parse().ok()?;
    // Today is ~1.7e9 s = 1.7e12 ms = 1.7e15 µs = 1.7e18 ns; the cut-offs sit between.
    let secs = if n < 1e11 {
        n
    } else if n < 1e14 {
        n / 1e3
    } else if n < 1e17 {
        n / 1e6
    } else {
        n / 1e9
    };
    (secs.is_finite() && secs >= EARLIEST_SECS).then_some(secs)
}

/// Time from the header's stamp to `now`, clamped at zero (a proxy's clock may run ahead).
pub fn since(header_secs: f64, now: SystemTime) -> Duration {
    let now = now
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64();
    Duration::try_from_secs_f64((now - header_secs).max(0.0)).unwrap_or_default()
}

/// The request's `X-Request-Start`, parsed; `None` without a (usable) header.
pub fn from_headers(headers: &http::HeaderMap) -> Option<f64> {
    headers.get(HEADER)?.to_str().ok().and_then(parse)
}

/// The header value a load balancer would send now: `t=<unix milliseconds>`.
pub fn header_value(now: SystemTime) -> String {
    let ms = now
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis();
    format!("t={ms}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: Option<f64>, b: f64) -> bool {
        a.is_some_and(|a| (a - b).abs() < 1e-6)
    }

    #[test]
    fn parses_the_formats_seen_in_the_wild() {
        assert!(close(parse("t=1700000000123"), 1_700_000_000.123));
        assert!(close(parse("t=1700000000123456"), 1_700_000_000.123456));
        assert!(close(parse("t=1700000000.123"), 1_700_000_000.123));
        assert!(close(parse("1700000000123"), 1_700_000_000.123));
        assert!(close(parse(" t=1700000000 "), 1_700_000_000.0));
        assert!(close(
            parse("t=1700000000123456789"),
            1_700_000_000.123_456_7
        ));
    }

    #[test]
    fn garbage_is_ignored() {
        for bad in [
            "",
            "t=",
            "t=abc",
            "abc",
            "t=-1700000000123",
            "t=5",
            "t=1.2.3",
            "t=1e12",
            "t=0",
            "t=17000 00000",
            "t=1700000000123ms",
        ] {
            assert_eq!(parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn queue_time_is_clamped_at_zero() {
        let now = UNIX_EPOCH + Duration::from_millis(1_700_000_000_500);
        assert_eq!(since(1_700_000_000.1, now).as_millis(), 400);
        assert_eq!(since(1_700_000_001.0, now), Duration::ZERO);
    }

    #[test]
    fn header_round_trips() {
        let now = UNIX_EPOCH + Duration::from_millis(1_700_000_000_123);
        let v = header_value(now);
        assert_eq!(v, "t=1700000000123");
        assert!(close(parse(&v), 1_700_000_000.123));
        let mut h = http::HeaderMap::new();
        h.insert(HEADER, v.parse().unwrap());
        assert!(close(from_headers(&h), 1_700_000_000.123));
        assert_eq!(from_headers(&http::HeaderMap::new()), None);
    }
}
