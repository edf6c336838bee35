//! Webhooks to partners, as the Standard Webhooks specification has them, so partners verify
//! them with its libraries: `webhook-id`, `webhook-timestamp` and `webhook-signature` (`v1,`
//! and base64 HMAC-SHA256 over `id.timestamp.body`, one signature per secret in use), with
//! secrets `whsec_` and base64.
//!
//! The worker sends what the outbox ([`crate::store`]) holds: each partner's events on a task
//! of their own, so a slow or dead endpoint holds up only itself; each case's events to a
//! partner in order; retried with exponential back-off and jitter until the retry window
//! ends. Replicas claim events with a lease, so in the normal case each is sent once.

use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use chrono::{DateTime, Utc};
use url::Url;

use crate::state::AppState;
use crate::store::{DueDelivery, TryOutcome};

/// How long a partner has to answer.
pub const SEND_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a worker holds the events it claimed: longer than a send may take.
const CLAIM_LEASE: Duration = Duration::from_secs(60);

/// Events sent to one partner at once (each about a different case).
const PER_PARTNER: u64 = 16;

/// The longest wait between two tries of one event.
const MAX_BACKOFF: Duration = Duration::from_secs(60 * 60);

/// The prefix of a signing secret.
const SECRET_PREFIX: &str = "whsec_";

/// A new signing secret: 32 random bytes.
pub fn new_secret() -> anyhow::Result<String> {
    let mut bytes = [0u8; 32];
    aws_lc_rs::rand::fill(&mut bytes)
        .map_err(|_| anyhow::anyhow!("no randomness available for a webhook secret"))?;
    Ok(format!("{SECRET_PREFIX}{}", STANDARD.encode(bytes)))
}

/// The `webhook-signature` header value for `body`, sent as message `id` at `timestamp`,
/// signed with each of `secrets`.
pub fn signature(secrets: &[&str], id: &str, timestamp: i64, body: &str) -> anyhow::Result<String> {
    let signed = format!("{id}.{timestamp}.{body}");
    let signatures = secrets
        .iter()
        .map(|secret| {
            let raw = secret.strip_prefix(SECRET_PREFIX).unwrap_or(secret);
            let key_bytes = STANDARD
                .decode(raw)
                .map_err(|_| anyhow::anyhow!("a webhook secret is not base64"))?;
            let key = aws_lc_rs::hmac::Key::new(aws_lc_rs::hmac::HMAC_SHA256, &key_bytes);
            let tag = aws_lc_rs::hmac::sign(&key, signed.as_bytes());
            Ok(format!("v1,{}", STANDARD.encode(tag.as_ref())))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok(signatures.join(" "))
}

/// The `webhook-id` of event `id`.
pub fn message_id(id: uuid::Uuid) -> String {
    format!("msg_{}", id.simple())
}

/// The body of an event: thin, `{"type","timestamp","data":{"reference","brand","status",...}}`.
pub fn payload(event: &DueDelivery) -> String {
    let mut data = serde_json::json!({
        "reference": event.reference,
        "brand": event.brand,
        "status": event.status,
    });
    if let Some(product) = event.product_uuid {
        data["product_uuid"] = serde_json::Value::String(product.to_string());
    }
    serde_json::json!({
        "type": event.event_type,
        "timestamp": event.created_at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        "data": data,
    })
    .to_string()
}

/// The IPv4 ranges events never go to (IANA's special-purpose registry), as network and
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

/// Global unicast, the only IPv6 range events go to; everything outside it is refused.
const IPV6_GLOBAL: (Ipv6Addr, u32) = (Ipv6Addr::new(0x2000, 0, 0, 0, 0, 0, 0, 0), 3);

/// The parts of global unicast events never go to either.
const IPV6_REFUSED: [(Ipv6Addr, u32); 4] = [
    // IETF protocol assignments: Teredo 2001::/32, benchmarking 2001:2::/48, ORCHID...
    (Ipv6Addr::new(0x2001, 0, 0, 0, 0, 0, 0, 0), 23),
    (Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0), 32), // documentation
    (Ipv6Addr::new(0x2002, 0, 0, 0, 0, 0, 0, 0), 16),     // 6to4
    (Ipv6Addr::new(0x3fff, 0, 0, 0, 0, 0, 0, 0), 20),     // documentation
];

/// Whether events may go to `ip`: the one address check, at `webhook set` and before every
/// send, for names and IP literals alike. Only globally routable addresses pass.
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

/// The address of `url`'s host when it is an IP literal that events may not go to. The
/// HTTP client connects to literals without asking its resolver ([`PublicOnly`]), so they
/// are checked here, before every send as at `webhook set`.
fn refused_literal(url: &Url) -> Option<IpAddr> {
    let ip = match url.host()? {
        url::Host::Ipv4(v4) => IpAddr::V4(v4),
        url::Host::Ipv6(v6) => IpAddr::V6(v6),
        url::Host::Domain(_) => return None,
    };
    (!is_public(ip)).then_some(ip)
}

/// Why an endpoint URL is refused.
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    /// Not a URL.
    #[error("not a URL: {0}")]
    NotAUrl(#[from] url::ParseError),
    /// Not https.
    #[error(
        "webhook URLs must be https (INTAKE_WEBHOOK_ALLOW_INSECURE=true allows http, for local use)"
    )]
    NotHttps,
    /// It names or resolves to an address events may not go to.
    #[error("{0} is not a public address: webhooks go only to globally routable addresses")]
    NotPublic(IpAddr),
    /// Its host does not resolve.
    #[error("{0} does not resolve")]
    Unresolved(String),
}

/// Checks that events may go to `url`: https, and its address, or every address its host
/// resolves to, public ([`is_public`]), unless `allow_insecure`.
pub async fn check_target(url: &str, allow_insecure: bool) -> Result<Url, TargetError> {
    let parsed = Url::parse(url)?;
    if allow_insecure {
        return Ok(parsed);
    }
    if parsed.scheme() != "https" {
        return Err(TargetError::NotHttps);
    }
    let host = match parsed.host() {
        Some(url::Host::Domain(name)) => name.to_owned(),
        Some(_) => {
            return match refused_literal(&parsed) {
                Some(ip) => Err(TargetError::NotPublic(ip)),
                None => Ok(parsed),
            };
        }
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

/// Resolves endpoint hosts to their public addresses only, so a name that changes to a
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

/// The HTTP client events are sent with: no redirects (one could lead anywhere), a timeout
/// per send, no proxy whatever `HTTPS_PROXY`, `HTTP_PROXY` or `ALL_PROXY` say (a proxy
/// resolves the name itself, where the address check is never asked), and unless
/// `allow_insecure`, only names that resolve to public addresses. IP literals are not
/// resolved: [`refused_literal`] checks them before each send.
pub fn client(allow_insecure: bool) -> anyhow::Result<reqwest::Client> {
    let mut builder = reqwest::Client::builder()
        .timeout(SEND_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .user_agent(concat!(
            "partner-intake-webhooks/",
            env!("CARGO_PKG_VERSION")
        ));
    if !allow_insecure {
        builder = builder.https_only(true).dns_resolver(Arc::new(PublicOnly));
    }
    Ok(builder.build()?)
}

/// When to try an event again after `attempts` tries: exponential from `base`, at most
/// [`MAX_BACKOFF`], spread by a random ±20% so many partners' retries do not bunch.
pub fn next_try(now: DateTime<Utc>, attempts: i32, base: Duration) -> DateTime<Utc> {
    let exponent = u32::try_from(attempts.saturating_sub(1))
        .unwrap_or(0)
        .min(20);
    let wait = base.saturating_mul(1 << exponent).min(MAX_BACKOFF);
    let mut byte = [0u8; 1];
    let _ = aws_lc_rs::rand::fill(&mut byte);
    let spread = 0.8 + 0.4 * f64::from(byte[0]) / 255.0;
    now + chrono::Duration::from_std(wait.mul_f64(spread)).unwrap_or_default()
}

/// Sends due events until aborted: every poll period, a task for each partner with events
/// due and none running here yet.
pub async fn run(state: Arc<AppState>) {
    let allow_insecure = state.config.webhook_allow_insecure;
    let http = match client(allow_insecure) {
        Ok(http) => http,
        Err(e) => {
            tracing::error!(error = %e, "webhook client could not be built; no webhooks are sent");
            return;
        }
    };
    let period = Duration::from_millis(state.config.webhook_poll_ms.max(10));
    let running: Arc<Mutex<HashSet<String>>> = Arc::default();
    let mut tasks = tokio::task::JoinSet::new();
    loop {
        while tasks.try_join_next().is_some() {}
        match state.cases.pending_deliveries().await {
            Ok(n) => metrics::gauge!("intake_webhook_deliveries_pending").set(n as f64),
            Err(e) => tracing::warn!(error = %e, "counting pending webhook deliveries failed"),
        }
        match state.cases.webhook_partners_due().await {
            Ok(partners) => {
                for partner in partners {
                    if !running
                        .lock()
                        .expect("not poisoned")
                        .insert(partner.clone())
                    {
                        continue;
                    }
                    let (state, http, running) = (state.clone(), http.clone(), running.clone());
                    tasks.spawn(async move {
                        deliver_to(&state, &http, &partner).await;
                        running.lock().expect("not poisoned").remove(&partner);
                    });
                }
            }
            Err(e) => tracing::warn!(error = %e, "looking for due webhook deliveries failed"),
        }
        tokio::time::sleep(period).await;
    }
}

/// Sends `client_id`'s due events, a batch at a time, until none is due or a whole batch
/// failed (the endpoint is down: its events wait for their next try).
async fn deliver_to(state: &AppState, http: &reqwest::Client, client_id: &str) {
    loop {
        let Ok(Some(endpoint)) = state.cases.webhook(client_id).await else {
            return;
        };
        if endpoint.disabled_at.is_some() {
            return;
        }
        let refused = if state.config.webhook_allow_insecure {
            None
        } else {
            Url::parse(&endpoint.url)
                .ok()
                .and_then(|url| refused_literal(&url))
        };
        let due = match state
            .cases
            .claim_deliveries(client_id, PER_PARTNER, CLAIM_LEASE)
            .await
        {
            Ok(due) if !due.is_empty() => due,
            Ok(_) => return,
            Err(e) => {
                tracing::warn!(error = %e, client_id, "claiming webhook deliveries failed");
                return;
            }
        };
        if let Some(ip) = refused {
            refuse(state, client_id, ip, &due).await;
            return;
        }
        let now = Utc::now();
        let mut secrets = vec![endpoint.secret.clone()];
        if let (Some(previous), Some(until)) =
            (&endpoint.previous_secret, endpoint.previous_secret_until)
            && until > now
        {
            secrets.push(previous.clone());
        }
        let secrets = Arc::new(secrets);
        let mut sends = tokio::task::JoinSet::new();
        for (i, event) in due.iter().enumerate() {
            let (http, url, secrets, event) = (
                http.clone(),
                endpoint.url.clone(),
                secrets.clone(),
                event.clone(),
            );
            sends.spawn(async move { (i, send(&http, &url, &secrets, &event).await) });
        }
        let mut outcomes: Vec<Sent> = vec![Err("the send was lost".into()); due.len()];
        while let Some(done) = sends.join_next().await {
            if let Ok((i, sent)) = done {
                outcomes[i] = sent;
            }
        }
        let mut any_delivered = false;
        for (event, outcome) in due.iter().zip(outcomes) {
            let outcome = judge(state, event, outcome);
            if let TryOutcome::Delivered = outcome {
                any_delivered = true;
                let latency = (Utc::now() - event.created_at).num_milliseconds().max(0);
                metrics::histogram!("intake_webhook_delivery_lag_seconds")
                    .record(latency as f64 / 1000.0);
            }
            let label = match &outcome {
                TryOutcome::Delivered => "delivered",
                TryOutcome::Retry { .. } => "retry",
                TryOutcome::Failed {
                    status: Some(410), ..
                } => "gone",
                TryOutcome::Failed { .. } => "failed",
            };
            metrics::counter!("intake_webhook_attempts_total", "outcome" => label).increment(1);
            if let Err(e) = state
                .cases
                .finish_delivery(event.id, client_id, &outcome)
                .await
            {
                tracing::warn!(error = %e, client_id, "recording a webhook delivery failed");
            }
            if label == "gone" {
                tracing::warn!(client_id, "webhook endpoint answered 410 Gone; disabled");
                if let Err(e) = state
                    .cases
                    .disable_webhook(client_id, "the endpoint answered 410 Gone")
                    .await
                {
                    tracing::warn!(error = %e, client_id, "disabling a webhook endpoint failed");
                }
                return;
            }
        }
        if !any_delivered {
            return;
        }
    }
}

/// Gives up on `due`, claimed for `client_id`'s endpoint at `ip`, an address events may
/// not go to (stored before the check knew it, or with the check off), and disables the
/// endpoint saying why: an address never changes, so trying again cannot help.
async fn refuse(state: &AppState, client_id: &str, ip: IpAddr, due: &[DueDelivery]) {
    let reason = TargetError::NotPublic(ip).to_string();
    tracing::warn!(client_id, %ip, "webhook endpoint's address is not public; disabled");
    for event in due {
        let outcome = TryOutcome::Failed {
            status: None,
            error: reason.clone(),
        };
        metrics::counter!("intake_webhook_attempts_total", "outcome" => "failed").increment(1);
        if let Err(e) = state
            .cases
            .finish_delivery(event.id, client_id, &outcome)
            .await
        {
            tracing::warn!(error = %e, client_id, "recording a webhook delivery failed");
        }
    }
    if let Err(e) = state.cases.disable_webhook(client_id, &reason).await {
        tracing::warn!(error = %e, client_id, "disabling a webhook endpoint failed");
    }
}

/// What came of one send: the status, or why none came.
type Sent = Result<u16, String>;

async fn send(http: &reqwest::Client, url: &str, secrets: &[String], event: &DueDelivery) -> Sent {
    let id = message_id(event.id);
    let timestamp = Utc::now().timestamp();
    let body = payload(event);
    let secrets: Vec<&str> = secrets.iter().map(String::as_str).collect();
    let signature = signature(&secrets, &id, timestamp, &body).map_err(|e| e.to_string())?;
    let answer = http
        .post(url)
        .header("content-type", "application/json")
        .header("webhook-id", &id)
        .header("webhook-timestamp", timestamp.to_string())
        .header("webhook-signature", signature)
        .body(body)
        .send()
        .await
        .map_err(|e| {
            if e.is_timeout() {
                format!("no answer within {} s", SEND_TIMEOUT.as_secs())
            } else {
                format!("could not connect: {e}")
            }
        })?;
    Ok(answer.status().as_u16())
}

/// How a send ends for the event: delivered on 2xx; on 410 given up (the endpoint is
/// disabled); otherwise tried again, unless the retry window has passed.
fn judge(state: &AppState, event: &DueDelivery, sent: Sent) -> TryOutcome {
    let (status, error) = match sent {
        Ok(status) if (200..300).contains(&status) => return TryOutcome::Delivered,
        Ok(410) => {
            return TryOutcome::Failed {
                status: Some(410),
                error: "the endpoint answered 410 Gone".into(),
            };
        }
        Ok(status) => (Some(status), format!("the endpoint answered {status}")),
        Err(error) => (None, error),
    };
    let now = Utc::now();
    let window = chrono::Duration::seconds(state.config.webhook_retry_secs as i64);
    if now - event.created_at >= window {
        return TryOutcome::Failed { status, error };
    }
    let base = Duration::from_millis(state.config.webhook_backoff_ms);
    TryOutcome::Retry {
        at: next_try(now, event.attempts, base),
        status,
        error,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
                    check_target(&url, false).await,
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
                    check_target(url, false).await,
                    Err(TargetError::NotPublic(_))
                ),
                "{url} was accepted"
            );
        }
        assert!(
            check_target("https://93.184.216.34/hook", false)
                .await
                .is_ok()
        );
        assert!(
            check_target("https://[2606:4700::1]/hook", false)
                .await
                .is_ok()
        );
    }

    #[tokio::test]
    async fn only_https_public_targets_are_accepted() {
        assert!(matches!(
            check_target("http://example.com/hook", false).await,
            Err(TargetError::NotHttps)
        ));
        assert!(matches!(
            check_target("https://127.0.0.1/hook", false).await,
            Err(TargetError::NotPublic(_))
        ));
        assert!(matches!(
            check_target("https://[::1]:8443/hook", false).await,
            Err(TargetError::NotPublic(_))
        ));
        assert!(matches!(
            check_target("https://localhost/hook", false).await,
            Err(TargetError::NotPublic(_))
        ));
        assert!(check_target("http://127.0.0.1:9/hook", true).await.is_ok());
    }

    /// The example of the Standard Webhooks specification's own test vectors.
    #[test]
    fn signatures_match_the_specification() {
        let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
        let id = "msg_p5jXN8AQM9LWM0D4loKWxJek";
        let body = r#"{"test": 2432232314}"#;
        assert_eq!(
            signature(&[secret], id, 1614265330, body).unwrap(),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
        let two = signature(&[secret, secret], id, 1614265330, body).unwrap();
        assert_eq!(two.split(' ').count(), 2);
    }

    #[test]
    fn back_off_grows_to_its_cap() {
        let now = Utc::now();
        let base = Duration::from_secs(5);
        let first = (next_try(now, 1, base) - now).num_milliseconds();
        assert!((4_000..=6_000).contains(&first), "{first}");
        let fourth = (next_try(now, 4, base) - now).num_milliseconds();
        assert!((32_000..=48_000).contains(&fourth), "{fourth}");
        let late = (next_try(now, 40, base) - now).num_milliseconds();
        assert!((48 * 60 * 1000..=72 * 60 * 1000).contains(&late), "{late}");
    }
}
