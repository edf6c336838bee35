//! A partner's webhook endpoints as the API shows and takes them
//! (`/partners/external/webhooks/endpoints`): where events go, which types, whether
//! deliveries run, and the signing secret, shown when it is made and never again.
//!
//! The requests are read field by field by the intake-api, so every problem is reported at
//! once; these types document them and serve clients.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::webhooks::EventType;

/// Whether an endpoint receives events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(poem_openapi::Enum))]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "openapi", oai(rename_all = "lowercase"))]
pub enum EndpointStatus {
    /// Events are sent to it.
    Enabled,
    /// Nothing is sent or queued for it; `disabled_reason` says why.
    Disabled,
}

/// A webhook endpoint (never its secret).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(poem_openapi::Object))]
pub struct WebhookEndpoint {
    /// The endpoint's id: `ep_` and 32 hex digits.
    pub id: String,
    /// Where events are POSTed.
    pub url: String,
    /// The event types it receives; null for every type, those added later too.
    pub event_types: Option<Vec<EventType>>,
    /// Whether events are sent to it.
    pub status: EndpointStatus,
    /// Why deliveries stopped: your change, an operator's, a `410 Gone` from the endpoint,
    /// or an address events may not go to. Null while enabled.
    pub disabled_reason: Option<String>,
    /// When deliveries stopped; null while enabled.
    pub disabled_at: Option<DateTime<Utc>>,
    /// Since when every try to deliver to it has failed; null while deliveries go through.
    /// An endpoint failing for longer than the deployment's period (the README says it) is
    /// disabled.
    pub failing_since: Option<DateTime<Utc>>,
    /// After a secret rotation, until when the previous secret signs beside the new one
    /// (each request then carries two signatures); null otherwise.
    pub previous_secret_expires_at: Option<DateTime<Utc>>,
    /// Events a second at most that are sent to it; null for as fast as it answers.
    pub rate_limit: Option<u32>,
    /// When it was made.
    pub created_at: DateTime<Utc>,
    /// When it was last changed.
    pub updated_at: DateTime<Utc>,
}

/// An endpoint with its signing secret: the answer to making one or rotating its secret,
/// the only times the secret is shown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(poem_openapi::Object))]
pub struct WebhookEndpointWithSecret {
    /// The endpoint.
    #[serde(flatten)]
    #[cfg_attr(feature = "openapi", oai(flatten))]
    pub endpoint: WebhookEndpoint,
    /// The signing secret (`whsec_` and base64), for verifying each request's
    /// `webhook-signature` as the Standard Webhooks specification has it. Keep it secret;
    /// it is not shown again.
    pub secret: String,
}

/// `{"data": [...]}`: a partner's endpoints, oldest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(poem_openapi::Object))]
pub struct WebhookEndpointList {
    /// The endpoints.
    pub data: Vec<WebhookEndpoint>,
}

/// A new endpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(poem_openapi::Object))]
#[cfg_attr(feature = "openapi", oai(deny_unknown_fields))]
pub struct NewWebhookEndpoint {
    /// Where events are POSTed: an https URL on a public address.
    pub url: String,
    /// The event types it receives (at least one); leave it out, or null, for every type,
    /// those added later too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_types: Option<Vec<EventType>>,
    /// Events a second at most to send it (1 to 10000); leave it out, or null, for as fast
    /// as it answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "openapi",
        oai(validator(minimum(value = "1"), maximum(value = "10000")))
    )]
    pub rate_limit: Option<u32>,
}

/// A change to an endpoint: what is left out stays as it is.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(poem_openapi::Object))]
#[cfg_attr(feature = "openapi", oai(deny_unknown_fields))]
pub struct WebhookEndpointChange {
    /// Where events are POSTed: an https URL on a public address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The event types it receives (at least one); null for every type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_types: Option<Vec<EventType>>,
    /// False stops deliveries (events are not queued for it meanwhile); true starts them
    /// again, after a `410 Gone` too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Events a second at most to send it (1 to 10000); null for as fast as it answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "openapi",
        oai(validator(minimum(value = "1"), maximum(value = "10000")))
    )]
    pub rate_limit: Option<u32>,
}

/// The highest `rate_limit` an endpoint takes, in events a second.
pub const MAX_RATE_LIMIT: u32 = 10_000;

/// A new signing secret for an endpoint.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(poem_openapi::Object))]
#[cfg_attr(feature = "openapi", oai(deny_unknown_fields))]
pub struct SecretRotation {
    /// How long the previous secret keeps signing beside the new one, in seconds: 0 to
    /// 86400, a day when left out. Switch your verification to the new secret within it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "openapi",
        oai(validator(minimum(value = "0"), maximum(value = "86400")))
    )]
    pub grace_period_secs: Option<u32>,
}

/// The longest (and default) time a previous secret signs beside a new one, in seconds.
pub const MAX_SECRET_GRACE_SECS: u32 = 86_400;

/// A test event to send to an endpoint.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(poem_openapi::Object))]
#[cfg_attr(feature = "openapi", oai(deny_unknown_fields))]
pub struct WebhookTestRequest {
    /// Which type's example to send (the catalogue's); `case.created` when left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_type: Option<EventType>,
}

/// How a test event's send went: sent at once, whether or not the endpoint is enabled, and
/// kept out of the delivery history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(poem_openapi::Object))]
pub struct WebhookTestResult {
    /// The test event's `webhook-id` (`msg_` and 32 hex digits), a new one each time.
    pub id: String,
    /// Whether the endpoint answered 2xx.
    pub delivered: bool,
    /// The answer's HTTP status; null when none came (`error` says why).
    pub status: Option<u16>,
    /// What went wrong; null when it was delivered.
    pub error: Option<String>,
    /// How long the endpoint took to answer, or the send to fail, in milliseconds.
    pub duration_ms: u32,
}

/// The prefix of an endpoint's id as partners and operators see it.
const ENDPOINT_PREFIX: &str = "ep_";

/// Endpoint `id` as partners and operators name it: `ep_` and 32 hex digits.
pub fn endpoint_name(id: Uuid) -> String {
    format!("{ENDPOINT_PREFIX}{}", id.simple())
}

/// The endpoint `name` names ([`endpoint_name`]); `None` when it names none.
pub fn parse_endpoint_name(name: &str) -> Option<Uuid> {
    // Only the 32-digit form: `Uuid` would also take hyphenated and braced ones.
    let hex = name.strip_prefix(ENDPOINT_PREFIX)?;
    Uuid::try_parse(hex).ok().filter(|_| hex.len() == 32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endpoint_is_named_by_its_id_in_one_form_only() {
        let id = Uuid::from_u128(0x0192_3f5e_0000_7000_8000_0000_0000_00ab);
        let name = endpoint_name(id);
        assert_eq!(name, "ep_01923f5e0000700080000000000000ab");
        assert_eq!(parse_endpoint_name(&name), Some(id));
        for other in [
            id.simple().to_string(),
            format!("ep_{}", id.hyphenated()),
            format!("ep_{{{}}}", id.simple()),
            format!("EP_{}", id.simple()),
            "ep_".to_owned(),
        ] {
            assert_eq!(parse_endpoint_name(&other), None, "{other}");
        }
    }
}
