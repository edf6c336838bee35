//! Where the services may call out to partners (webhooks, partners' JWKS): only globally
//! routable addresses, checked for names and IP literals when an operator registers a URL
//! and before every call, with a client that asks no proxy. One guard for both services,
//! so a range refused for one is refused for the other.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use url::Url;

/// The IPv4 ranges never called (IANA's special-purpose registry), as network and
/// prefix length.
const IPV4_REFUSED: [(Ipv4Addr, u32); 15] = [
    (Ipv4Addr::new(0, 0, 0, 0), 8),       // "this network"
    (Ipv4Addr::new(10, 0, 0, 0), 8),      // private
    (Ipv4Addr::new(100, 64, 0, 0), 10),   // shared address space (carrier-grade NAT)
    (Ipv4Addr::new(127, 0, 0, 0), 8),     // loopback
    (Ipv4Addr::new(169, 254, 0, 0), 16),  // link-local, where cloud metadata answers
    (Ipv4Addr::new(172, 16, 0, 0), 12),   // private
    (Ipv4Addr::new(192, 0, 0, 0), 24),    // IETF protocol assignments
    (Ipv4Addr::new(192, 0, 2, 0), 24),    // documentation
    (Ipv4Addr::new(192, 88, 99, 0), 24),  // 6to4 relay anycast
    (Ipv4Addr::new(192, 168, 0, 0), 16),  // private
    (Ipv4Addr::new(198, 18, 0, 0), 15),   // benchmarking
    (Ipv4Addr::new(198, 51, 100, 0), 24), // documentation
    (Ipv4Addr::new(203, 0, 113, 0), 24),  // documentation
    (Ipv4Addr::new(224, 0, 0, 0), 4),     // multicast
    (Ipv4Addr::new(240, 0, 0, 0), 4),     // reserved for future use, and broadcast
];

/// Global unicast, the only IPv6 range called; everything outside it is refused.
const IPV6_GLOBAL: (Ipv6Addr, u32) = (Ipv6Addr::new(0x2000, 0, 0, 0, 0, 0, 0, 0), 3);

/// The parts of global unicast never called either.
const IPV6_REFUSED: [(Ipv6Addr, u32); 4] = [
    // IETF protocol assignments: Teredo 2001::/32, benchmarking 2001:2::/48, ORCHID...
    (Ipv6Addr::new(0x2001, 0, 0, 0, 0, 0, 0, 0), 23),
    (Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0), 32), // documentation
    (Ipv6Addr::new(0x2002, 0, 0, 0, 0, 0, 0, 0), 16),     // 6to4
    (Ipv6Addr::new(0x3fff, 0, 0, 0, 0, 0, 0, 0), 20),     // documentation
];

/// Whether `ip` may be called: the one address check, when a URL is registered and before
/// every call, for names and IP literals alike. Only globally routable addresses pass.
///
/// IPv4: refused are "this network" 0/8, private 10/8, 172.16/12 and 192.168/16, shared
/// 100.64/10, loopback 127/8, link-local 169.254/16, IETF 192.0.0/24, documentation,
/// 6to4 relay 192.88.99/24, benchmarking 198.18/15, multicast 224/4, reserved 240/4 and
/// broadcast.
///
/// IPv6: only global unicast 2000::/3 passes, so unspecified, loopback, IPv4-compatible
/// `::/96`, IPv4-mapped `::ffff:0:0/96`, IPv4-translated `::ffff:0:0:0/96`, NAT64
/// `64:ff9b::/96` and `64:ff9b:1::/48`, discard-only `100::/64`, unique-local `fc00::/7`,
/// link-local `fe80::/10`, site-local `fec0::/10`, multicast `ff00::/8` and every range not
/// yet allocated are refused; within it, IETF protocol assignments `2001::/23` (Teredo,
/// benchmarking, ORCHID), documentation `2001:db8::/32` and `3fff::/20`, and 6to4
/// `2002::/16`. The forms that carry an IPv4 address (compatible, mapped, translated,
/// NAT64, 6to4, Teredo) are refused outright, whatever address they carry: a partner
/// reachable over IPv4 is given an IPv4 address, and what a gateway makes of an embedded
/// address is not ours to guess.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let addr = u32::from(v4);
            !IPV4_REFUSED
                .iter()
                .any(|&(net, len)| within(addr.into(), u32::from(net).into(), 32, len))
        }
        IpAddr::V6(v6) => {
            let addr = u128::from(v6);
            let in_range = |&(net, len): &(Ipv6Addr, u32)| within(addr, u128::from(net), 128, len);
            in_range(&IPV6_GLOBAL) && !IPV6_REFUSED.iter().any(in_range)
        }
    }
}

/// Whether `addr` is in the network `net`/`len` of `bits`-bit addresses.
fn within(addr: u128, net: u128, bits: u32, len: u32) -> bool {
    let host_bits = bits - len;
    addr.checked_shr(host_bits) == net.checked_shr(host_bits)
}

/// The address of `url`'s host when it is an IP literal that may not be called. The HTTP
/// client connects to literals without asking its resolver ([`PublicOnly`]), so they are
/// checked here, before every call as when the URL was registered.
pub fn refused_literal(url: &Url) -> Option<IpAddr> {
    let ip = match url.host()? {
        url::Host::Ipv4(v4) => IpAddr::V4(v4),
        url::Host::Ipv6(v6) => IpAddr::V6(v6),
        url::Host::Domain(_) => return None,
    };
    (!is_public(ip)).then_some(ip)
}

/// Why a partner's URL is refused.
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    /// Not a URL.
    #[error("not a URL: {0}")]
    NotAUrl(#[from] url::ParseError),
    /// Not https; names the switch that allows http, for the operator.
    #[error("the URL must be https ({0}=true allows http, for local use)")]
    NotHttps(&'static str),
    /// Neither http nor https: nothing else is ever called, whatever the switch says.
    #[error("the URL must be http or https")]
    NotHttp,
    /// It names or resolves to an address that may not be called.
    #[error("{0} is not a public address: only globally routable addresses are called")]
    NotPublic(IpAddr),
    /// Its host does not resolve.
    #[error("{0} does not resolve")]
    Unresolved(String),
}

/// Whether a service may call http URLs and addresses that are not public, and the
/// setting that says so (named in refusals, so an operator knows where to look).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reach {
    /// Whether http and addresses that are not public are allowed: local use and tests.
    pub allow_insecure: bool,
    /// The environment variable that sets `allow_insecure`.
    pub switch: &'static str,
}

/// What can be told of `url` without resolving its host: https, and not an IP literal
/// that may not be called ([`refused_literal`]), unless `reach` allows http and any
/// address.
pub fn check_unresolved(url: &Url, reach: Reach) -> Result<(), TargetError> {
    match url.scheme() {
        "https" => {}
        "http" if reach.allow_insecure => {}
        "http" => return Err(TargetError::NotHttps(reach.switch)),
        _ => return Err(TargetError::NotHttp),
    }
    if reach.allow_insecure {
        return Ok(());
    }
    match refused_literal(url) {
        Some(ip) => Err(TargetError::NotPublic(ip)),
        None => Ok(()),
    }
}

/// Checks that `url` may be called: https, and its address, or every address its host
/// resolves to, public ([`is_public`]), unless `reach` allows anything.
pub async fn check_target(url: &str, reach: Reach) -> Result<Url, TargetError> {
    let parsed = Url::parse(url)?;
    check_unresolved(&parsed, reach)?;
    if reach.allow_insecure {
        return Ok(parsed);
    }
    let host = match parsed.host() {
        Some(url::Host::Domain(name)) => name.to_owned(),
        // An IP literal: checked above.
        Some(_) => return Ok(parsed),
        None => return Err(TargetError::Unresolved(parsed.to_string())),
    };
    let port = parsed.port_or_known_default().unwrap_or(443);
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), port))
        .await
        .map_err(|_| TargetError::Unresolved(host.clone()))?
        .collect();
    if addrs.is_empty() {
        return Err(TargetError::Unresolved(host));
    }
    match addrs.iter().find(|a| !is_public(a.ip())) {
        Some(private) => Err(TargetError::NotPublic(private.ip())),
        None => Ok(parsed),
    }
}

/// Resolves partners' hosts to their public addresses only, so a name that changes to a
/// private address after it was checked still cannot reach one.
struct PublicOnly;

impl reqwest::dns::Resolve for PublicOnly {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0))
                .await?
                .filter(|a| is_public(a.ip()))
                .collect();
            if addrs.is_empty() {
                return Err(format!("{host} has no public address").into());
            }
            let addrs: reqwest::dns::Addrs = Box::new(addrs.into_iter());
            Ok(addrs)
        })
    }
}

/// The HTTP client partners are called with: no redirects (one could lead anywhere),
/// `timeout` per call, no proxy whatever `HTTPS_PROXY`, `HTTP_PROXY` or `ALL_PROXY` say (a
/// proxy resolves the name itself, where the address check is never asked), and unless
/// `allow_insecure`, https only and only names that resolve to public addresses. IP
/// literals are not resolved: [`refused_literal`] checks them before each call.
pub fn client(
    user_agent: &str,
    timeout: Duration,
    allow_insecure: bool,
) -> anyhow::Result<reqwest::Client> {
    let mut builder = reqwest::Client::builder()
        .timeout(timeout)
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .user_agent(user_agent);
    if !allow_insecure {
        builder = builder.https_only(true).dns_resolver(Arc::new(PublicOnly));
    }
    Ok(builder.build()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECURE: Reach = Reach {
        allow_insecure: false,
        switch: "TEST_ALLOW_INSECURE",
    };
    const INSECURE: Reach = Reach {
        allow_insecure: true,
        switch: "TEST_ALLOW_INSECURE",
    };

    /// Every kind of address that is not globally routable, each named after its range.
    const REFUSED: &[(&str, &str)] = &[
        ("IPv4 this network 0/8", "0.0.0.0"),
        ("IPv4 this network 0/8, not only 0.0.0.0", "0.1.2.3"),
        ("IPv4 private 10/8", "10.1.2.3"),
        ("IPv4 shared CGNAT 100.64/10", "100.64.0.1"),
        ("IPv4 shared CGNAT 100.64/10, its end", "100.127.255.254"),
        ("IPv4 loopback 127/8", "127.0.0.1"),
        ("IPv4 loopback 127/8, not only .1", "127.1.2.3"),
        (
            "IPv4 link-local 169.254/16 (cloud metadata)",
            "169.254.169.254",
        ),
        ("IPv4 private 172.16/12", "172.16.0.1"),
        ("IPv4 private 172.16/12, its end", "172.31.255.255"),
        ("IPv4 IETF protocol assignments 192.0.0/24", "192.0.0.1"),
        ("IPv4 documentation 192.0.2/24", "192.0.2.1"),
        ("IPv4 6to4 relay anycast 192.88.99/24", "192.88.99.1"),
        ("IPv4 private 192.168/16", "192.168.1.1"),
        ("IPv4 benchmarking 198.18/15", "198.18.0.1"),
        (
            "IPv4 benchmarking 198.18/15, its second half",
            "198.19.255.1",
        ),
        ("IPv4 documentation 198.51.100/24", "198.51.100.7"),
        ("IPv4 documentation 203.0.113/24", "203.0.113.7"),
        ("IPv4 multicast 224/4", "224.0.0.1"),
        ("IPv4 multicast 224/4, its end", "239.255.255.255"),
        ("IPv4 reserved 240/4", "240.0.0.1"),
        ("IPv4 broadcast", "255.255.255.255"),
        ("IPv6 unspecified", "::"),
        ("IPv6 loopback", "::1"),
        ("IPv4-compatible loopback", "::127.0.0.1"),
        (
            "IPv4-compatible, even of a public address",
            "::93.184.216.34",
        ),
        ("IPv4-mapped loopback", "::ffff:127.0.0.1"),
        ("IPv4-mapped private", "::ffff:10.0.0.1"),
        (
            "IPv4-mapped, even of a public address",
            "::ffff:93.184.216.34",
        ),
        (
            "IPv4-translated loopback (::ffff:0:0/96)",
            "::ffff:0:7f00:1",
        ),
        (
            "IPv4-translated, even of a public address",
            "::ffff:0:5db8:d822",
        ),
        ("NAT64 64:ff9b::/96 of link-local", "64:ff9b::a9fe:a9fe"),
        (
            "NAT64 64:ff9b::/96, even of a public address",
            "64:ff9b::5db8:d822",
        ),
        ("local-use NAT64 64:ff9b:1::/48", "64:ff9b:1::a00:1"),
        ("discard-only 100::/64", "100::1"),
        ("IETF special-purpose 2001::/23", "2001:1::1"),
        ("Teredo 2001::/32 of loopback", "2001:0:7f00:1::"),
        (
            "Teredo 2001::/32, even of a public server",
            "2001:0:5db8:d822::1",
        ),
        ("benchmarking 2001:2::/48", "2001:2::1"),
        ("ORCHIDv2 2001:20::/28", "2001:20::1"),
        ("IETF special-purpose 2001::/23, its end", "2001:1ff::1"),
        ("documentation 2001:db8::/32", "2001:db8::1"),
        ("6to4 2002::/16 of loopback", "2002:7f00:1::1"),
        (
            "6to4 2002::/16, even of a public address",
            "2002:5db8:d822::1",
        ),
        ("documentation 3fff::/20", "3fff::1"),
        ("unique-local fc00::/7", "fc00::1"),
        ("unique-local fc00::/7 (fd00::/8)", "fd00::1"),
        ("link-local fe80::/10", "fe80::1"),
        ("site-local fec0::/10", "fec0::1"),
        ("multicast ff00::/8", "ff02::1"),
        ("multicast ff00::/8, global scope", "ff0e::1"),
        ("IPv6 outside global unicast 2000::/3", "4000::1"),
    ];

    /// Public addresses, including the neighbours of refused ranges.
    const ACCEPTED: &[(&str, &str)] = &[
        ("a public IPv4 address", "93.184.216.34"),
        ("just below 100.64/10", "100.63.255.255"),
        ("just above 100.64/10", "100.128.0.1"),
        ("just above 172.16/12", "172.32.0.1"),
        ("just below 198.18/15", "198.17.255.255"),
        ("just above 198.18/15", "198.20.0.1"),
        ("the last address below 224/4", "223.255.255.254"),
        ("a public IPv4 address beside 192.0.0/24", "192.0.1.1"),
        ("a public IPv6 address", "2606:4700::1"),
        (
            "another public IPv6 address",
            "2606:2800:220:1:248:1893:25c8:1946",
        ),
        ("just above 2001::/23", "2001:200::1"),
        ("just above 2001:db8::/32", "2001:db9::1"),
        ("just above 2002::/16", "2003::1"),
        ("global unicast 2a00::/12", "2a00:1450:4001:81b::200e"),
    ];

    #[test]
    fn only_globally_routable_addresses_are_accepted() {
        for (rule, ip) in REFUSED {
            let ip: IpAddr = ip.parse().expect(rule);
            assert!(!is_public(ip), "{rule}: {ip} was accepted");
        }
        for (rule, ip) in ACCEPTED {
            let ip: IpAddr = ip.parse().expect(rule);
            assert!(is_public(ip), "{rule}: {ip} was refused");
        }
    }

    #[tokio::test]
    async fn url_literals_of_every_refused_form_are_refused() {
        for (rule, ip) in REFUSED {
            let host = match ip.parse::<IpAddr>().expect(rule) {
                IpAddr::V4(v4) => v4.to_string(),
                IpAddr::V6(v6) => format!("[{v6}]"),
            };
            let url = format!("https://{host}/hook");
            assert!(
                matches!(
                    check_target(&url, SECURE).await,
                    Err(TargetError::NotPublic(_))
                ),
                "{rule}: {url} was accepted"
            );
        }
        // The URL standard reads these hosts as IPv4 addresses: 127.0.0.1 and 10.0.0.1.
        for url in [
            "https://2130706433/hook",
            "https://0x7f.1/hook",
            "https://10.1/hook",
        ] {
            assert!(
                matches!(
                    check_target(url, SECURE).await,
                    Err(TargetError::NotPublic(_))
                ),
                "{url} was accepted"
            );
        }
        assert!(
            check_target("https://93.184.216.34/hook", SECURE)
                .await
                .is_ok()
        );
        assert!(
            check_target("https://[2606:4700::1]/hook", SECURE)
                .await
                .is_ok()
        );
    }

    #[tokio::test]
    async fn only_https_public_targets_are_accepted() {
        assert!(matches!(
            check_target("http://example.com/hook", SECURE).await,
            Err(TargetError::NotHttps("TEST_ALLOW_INSECURE"))
        ));
        assert!(matches!(
            check_target("https://127.0.0.1/hook", SECURE).await,
            Err(TargetError::NotPublic(_))
        ));
        assert!(matches!(
            check_target("https://[::1]:8443/hook", SECURE).await,
            Err(TargetError::NotPublic(_))
        ));
        assert!(matches!(
            check_target("https://localhost/hook", SECURE).await,
            Err(TargetError::NotPublic(_))
        ));
        assert!(
            check_target("http://127.0.0.1:9/hook", INSECURE)
                .await
                .is_ok()
        );
    }

    #[tokio::test]
    async fn the_insecure_switch_allows_http_and_no_other_scheme() {
        for url in [
            "ftp://example.com/hook",
            "file:///etc/passwd",
            "gopher://127.0.0.1:70/_",
            "ws://example.com/hook",
            "data:text/plain,hook",
        ] {
            for reach in [SECURE, INSECURE] {
                assert!(
                    matches!(check_target(url, reach).await, Err(TargetError::NotHttp)),
                    "{url} accepted with {reach:?}"
                );
            }
        }
    }
}
