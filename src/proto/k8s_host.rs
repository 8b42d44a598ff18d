//! Where the Kubernetes API server is, as `KUBERNETES_SERVICE_HOST` and
//! `KUBERNETES_SERVICE_PORT` say it (`--k8s-protect`): an IP literal, as
//! the kubelet writes it, or a DNS name, as AKS sets it for some pods and
//! users set it to skip a proxy path. Checked at start (a value that is
//! neither is a usage error); a name is looked up only when a request is
//! sent (`io::tls`), never on the way to the child's start. Which one it
//! is decides how the certificate is checked: an IP SAN for an address, a
//! DNS SAN (and SNI) for a name.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

/// The API server's host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Host {
    Ip(IpAddr),
    /// A syntactically valid DNS name (`is_dns_name`), as given: a
    /// trailing dot (an absolute name, never tried under the search
    /// domains) is kept for the lookup and left out of SNI by rustls.
    Name(String),
}

/// Longest DNS name, trailing dot included.
const NAME_LIMIT: usize = 253;
/// Longest DNS label.
const LABEL_LIMIT: usize = 63;

/// A DNS name as a host: labels of 1 to 63 letters, digits, `-` (not at
/// either end) and `_`, joined by dots, at most 253 bytes, an optional
/// trailing dot; the last label not a number (decimal or `0x` hex), which
/// a resolver might read as an IPv4 address. The rules rustls's
/// `DnsName` checks, so every name taken here is one TLS can verify.
pub fn is_dns_name(name: &str) -> bool {
    if name.is_empty() || name.len() > NAME_LIMIT {
        return false;
    }
    let bare = name.strip_suffix('.').unwrap_or(name);
    let label_ok = |l: &str| {
        let b = l.as_bytes();
        !b.is_empty()
            && b.len() <= LABEL_LIMIT
            && b.iter()
                .all(|c| c.is_ascii_alphanumeric() || *c == b'-' || *c == b'_')
            && b[0] != b'-'
            && b[b.len() - 1] != b'-'
    };
    let last = bare.rsplit('.').next().unwrap_or_default();
    let hex = last
        .strip_prefix("0x")
        .or_else(|| last.strip_prefix("0X"))
        .is_some_and(|h| h.bytes().all(|c| c.is_ascii_hexdigit()));
    let number = last.bytes().all(|c| c.is_ascii_digit()) || hex;
    bare.split('.').all(label_ok) && !number
}

impl FromStr for Host {
    type Err = String;

    /// An IP literal (an IPv6 one with or without brackets), else a DNS
    /// name; anything else is refused with a line that says what it is.
    fn from_str(text: &str) -> Result<Host, String> {
        let bare = text
            .strip_prefix('[')
            .and_then(|t| t.strip_suffix(']'))
            .unwrap_or(text);
        if let Ok(ip) = bare.parse::<IpAddr>() {
            return Ok(Host::Ip(ip));
        }
        if is_dns_name(text) {
            return Ok(Host::Name(text.to_string()));
        }
        Err(format!(
            "KUBERNETES_SERVICE_HOST {:?} is neither an IP address nor a DNS name",
            crate::util::text::escape(text, 80)
        ))
    }
}

impl Host {
    /// `host:port` for the Host header (`[v6]:port`).
    pub fn authority(&self, port: u16) -> String {
        match self {
            Host::Ip(IpAddr::V6(v6)) => format!("[{v6}]:{port}"),
            Host::Ip(ip) => format!("{ip}:{port}"),
            Host::Name(name) => format!("{name}:{port}"),
        }
    }
}

impl fmt::Display for Host {
    /// The host as it is looked up: the address, or the name as given.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Host::Ip(ip) => write!(f, "{ip}"),
            Host::Name(name) => f.write_str(name),
        }
    }
}

/// The API server's host and port from `KUBERNETES_SERVICE_HOST` and
/// `KUBERNETES_SERVICE_PORT` (443 when unset).
pub fn api_address(host: Option<&str>, port: Option<&str>) -> Result<(Host, u16), String> {
    let host = host
        .filter(|h| !h.is_empty())
        .ok_or("KUBERNETES_SERVICE_HOST is not set (not running in a Kubernetes pod?)")?;
    let host = host.parse::<Host>()?;
    let port = port.filter(|p| !p.is_empty()).unwrap_or("443");
    match port.parse::<u16>() {
        Ok(p) if p > 0 && port.bytes().all(|b| b.is_ascii_digit()) => Ok((host, p)),
        _ => Err(format!(
            "KUBERNETES_SERVICE_PORT {:?} is not a port",
            crate::util::text::escape(port, 20)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(text: &str) -> Result<Host, String> {
        text.parse()
    }

    #[test]
    fn addresses_as_the_kubelet_writes_them() {
        assert_eq!(
            host("10.96.0.1"),
            Ok(Host::Ip("10.96.0.1".parse().unwrap()))
        );
        let v6 = Host::Ip("fd00:10:96::1".parse().unwrap());
        assert_eq!(host("fd00:10:96::1").as_ref(), Ok(&v6));
        assert_eq!(host("[fd00:10:96::1]").as_ref(), Ok(&v6));
        assert_eq!(v6.authority(6443), "[fd00:10:96::1]:6443");
        assert_eq!(host("10.96.0.1").unwrap().authority(443), "10.96.0.1:443");
    }

    #[test]
    fn names_as_aks_and_users_set_them() {
        for name in [
            "kubernetes.default.svc",
            "kubernetes.default.svc.cluster.local.",
            "my-cluster-dns-1a2b3c4d.hcp.westeurope.azmk8s.io",
            "localhost",
            "API.Example.COM",
            "_internal.example.com",
            "1e100.net",
            "a",
        ] {
            let parsed = host(name).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(parsed, Host::Name(name.into()));
            assert_eq!(parsed.to_string(), name);
            assert_eq!(parsed.authority(443), format!("{name}:443"));
            // Every name taken here is one rustls takes.
            #[cfg(feature = "k8s")]
            assert!(rustls::pki_types::DnsName::try_from(name).is_ok(), "{name}");
        }
        let longest = ["a".repeat(63).as_str(); 4].join(".");
        assert_eq!(longest.len(), 255);
        assert!(!is_dns_name(&longest));
        assert!(is_dns_name(&longest[2..]));
        assert!(is_dns_name(&format!("{}.", &longest[3..])));
    }

    #[test]
    fn anything_else_is_refused() {
        for bad in [
            "a b",
            "",
            ".",
            "..",
            "a..b",
            ".a",
            "-a.com",
            "a-.com",
            "a.com..",
            "host:443",
            "https://kubernetes",
            "10.0.0.256",
            "1.2.3",
            "10.0.0.1.",
            "example.0x1f",
            "[kubernetes]",
            "[10.0.0.1",
            "kübernetes",
            "a/b",
            "a\nb",
            &"a".repeat(64),
        ] {
            assert!(host(bad).is_err(), "{bad:?}");
            #[cfg(feature = "k8s")]
            if !bad.starts_with('[') {
                assert!(
                    rustls::pki_types::DnsName::try_from(bad).is_err()
                        || bad.parse::<IpAddr>().is_ok(),
                    "{bad:?}"
                );
            }
        }
        let err = host("a b").unwrap_err();
        assert!(
            err.contains("neither an IP address nor a DNS name"),
            "{err}"
        );
        assert!(err.contains("\"a b\""), "{err}");
    }

    #[test]
    fn the_port_is_a_port() {
        let (host, port) = api_address(Some("kubernetes.default.svc"), Some("443")).unwrap();
        assert_eq!(
            (host, port),
            (Host::Name("kubernetes.default.svc".into()), 443)
        );
        assert_eq!(api_address(Some("10.0.0.1"), None).unwrap().1, 443);
        assert_eq!(api_address(Some("10.0.0.1"), Some("")).unwrap().1, 443);
        let v6 = api_address(Some("fd00:10:96::1"), Some("6443")).unwrap();
        assert_eq!(v6, (Host::Ip("fd00:10:96::1".parse().unwrap()), 6443));
        assert!(api_address(None, Some("443")).is_err());
        assert!(api_address(Some(""), Some("443")).is_err());
        assert!(api_address(Some("a b"), Some("443")).is_err());
        for port in ["0", "65536", "x", "+443", "-1", " 443"] {
            assert!(api_address(Some("10.0.0.1"), Some(port)).is_err(), "{port}");
        }
    }
}
