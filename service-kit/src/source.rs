//! Where a request comes from: the TCP peer, or, when the peer is a proxy we trust, the
//! address it says it forwarded for.

use std::net::IpAddr;
use std::str::FromStr;

use ipnet::IpNet;
use poem::Request;

/// The proxies whose `X-Forwarded-For` is believed: CIDR blocks, none by default.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustedProxies(Vec<IpNet>);

impl FromStr for TrustedProxies {
    type Err = String;

    /// A comma-separated list of CIDR blocks or single addresses, e.g. `10.0.0.0/8,::1`.
    fn from_str(list: &str) -> Result<Self, Self::Err> {
        list.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| {
                s.parse::<IpNet>()
                    .or_else(|_| s.parse::<IpAddr>().map(IpNet::from))
                    .map_err(|_| format!("{s:?} is not an IP address or CIDR block"))
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Self)
    }
}

impl TrustedProxies {
    fn trusts(&self, ip: IpAddr) -> bool {
        self.0.iter().any(|net| net.contains(&ip))
    }

    /// The request's source address: the TCP peer, unless the peer is a trusted proxy;
    /// then the right-most `X-Forwarded-For` address that is not itself a trusted proxy
    /// (the ones to its left could have been written by anyone).
    pub fn source(&self, peer: Option<IpAddr>, forwarded_for: Option<&str>) -> Option<IpAddr> {
        let mut source = peer?;
        if !self.trusts(source) {
            return Some(source);
        }
        let Some(chain) = forwarded_for else {
            return Some(source);
        };
        for hop in chain.rsplit(',').map(str::trim) {
            let Ok(ip) = hop.parse::<IpAddr>() else {
                break;
            };
            source = ip;
            if !self.trusts(ip) {
                break;
            }
        }
        Some(source)
    }

    /// [`Self::source`] for a poem request.
    pub fn source_of(&self, req: &Request) -> Option<IpAddr> {
        let peer = req.remote_addr().as_socket_addr().map(|a| a.ip());
        let forwarded = req
            .headers()
            .get("x-forwarded-for")
            .and_then(|v| v.to_str().ok());
        self.source(peer, forwarded)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> Option<IpAddr> {
        Some(s.parse().unwrap())
    }

    #[test]
    fn forwarded_for_is_believed_only_from_a_trusted_proxy() {
        let none = TrustedProxies::default();
        assert_eq!(none.source(ip("10.0.0.5"), Some("1.2.3.4")), ip("10.0.0.5"));
        let proxies: TrustedProxies = "10.0.0.0/8, 192.168.1.1".parse().unwrap();
        assert_eq!(
            proxies.source(ip("10.0.0.5"), Some("1.2.3.4")),
            ip("1.2.3.4")
        );
        assert_eq!(
            proxies.source(ip("8.8.8.8"), Some("1.2.3.4")),
            ip("8.8.8.8")
        );
        // A client may write anything to the left; the right-most untrusted hop counts.
        assert_eq!(
            proxies.source(ip("10.0.0.5"), Some("6.6.6.6, 1.2.3.4, 192.168.1.1")),
            ip("1.2.3.4")
        );
        assert_eq!(
            proxies.source(ip("10.0.0.5"), Some("garbage, 1.2.3.4")),
            ip("1.2.3.4")
        );
        assert_eq!(
            proxies.source(ip("10.0.0.5"), Some("1.2.3.4, garbage")),
            ip("10.0.0.5")
        );
        assert_eq!(proxies.source(ip("10.0.0.5"), None), ip("10.0.0.5"));
        assert!("10.0.0.0/33".parse::<TrustedProxies>().is_err());
        assert_eq!(
            "".parse::<TrustedProxies>().unwrap(),
            TrustedProxies::default()
        );
    }
}
