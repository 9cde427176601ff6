//! The target guard: load goes only to loopback, or to a test-cluster range the user names
//! with `--allow-cidr`, and that range must lie inside private address space (RFC 1918,
//! shared CGNAT 100.64.0.0/10, IPv6 ULA fc00::/7) — never the internet.

use ipnet::IpNet;
use std::net::IpAddr;

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum GuardError {
    #[error("refusing to send load to {0}: only loopback (127.0.0.0/8, ::1) or a range given with --allow-cidr")]
    NotAllowed(IpAddr),
    #[error("--allow-cidr {0:?} is not a CIDR range (e.g. 10.96.0.0/12)")]
    BadCidr(String),
    #[error("--allow-cidr {0} is not inside private address space (10/8, 172.16/12, 192.168/16, 100.64/10, fc00::/7)")]
    NotPrivate(IpNet),
}

impl GuardError {
    pub fn category(&self) -> &'static str {
        match self {
            GuardError::NotAllowed(_) => "target_refused",
            GuardError::BadCidr(_) | GuardError::NotPrivate(_) => "allow_cidr_invalid",
        }
    }
}

const PRIVATE: [&str; 5] = [
    "10.0.0.0/8",
    "172.16.0.0/12",
    "192.168.0.0/16",
    "100.64.0.0/10",
    "fc00::/7",
];

/// Parses an `--allow-cidr` value and checks it is a private range.
pub fn parse_allow_cidr(s: &str) -> Result<IpNet, GuardError> {
    let net: IpNet = s
        .trim()
        .parse()
        .map_err(|_| GuardError::BadCidr(s.to_string()))?;
    let private = PRIVATE.iter().any(|p| {
        p.parse::<IpNet>()
            .map(|p| p.contains(&net))
            .unwrap_or(false)
    });
    if private {
        Ok(net)
    } else {
        Err(GuardError::NotPrivate(net))
    }
}

fn is_loopback(ip: &IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => {
            v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
    }
}

/// Every address the target resolves to must be allowed, so a name cannot smuggle an
/// outside address in among loopback ones.
pub fn check_targets(addrs: &[IpAddr], allowed: &[IpNet]) -> Result<(), GuardError> {
    for ip in addrs {
        let ok = is_loopback(ip) || allowed.iter().any(|net| net.contains(ip));
        if !ok {
            return Err(GuardError::NotAllowed(*ip));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn loopback_is_allowed() {
        for a in ["127.0.0.1", "127.1.2.3", "::1", "::ffff:127.0.0.1"] {
            assert_eq!(check_targets(&[ip(a)], &[]), Ok(()), "{a}");
        }
    }

    #[test]
    fn everything_else_is_refused_without_allow_cidr() {
        for a in [
            "10.96.0.10",
            "192.168.1.1",
            "8.8.8.8",
            "0.0.0.0",
            "::",
            "2001:db8::1",
        ] {
            let err = check_targets(&[ip(a)], &[]).unwrap_err();
            assert_eq!(err, GuardError::NotAllowed(ip(a)));
            assert_eq!(err.category(), "target_refused");
        }
    }

    #[test]
    fn one_outside_address_spoils_the_lot() {
        let err = check_targets(&[ip("127.0.0.1"), ip("93.184.216.34")], &[]).unwrap_err();
        assert_eq!(err, GuardError::NotAllowed(ip("93.184.216.34")));
    }

    #[test]
    fn allow_cidr_admits_its_range_only() {
        let net = parse_allow_cidr("10.96.0.0/12").unwrap();
        assert_eq!(check_targets(&[ip("10.96.0.10")], &[net]), Ok(()));
        assert!(check_targets(&[ip("10.200.0.1")], &[net]).is_err());
        assert!(check_targets(&[ip("1.1.1.1")], &[net]).is_err());
    }

    #[test]
    fn allow_cidr_must_be_private() {
        for s in [
            "0.0.0.0/0",
            "8.8.8.0/24",
            "10.0.0.0/7",
            "::/0",
            "2001:db8::/32",
        ] {
            assert!(
                matches!(parse_allow_cidr(s), Err(GuardError::NotPrivate(_))),
                "{s}"
            );
        }
        for s in [
            "10.244.0.0/16",
            "192.168.49.0/24",
            "100.64.0.0/10",
            "fd00::/8",
        ] {
            assert!(parse_allow_cidr(s).is_ok(), "{s}");
        }
        assert_eq!(
            parse_allow_cidr("ten-dot"),
            Err(GuardError::BadCidr("ten-dot".into()))
        );
    }
}
