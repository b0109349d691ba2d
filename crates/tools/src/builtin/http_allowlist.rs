//! `http_get`'s allow-list: which host and port a URL may name, and which resolved addresses
//! count as public.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use reqwest::Url;

/// A bad allow-list entry, named so that the config file can be fixed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("http_get allow-list entry \"{entry}\" is invalid: {reason}")]
pub struct AllowListError {
    /// The entry as written.
    pub entry: String,
    /// What is wrong with it.
    pub reason: String,
}

/// One parsed allow-list entry: a host and, optionally, a port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowedHost {
    host: HostPattern,
    /// `None`: only the scheme's default port (80 for http, 443 for https).
    port: Option<u16>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum HostPattern {
    /// Exactly this name (lowercase, no trailing dot).
    Name(String),
    /// Any subdomain of this name (from `*.name`), not the name itself.
    Subdomains(String),
    /// This address, named as a literal: an explicit permission even for a private one.
    Ip(IpAddr),
}

impl AllowedHost {
    /// Parse `docs.rs`, `*.example.com`, `127.0.0.1:8080`, `[::1]:8080`, `localhost:3000`.
    ///
    /// # Errors
    /// An empty entry, `*` or another wildcard than a leading `*.`, a URL (scheme, path,
    /// query, credentials), a port outside 1–65535, or characters no host name has.
    pub fn parse(entry: &str) -> Result<AllowedHost, AllowListError> {
        let fail = |reason: &str| AllowListError {
            entry: entry.to_string(),
            reason: reason.to_string(),
        };
        let text = entry.trim();
        if text.is_empty() {
            return Err(fail("it is empty; give a host name such as docs.rs"));
        }
        if text.contains("://") || text.contains(['/', '?', '#', '@']) {
            return Err(fail(
                "give a host with an optional port (docs.rs, localhost:8080), not a URL",
            ));
        }
        if let Ok(ip) = text.parse::<Ipv6Addr>() {
            return Ok(AllowedHost {
                host: HostPattern::Ip(IpAddr::V6(ip)),
                port: None,
            });
        }
        let (host, port) = split_port(text).map_err(|reason| fail(&reason))?;
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        let pattern = if let Ok(ip) = host.trim_start_matches('[').trim_end_matches(']').parse() {
            HostPattern::Ip(ip)
        } else if let Some(domain) = host.strip_prefix("*.") {
            check_name(domain).map_err(|reason| fail(&reason))?;
            HostPattern::Subdomains(domain.to_string())
        } else {
            check_name(&host).map_err(|reason| fail(&reason))?;
            HostPattern::Name(host)
        };
        Ok(AllowedHost {
            host: pattern,
            port,
        })
    }

    /// Whether the entry names this URL's host (whatever the port).
    pub fn matches_host(&self, url: &Url) -> bool {
        let Some(host) = url.host_str() else {
            return false;
        };
        match (&self.host, url_ip(url)) {
            (HostPattern::Ip(ip), Some(host_ip)) => *ip == host_ip,
            (HostPattern::Name(name), None) => {
                host.trim_end_matches('.').eq_ignore_ascii_case(name)
            }
            (HostPattern::Subdomains(domain), None) => {
                let host = host.trim_end_matches('.').to_ascii_lowercase();
                host.ends_with(&format!(".{domain}"))
            }
            _ => false,
        }
    }

    /// Whether the entry allows this URL's port: the one it names, or the scheme's default.
    pub fn matches_port(&self, url: &Url) -> bool {
        match self.port {
            Some(port) => url.port_or_known_default() == Some(port),
            // `Url` drops an explicit default port, so `port()` is `None` exactly then.
            None => url.port().is_none(),
        }
    }
}

/// The URL's host when it is an IP literal (`Url` has already normalized `0x7f.1` and the
/// like to `127.0.0.1`, and writes IPv6 in brackets).
pub(crate) fn url_ip(url: &Url) -> Option<IpAddr> {
    url.host_str()?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse()
        .ok()
}

/// `host[:port]` or `[v6]:port`; a port must be 1–65535.
fn split_port(text: &str) -> Result<(&str, Option<u16>), String> {
    let (host, port) = if let Some(rest) = text.strip_prefix('[') {
        let Some((v6, after)) = rest.split_once(']') else {
            return Err("an IPv6 address in brackets needs its closing `]`".to_string());
        };
        match after.strip_prefix(':') {
            Some(port) => (v6, Some(port)),
            None if after.is_empty() => (v6, None),
            None => return Err(format!("unexpected `{after}` after the address")),
        }
    } else {
        match text.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (text, None),
        }
    };
    let port = match port {
        None => None,
        Some(port) => match port.parse::<u16>() {
            Ok(p) if p > 0 => Some(p),
            _ => return Err(format!("port `{port}` is not a number from 1 to 65535")),
        },
    };
    Ok((host, port))
}

/// A host name: dot-separated labels of letters, digits, `-` and `_`.
fn check_name(name: &str) -> Result<(), String> {
    if name.contains('*') {
        return Err(
            "a wildcard is allowed only as a leading `*.` (e.g. *.example.com)".to_string(),
        );
    }
    let valid = !name.is_empty()
        && name.split('.').all(|label| {
            !label.is_empty()
                && label
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'))
        });
    if valid {
        Ok(())
    } else {
        Err("not a host name (use letters, digits, `-`, `_` and dots, e.g. docs.rs)".to_string())
    }
}

/// Whether `ip` is a public unicast address: not loopback, private, link-local, unspecified,
/// multicast, broadcast, carrier-grade NAT, reserved or documentation space — also when it is
/// embedded in an IPv6 address (v4-mapped, NAT64, 6to4).
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => is_public_v6(v6),
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    !(ip.is_private()
        || ip.is_loopback()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_multicast()
        || ip.is_broadcast()
        || ip.is_documentation()
        || a == 0
        || (a == 100 && (64..128).contains(&b))
        || (a == 192 && b == 0 && c == 0)
        || (a == 198 && (18..20).contains(&b))
        || a >= 240)
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return is_public_v4(v4);
    }
    let s = ip.segments();
    let embedded_v4 = |hi: u16, lo: u16| {
        let [a, b] = hi.to_be_bytes();
        let [c, d] = lo.to_be_bytes();
        Ipv4Addr::new(a, b, c, d)
    };
    match s[0] {
        // NAT64 (64:ff9b::/96) reaches the IPv4 address in its last 32 bits.
        0x0064 if s[1] == 0xff9b => is_public_v4(embedded_v4(s[6], s[7])),
        // 6to4 (2002::/16) carries an IPv4 address in bits 16..48.
        0x2002 => is_public_v4(embedded_v4(s[1], s[2])),
        // Teredo (2001::/32) and documentation (2001:db8::/32).
        0x2001 if s[1] == 0 || s[1] == 0x0db8 => false,
        first => {
            !(ip.is_loopback()
                || ip.is_unspecified()
                || ip.is_multicast()
                // ::/96, the deprecated IPv4-compatible form, and the rest of ::/16.
                || first == 0
                || (first & 0xfe00) == 0xfc00
                || (first & 0xffc0) == 0xfe80
                || (first & 0xffc0) == 0xfec0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_parse_with_optional_ports() {
        let url = |u: &str| Url::parse(u).unwrap();
        let docs = AllowedHost::parse("docs.rs").unwrap();
        assert!(docs.matches_host(&url("https://DOCS.rs./x")));
        assert!(docs.matches_port(&url("https://docs.rs:443/")));
        assert!(!docs.matches_port(&url("https://docs.rs:8443/")));
        let local = AllowedHost::parse("localhost:3000").unwrap();
        assert!(local.matches_port(&url("http://localhost:3000/")));
        assert!(!local.matches_port(&url("http://localhost/")));
        let v6 = AllowedHost::parse("[::1]:8080").unwrap();
        assert!(v6.matches_host(&url("http://[::1]:8080/")));
        assert!(v6.matches_port(&url("http://[::1]:8080/")));
        assert!(
            AllowedHost::parse("::1")
                .unwrap()
                .matches_host(&url("http://[::1]/"))
        );
        let sub = AllowedHost::parse("*.example.com").unwrap();
        assert!(sub.matches_host(&url("https://a.example.com/")));
        assert!(!sub.matches_host(&url("https://example.com/")));
    }

    #[test]
    fn bad_entries_are_refused_with_a_reason() {
        for (entry, reason) in [
            ("", "it is empty"),
            ("   ", "it is empty"),
            ("*", "wildcard"),
            ("a.*.com", "wildcard"),
            ("https://docs.rs", "not a URL"),
            ("docs.rs/path", "not a URL"),
            ("user@docs.rs", "not a URL"),
            ("docs.rs:0", "1 to 65535"),
            ("docs.rs:http", "1 to 65535"),
            ("docs.rs:70000", "1 to 65535"),
            ("bad host", "not a host name"),
            ("[::1", "closing"),
        ] {
            let err = AllowedHost::parse(entry).unwrap_err();
            assert_eq!(err.entry, entry);
            assert!(err.reason.contains(reason), "{entry}: {}", err.reason);
        }
    }

    #[test]
    fn only_public_unicast_addresses_are_public() {
        for private in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "224.0.0.1",
            "255.255.255.255",
            "::1",
            "::",
            "fe80::1",
            "fd00::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "64:ff9b::a9fe:a9fe",
            "2002:7f00:1::",
            "::7f00:1",
        ] {
            assert!(!is_public(private.parse().unwrap()), "{private}");
        }
        for public in [
            "93.184.216.34",
            "8.8.8.8",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
        ] {
            assert!(is_public(public.parse().unwrap()), "{public}");
        }
    }
}
