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
use std::net::{IpAddr, SocketAddr};
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

/// Whether events may go to `ip`: not loopback, private, link-local, unique-local,
/// shared (carrier-grade NAT), multicast, broadcast or unspecified.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            !(v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_multicast()
                || v4.is_documentation()
                || a == 0
                || (a == 100 && (64..128).contains(&b)))
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_public(IpAddr::V4(v4));
            }
            let first = v6.segments()[0];
            !(v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (first & 0xfe00) == 0xfc00
                || (first & 0xffc0) == 0xfe80)
        }
    }
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
    #[error("{0} is a private, loopback or link-local address")]
    NotPublic(IpAddr),
    /// Its host does not resolve.
    #[error("{0} does not resolve")]
    Unresolved(String),
}

/// Checks that events may go to `url`: https, and every address its host resolves to is
/// public, unless `allow_insecure`.
pub async fn check_target(url: &str, allow_insecure: bool) -> Result<Url, TargetError> {
    let parsed = Url::parse(url)?;
    if allow_insecure {
        return Ok(parsed);
    }
    if parsed.scheme() != "https" {
        return Err(TargetError::NotHttps);
    }
    let host = parsed.host_str().unwrap_or_default().to_owned();
    let port = parsed.port_or_known_default().unwrap_or(443);
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host.trim_matches(['[', ']']), port))
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
/// per send, and unless `allow_insecure`, only public addresses.
pub fn client(allow_insecure: bool) -> anyhow::Result<reqwest::Client> {
    let mut builder = reqwest::Client::builder()
        .timeout(SEND_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
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

    #[test]
    fn private_and_local_addresses_are_refused() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "::1",
            "fe80::1",
            "fd00::1",
            "::ffff:10.0.0.1",
            "::",
        ] {
            assert!(!is_public(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["93.184.216.34", "2606:2800:220:1:248:1893:25c8:1946"] {
            assert!(is_public(ip.parse().unwrap()), "{ip}");
        }
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
