//! Request queue time from the load balancer's `X-Request-Start` header: how long a request
//! waited between the router and the app picking it up (what Judoscale and New Relic call
//! request queueing). The server-side duration cannot see this wait; it is the signal for "are
//! there enough threads".
//!
//! What the routers in front of Rails apps write (docs/experiment-reference.md#queuetime has the
//! configuration lines): nginx `t=${msec}` (seconds with a millisecond fraction); HAProxy
//! `t=%Ts%ms` and Envoy/Istio/Contour `t=%START_TIME(%s%3f)%` (integer milliseconds); Heroku's
//! router a bare integer of milliseconds; Apache `%t` (`t=` + microseconds). `X-Queue-Start` is
//! the older name New Relic also reads, in the same formats. AWS ALB writes neither: its
//! `X-Amzn-Trace-Id: Root=1-<8 hex digits of epoch seconds>-…` is the only stamp it adds, at
//! one-second resolution, which is read as a last resort and reported as coarse.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub const HEADER: &str = "x-request-start";
/// The older name of the same header, read when `X-Request-Start` is absent.
pub const QUEUE_START: &str = "x-queue-start";
/// AWS ALB's trace header: its root id carries the arrival second.
pub const AMZN_TRACE_ID: &str = "x-amzn-trace-id";

/// Earliest plausible stamp (2001-09-09): smaller values are garbage, not old requests.
const EARLIEST_SECS: f64 = 1e9;

/// A router's stamp: seconds since the Unix epoch, and whether it only has whole seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stamp {
    pub secs: f64,
    /// One-second resolution (integer seconds, or ALB's trace id): a queue time read from it is
    /// off by up to a second, far more than the waits it is meant to show.
    pub coarse: bool,
}

/// The header's time as seconds since the Unix epoch, or `None` for anything unparsable.
///
/// Accepts `t=` or a bare number, as seconds with a fraction (`1700000000.123`, nginx's
/// `${msec}`) or as an integer of seconds, milliseconds, microseconds or nanoseconds — the
/// unit is told apart by magnitude, as the agents that read this header do. A list (a second
/// proxy appended its own stamp) is read at its first, the earliest, entry.
pub fn parse(value: &str) -> Option<f64> {
    parse_stamp(value).map(|s| s.secs)
}

/// [`parse`], keeping whether the stamp has only whole seconds.
pub fn parse_stamp(value: &str) -> Option<Stamp> {
    let v = value.split(',').next().unwrap_or("").trim();
    let v = v.strip_prefix("t=").unwrap_or(v).trim();
    if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return None;
    }
    let n: f64 = v.parse().ok()?;
    // Today is ~1.7e9 s = 1.7e12 ms = 1.7e15 µs = 1.7e18 ns; the cut-offs sit between.
    let (secs, coarse) = if n < 1e11 {
        (n, !v.contains('.'))
    } else if n < 1e14 {
        (n / 1e3, false)
    } else if n < 1e17 {
        (n / 1e6, false)
    } else {
        (n / 1e9, false)
    };
    (secs.is_finite() && secs >= EARLIEST_SECS).then_some(Stamp { secs, coarse })
}

/// The arrival second in ALB's `X-Amzn-Trace-Id` (`Root=1-5759e988-bd862e3fe1be46a994272793`,
/// possibly after `Self=…;`): the 8 hex digits after `Root=1-`.
pub fn parse_amzn_trace_id(value: &str) -> Option<Stamp> {
    let root = value
        .split(';')
        .find_map(|part| part.trim().strip_prefix("Root="))?;
    let mut fields = root.split('-');
    let (Some("1"), Some(hex)) = (fields.next(), fields.next()) else {
        return None;
    };
    if hex.len() != 8 {
        return None;
    }
    let secs = u32::from_str_radix(hex, 16).ok()? as f64;
    (secs >= EARLIEST_SECS).then_some(Stamp { secs, coarse: true })
}

/// Time from the header's stamp to `now`, clamped at zero (a proxy's clock may run ahead).
pub fn since(header_secs: f64, now: SystemTime) -> Duration {
    let now = now
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64();
    Duration::try_from_secs_f64((now - header_secs).max(0.0)).unwrap_or_default()
}

/// The request's arrival stamp: `X-Request-Start`, else `X-Queue-Start`, else ALB's trace id;
/// `None` without a usable one.
pub fn stamp_from_headers(headers: &http::HeaderMap) -> Option<Stamp> {
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    text(HEADER)
        .and_then(parse_stamp)
        .or_else(|| text(QUEUE_START).and_then(parse_stamp))
        .or_else(|| text(AMZN_TRACE_ID).and_then(parse_amzn_trace_id))
}

/// The request's arrival time in seconds since the epoch (see [`stamp_from_headers`]).
pub fn from_headers(headers: &http::HeaderMap) -> Option<f64> {
    stamp_from_headers(headers).map(|s| s.secs)
}

/// What AWS ALB sends instead (no `X-Request-Start`): `X-Amzn-Trace-Id` whose root id carries
/// the arrival second, `Root=1-<8 hex digits>-<24 hex digits>`; `seq` fills the unique part.
pub fn alb_trace_id(now: SystemTime, seq: u64) -> String {
    let secs = now.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
    format!("Root=1-{:08x}-{:024x}", secs as u32, seq)
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

    #[test]
    fn what_each_router_writes() {
        // nginx t=${msec}; HAProxy t=%Ts%ms; Envoy t=%START_TIME(%s%3f)%; Heroku; Apache %t.
        for (v, secs, coarse) in [
            ("t=1700000000.123", 1_700_000_000.123, false),
            ("t=1700000000123", 1_700_000_000.123, false),
            ("1700000000123", 1_700_000_000.123, false),
            ("t=1700000000123456", 1_700_000_000.123456, false),
            ("t=1700000000", 1_700_000_000.0, true),
            ("t=1700000000123, t=1700000000200", 1_700_000_000.123, false),
        ] {
            let s = parse_stamp(v).unwrap_or_else(|| panic!("{v:?} not parsed"));
            assert!((s.secs - secs).abs() < 1e-6, "{v:?}: {}", s.secs);
            assert_eq!(s.coarse, coarse, "{v:?}");
        }
    }

    #[test]
    fn the_alb_trace_id_sent_reads_back_as_its_second() {
        let now = UNIX_EPOCH + Duration::from_millis(1_700_000_000_987);
        let v = alb_trace_id(now, 7);
        assert_eq!(v, "Root=1-6553f100-000000000000000000000007");
        let s = parse_amzn_trace_id(&v).unwrap();
        assert_eq!(s.secs, 1_700_000_000.0);
        assert!(s.coarse);
    }

    #[test]
    fn alb_trace_id_is_a_coarse_last_resort() {
        let alb = "Root=1-6553f100-bd862e3fe1be46a994272793";
        let s = parse_amzn_trace_id(alb).unwrap();
        assert_eq!(s.secs, 1_700_000_000.0);
        assert!(s.coarse);
        let s = parse_amzn_trace_id("Self=1-67891234-12456789abcdef012345678;Root=1-6553f100-abc")
            .unwrap();
        assert_eq!(s.secs, 1_700_000_000.0);
        for bad in [
            "",
            "Root=2-6553f100-x",
            "Root=1-6553f1-x",
            "Root=1-zzzzzzzz-x",
            "1-6553f100",
        ] {
            assert_eq!(parse_amzn_trace_id(bad), None, "{bad:?}");
        }
        let mut h = http::HeaderMap::new();
        h.insert(AMZN_TRACE_ID, alb.parse().unwrap());
        assert_eq!(from_headers(&h), Some(1_700_000_000.0));
        // X-Queue-Start, then X-Request-Start, win over the coarse trace id.
        h.insert(QUEUE_START, "t=1700000000500".parse().unwrap());
        assert!(close(from_headers(&h), 1_700_000_000.5));
        h.insert(HEADER, "t=1700000000100".parse().unwrap());
        assert!(close(from_headers(&h), 1_700_000_000.1));
    }
}
