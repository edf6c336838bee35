//! A partner's webhooks: its endpoints and delivery history through the API
//! ([`Client::webhook_endpoints`], [`Client::webhook_deliveries`] and the rest, with a token
//! holding [`WEBHOOKS_SCOPE`]), and [`WebhookVerifier`], which checks a delivery's signature
//! before its body is trusted.

use std::time::Duration;

use aws_lc_rs::hmac;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use chrono::{DateTime, SecondsFormat, Utc};
use reqwest::Method;
use shared::intake::webhook_deliveries::{
    DeliveryStatus, RecoverRequest, RecoverResult, WebhookDelivery, WebhookDeliveryDetail,
    WebhookDeliveryList,
};
use shared::intake::webhook_endpoints::{
    NewWebhookEndpoint, SecretRotation, WebhookEndpoint, WebhookEndpointChange,
    WebhookEndpointList, WebhookEndpointWithSecret, WebhookTestRequest, WebhookTestResult,
};
use shared::intake::webhooks::{EventType, EventTypeList, WebhookEvent};

use crate::client::Client;
use crate::error::Error;

/// The scope the webhook operations need: ask for it with
/// [`crate::ClientBuilder::scope`] (beside the others, space-separated).
pub const WEBHOOKS_SCOPE: &str = shared::claims::scopes::WEBHOOKS_MANAGE;

impl Client {
    /// Every event type an endpoint may receive, each with an example
    /// (`GET /partners/external/webhooks/event-types`).
    pub async fn webhook_event_types(&self) -> Result<EventTypeList, Error> {
        let url = self.webhooks(&["event-types"]);
        Ok(self.call(Method::GET, &url, None, None, &[200]).await?.body)
    }

    /// Makes an endpoint; the answer holds its signing secret, shown this once. Past the
    /// partner's limit, [`Error::EndpointLimit`].
    pub async fn create_webhook_endpoint(
        &self,
        endpoint: &NewWebhookEndpoint,
    ) -> Result<WebhookEndpointWithSecret, Error> {
        let url = self.webhooks(&["endpoints"]);
        let made = self.post(&url, endpoint, None, &[201]).await;
        Ok(made.map_err(Error::about_endpoints)?.body)
    }

    /// This partner's endpoints, oldest first, without their secrets.
    pub async fn webhook_endpoints(&self) -> Result<Vec<WebhookEndpoint>, Error> {
        let url = self.webhooks(&["endpoints"]);
        let list: WebhookEndpointList =
            self.call(Method::GET, &url, None, None, &[200]).await?.body;
        Ok(list.data)
    }

    /// One of this partner's endpoints; [`Error::EndpointNotFound`] for any other id.
    pub async fn webhook_endpoint(&self, id: &str) -> Result<WebhookEndpoint, Error> {
        let url = self.webhooks(&["endpoints", id]);
        let read = self.call(Method::GET, &url, None, None, &[200]).await;
        Ok(read.map_err(Error::about_endpoints)?.body)
    }

    /// Changes an endpoint's URL, event types or whether it is enabled; what `change`
    /// leaves `None` stays as it is.
    pub async fn update_webhook_endpoint(
        &self,
        id: &str,
        change: &WebhookEndpointChange,
    ) -> Result<WebhookEndpoint, Error> {
        let url = self.webhooks(&["endpoints", id]);
        let body = serde_json::to_vec(change).expect("the wire types always serialise");
        let changed = self
            .call(Method::PATCH, &url, Some(&body), None, &[200])
            .await;
        Ok(changed.map_err(Error::about_endpoints)?.body)
    }

    /// Removes an endpoint, with its events not yet delivered.
    pub async fn delete_webhook_endpoint(&self, id: &str) -> Result<(), Error> {
        let url = self.webhooks(&["endpoints", id]);
        let removed = self
            .call::<()>(Method::DELETE, &url, None, None, &[204])
            .await;
        removed.map_err(Error::about_endpoints)?;
        Ok(())
    }

    /// Gives an endpoint a new secret (in the answer, this once); the previous one signs
    /// beside it for `grace` (a day when `None`, at most a day), so a [`WebhookVerifier`]
    /// holding either passes meanwhile.
    pub async fn rotate_webhook_secret(
        &self,
        id: &str,
        grace: Option<Duration>,
    ) -> Result<WebhookEndpointWithSecret, Error> {
        let url = self.webhooks(&["endpoints", id, "rotate-secret"]);
        let rotation = SecretRotation {
            grace_period_secs: grace.map(|g| u32::try_from(g.as_secs()).unwrap_or(u32::MAX)),
        };
        let rotated = self.post(&url, &rotation, None, &[200]).await;
        Ok(rotated.map_err(Error::about_endpoints)?.body)
    }

    /// Sends the catalogue's example of `event_type` (`case.created` when `None`) to
    /// endpoint `id` at once, signed as its events are, and says how it went; nothing is
    /// retried or kept in the history.
    pub async fn test_webhook_endpoint(
        &self,
        id: &str,
        event_type: Option<EventType>,
    ) -> Result<WebhookTestResult, Error> {
        let url = self.webhooks(&["endpoints", id, "test"]);
        let sent = self
            .post(&url, &WebhookTestRequest { event_type }, None, &[200])
            .await;
        Ok(sent.map_err(Error::about_endpoints)?.body)
    }

    /// A page of this partner's delivery history, newest event first
    /// (`GET /partners/external/webhooks/deliveries`); pass its `next_cursor` in
    /// `filter.cursor` for the next one.
    pub async fn webhook_deliveries(
        &self,
        filter: &DeliveryFilter,
    ) -> Result<WebhookDeliveryList, Error> {
        let mut url = self.webhooks(&["deliveries"]);
        {
            let mut query = url.query_pairs_mut();
            let times = [("since", filter.since), ("until", filter.until)];
            for (name, at) in times {
                if let Some(at) = at {
                    query.append_pair(name, &at.to_rfc3339_opts(SecondsFormat::Micros, true));
                }
            }
            let texts = [
                ("endpoint_id", filter.endpoint_id.as_deref()),
                ("status", filter.status.map(DeliveryStatus::name)),
                ("event_type", filter.event_type.map(EventType::name)),
                ("cursor", filter.cursor.as_deref()),
            ];
            for (name, value) in texts {
                if let Some(value) = value {
                    query.append_pair(name, value);
                }
            }
            if let Some(limit) = filter.limit {
                query.append_pair("limit", &limit.to_string());
            }
        }
        let url = strip_empty_query(url);
        Ok(self.call(Method::GET, &url, None, None, &[200]).await?.body)
    }

    /// Event `delivery_id` (its `webhook-id`) for endpoint `endpoint_id`, with each try;
    /// [`Error::DeliveryNotFound`] for any other pair.
    pub async fn webhook_delivery(
        &self,
        endpoint_id: &str,
        delivery_id: &str,
    ) -> Result<WebhookDeliveryDetail, Error> {
        let url = self.webhooks(&["endpoints", endpoint_id, "deliveries", delivery_id]);
        let read = self.call(Method::GET, &url, None, None, &[200]).await;
        Ok(read.map_err(Error::about_deliveries)?.body)
    }

    /// Sends event `delivery_id` to endpoint `endpoint_id` again, at once.
    pub async fn redeliver_webhook(
        &self,
        endpoint_id: &str,
        delivery_id: &str,
    ) -> Result<WebhookDelivery, Error> {
        let url = self.webhooks(&[
            "endpoints",
            endpoint_id,
            "deliveries",
            delivery_id,
            "redeliver",
        ]);
        let queued = self.call(Method::POST, &url, None, None, &[202]).await;
        Ok(queued.map_err(Error::about_deliveries)?.body)
    }

    /// Sends again, at once, the events endpoint `endpoint_id` has not got (failed, or
    /// waiting for a retry) that happened from `since` (until `until`, or now), oldest
    /// first; while the answer's `more` is true, call again.
    pub async fn recover_webhook_deliveries(
        &self,
        endpoint_id: &str,
        since: DateTime<Utc>,
        until: Option<DateTime<Utc>>,
    ) -> Result<RecoverResult, Error> {
        let url = self.webhooks(&["endpoints", endpoint_id, "recover"]);
        let request = RecoverRequest { since, until };
        let queued = self.post(&url, &request, None, &[202]).await;
        Ok(queued.map_err(Error::about_endpoints)?.body)
    }

    /// The webhook operations' URL with `segments` pushed (each one encoded whole).
    fn webhooks(&self, segments: &[&str]) -> reqwest::Url {
        let mut url = self.inner.webhooks_url.clone();
        // The base was checked to be one when the client was built.
        if let Ok(mut path) = url.path_segments_mut() {
            path.extend(segments);
        }
        url
    }
}

/// Which events [`Client::webhook_deliveries`] lists: all of them by default.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeliveryFilter {
    /// Only this endpoint's (`ep_...`).
    pub endpoint_id: Option<String>,
    /// Only those that stand so.
    pub status: Option<DeliveryStatus>,
    /// Only this type's.
    pub event_type: Option<EventType>,
    /// Only events that happened at or after this.
    pub since: Option<DateTime<Utc>>,
    /// Only events that happened before this.
    pub until: Option<DateTime<Utc>>,
    /// At most this many (1 to 100; 20 when `None`).
    pub limit: Option<u32>,
    /// The `next_cursor` of the page before.
    pub cursor: Option<String>,
}

/// `url` without a `?` when no parameter was appended.
fn strip_empty_query(mut url: reqwest::Url) -> reqwest::Url {
    if url.query() == Some("") {
        url.set_query(None);
    }
    url
}

/// How far a delivery's `webhook-timestamp` may be from now, either way, as the Standard
/// Webhooks libraries take it: an older one may be a replay.
pub const DEFAULT_TOLERANCE: Duration = Duration::from_secs(5 * 60);

/// Why a delivery did not verify. None of them says which part was wrong beyond this:
/// answer 400 (or 401) and do not act on the body.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SignatureError {
    /// A secret given to the verifier is not `whsec_` and base64.
    #[error("a webhook secret is not whsec_ and base64")]
    BadSecret,
    /// `webhook-timestamp` is not whole Unix seconds.
    #[error("the webhook-timestamp header is not a Unix time")]
    BadTimestamp,
    /// `webhook-timestamp` is further from now than the tolerance: maybe a replay.
    #[error("the delivery's timestamp is outside the tolerance")]
    Stale,
    /// No signature of `webhook-signature` was made with any of the secrets.
    #[error("no signature matches")]
    NoMatch,
}

/// Checks deliveries against an endpoint's secrets: the current one, and during a
/// rotation's grace the previous one too. Signatures are compared in constant time.
///
/// ```
/// # fn handle(id: &str, timestamp: &str, signature: &str, body: &[u8]) -> Result<(), Box<dyn std::error::Error>> {
/// use partner_client::WebhookVerifier;
///
/// let verifier = WebhookVerifier::new(&["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"])?;
/// let event = verifier.verify(id, timestamp, signature, body)?;
/// println!("{:?} on case {}", event.event_type, event.data.reference);
/// # Ok(())
/// # }
/// ```
pub struct WebhookVerifier {
    keys: Vec<hmac::Key>,
    tolerance: Duration,
}

impl std::fmt::Debug for WebhookVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookVerifier")
            .field("secrets", &self.keys.len())
            .field("tolerance", &self.tolerance)
            .finish()
    }
}

impl WebhookVerifier {
    /// A verifier for `secrets` (`whsec_` and base64, as the API shows them; a bare base64
    /// one is taken too), with the [`DEFAULT_TOLERANCE`].
    pub fn new(secrets: &[&str]) -> Result<Self, SignatureError> {
        let keys = secrets
            .iter()
            .map(|secret| {
                let raw = secret.strip_prefix("whsec_").unwrap_or(secret);
                let bytes = STANDARD
                    .decode(raw)
                    .map_err(|_| SignatureError::BadSecret)?;
                if bytes.is_empty() {
                    return Err(SignatureError::BadSecret);
                }
                Ok(hmac::Key::new(hmac::HMAC_SHA256, &bytes))
            })
            .collect::<Result<Vec<_>, _>>()?;
        if keys.is_empty() {
            return Err(SignatureError::BadSecret);
        }
        Ok(Self {
            keys,
            tolerance: DEFAULT_TOLERANCE,
        })
    }

    /// The same, allowing `tolerance` between a delivery's timestamp and now.
    pub fn with_tolerance(mut self, tolerance: Duration) -> Self {
        self.tolerance = tolerance;
        self
    }

    /// Checks a delivery (its `webhook-id`, `webhook-timestamp` and `webhook-signature`
    /// headers, and its body as received) and reads the event. An event type this client
    /// does not know fails to read after verifying: [`Self::check`] then, and read the body
    /// yourself.
    pub fn verify(
        &self,
        id: &str,
        timestamp: &str,
        signature: &str,
        body: &[u8],
    ) -> Result<WebhookEvent, VerifyError> {
        self.check(
            id,
            timestamp,
            signature,
            body,
            chrono::Utc::now().timestamp(),
        )?;
        serde_json::from_slice(body).map_err(VerifyError::Body)
    }

    /// Checks a delivery as of `now` (Unix seconds), without reading its body.
    pub fn check(
        &self,
        id: &str,
        timestamp: &str,
        signature: &str,
        body: &[u8],
        now: i64,
    ) -> Result<(), SignatureError> {
        let sent: i64 = timestamp
            .trim()
            .parse()
            .map_err(|_| SignatureError::BadTimestamp)?;
        let tolerance = i64::try_from(self.tolerance.as_secs()).unwrap_or(i64::MAX);
        if now.abs_diff(sent) > tolerance.unsigned_abs() {
            return Err(SignatureError::Stale);
        }
        let mut signed = Vec::with_capacity(id.len() + timestamp.len() + body.len() + 2);
        signed.extend_from_slice(id.as_bytes());
        signed.push(b'.');
        signed.extend_from_slice(timestamp.trim().as_bytes());
        signed.push(b'.');
        signed.extend_from_slice(body);
        let matches = signature
            .split_ascii_whitespace()
            .filter_map(|s| s.strip_prefix("v1,"))
            .filter_map(|tag| STANDARD.decode(tag).ok())
            .any(|tag| {
                self.keys
                    .iter()
                    .any(|key| hmac::verify(key, &signed, &tag).is_ok())
            });
        if matches {
            Ok(())
        } else {
            Err(SignatureError::NoMatch)
        }
    }
}

/// Why [`WebhookVerifier::verify`] gave no event.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum VerifyError {
    /// The delivery is not ours, or not now.
    #[error(transparent)]
    Signature(#[from] SignatureError),
    /// It verified, but the body is not an event this client knows (a newer type, say).
    #[error("the delivery verified but is not a known event")]
    Body(#[source] serde_json::Error),
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    const BODY: &[u8] = br#"{"type":"case.created","timestamp":"2026-03-14T09:26:53.589Z","data":{"reference":"418290357116","brand":"brand_a","status":"pending_activation"}}"#;

    fn sign(secret: &str, id: &str, timestamp: i64, body: &[u8]) -> String {
        let key = STANDARD
            .decode(secret.strip_prefix("whsec_").unwrap())
            .unwrap();
        let key = hmac::Key::new(hmac::HMAC_SHA256, &key);
        let mut signed = format!("{id}.{timestamp}.").into_bytes();
        signed.extend_from_slice(body);
        format!("v1,{}", STANDARD.encode(hmac::sign(&key, &signed).as_ref()))
    }

    #[test]
    fn a_signed_delivery_verifies_and_reads_as_its_event() {
        let now = chrono::Utc::now().timestamp();
        let verifier = WebhookVerifier::new(&[SECRET]).unwrap();
        let signature = sign(SECRET, "msg_1", now, BODY);
        let event = verifier
            .verify("msg_1", &now.to_string(), &signature, BODY)
            .unwrap();
        assert_eq!(event.data.reference, "418290357116");
    }

    #[test]
    fn anything_changed_or_stale_does_not_verify() {
        let now = 1_800_000_000;
        let verifier = WebhookVerifier::new(&[SECRET]).unwrap();
        let good = sign(SECRET, "msg_1", now, BODY);
        let ts = now.to_string();
        assert_eq!(verifier.check("msg_1", &ts, &good, BODY, now), Ok(()));
        let mut tampered = BODY.to_vec();
        tampered[10] ^= 1;
        let other = "whsec_".to_owned() + &STANDARD.encode([9u8; 32]);
        for (id, timestamp, signature, body, at, why) in [
            (
                "msg_1",
                ts.as_str(),
                good.as_str(),
                &tampered[..],
                now,
                SignatureError::NoMatch,
            ),
            ("msg_2", &ts, &good, BODY, now, SignatureError::NoMatch),
            (
                "msg_1",
                &ts,
                &sign(&other, "msg_1", now, BODY),
                BODY,
                now,
                SignatureError::NoMatch,
            ),
            ("msg_1", &ts, "v1,", BODY, now, SignatureError::NoMatch),
            ("msg_1", &ts, "", BODY, now, SignatureError::NoMatch),
            (
                "msg_1",
                &ts,
                &good.replace("v1,", "v2,"),
                BODY,
                now,
                SignatureError::NoMatch,
            ),
            ("msg_1", &ts, &good, BODY, now + 301, SignatureError::Stale),
            ("msg_1", &ts, &good, BODY, now - 301, SignatureError::Stale),
            (
                "msg_1",
                "soon",
                &good,
                BODY,
                now,
                SignatureError::BadTimestamp,
            ),
            (
                "msg_1",
                "99999999999999999999",
                &good,
                BODY,
                now,
                SignatureError::BadTimestamp,
            ),
        ] {
            assert_eq!(
                verifier.check(id, timestamp, signature, body, at),
                Err(why),
                "{id} {timestamp} {signature}"
            );
        }
        assert_eq!(
            verifier.check("msg_1", &ts, &good, BODY, now + 300),
            Ok(()),
            "at the tolerance's edge"
        );
    }

    #[test]
    fn during_a_rotation_either_secret_verifies_any_of_the_signatures() {
        let now = 1_800_000_000;
        let ts = now.to_string();
        let new = "whsec_".to_owned() + &STANDARD.encode([3u8; 32]);
        let both = format!(
            "{} {}",
            sign(&new, "msg_1", now, BODY),
            sign(SECRET, "msg_1", now, BODY)
        );
        for secrets in [vec![SECRET], vec![new.as_str()], vec![new.as_str(), SECRET]] {
            let verifier = WebhookVerifier::new(&secrets).unwrap();
            assert_eq!(verifier.check("msg_1", &ts, &both, BODY, now), Ok(()));
        }
        let only_old = WebhookVerifier::new(&[SECRET]).unwrap();
        let only_new_signed = sign(&new, "msg_1", now, BODY);
        assert_eq!(
            only_old.check("msg_1", &ts, &only_new_signed, BODY, now),
            Err(SignatureError::NoMatch)
        );
    }

    #[test]
    fn secrets_must_be_base64_and_are_not_shown() {
        for bad in [&["whsec_not base64!"][..], &["whsec_"], &[]] {
            assert_eq!(
                WebhookVerifier::new(bad).map(|_| ()),
                Err(SignatureError::BadSecret)
            );
        }
        let shown = format!("{:?}", WebhookVerifier::new(&[SECRET]).unwrap());
        assert!(!shown.contains("MfKQ"), "{shown}");
    }
}
