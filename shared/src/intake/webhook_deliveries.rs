//! A partner's delivery history as the API shows it (`/partners/external/webhooks/deliveries`):
//! each event queued for each of its endpoints, how it stands, and every try with its answer,
//! and the requests that send events again.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::webhooks::EventType;

/// How an event's delivery to an endpoint stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(poem_openapi::Enum))]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "openapi", oai(rename_all = "lowercase"))]
pub enum DeliveryStatus {
    /// Waiting for its first try (or for the endpoint to be enabled), or being sent now.
    Pending,
    /// The endpoint answered 2xx.
    Delivered,
    /// A try failed; it is tried again at `next_attempt_at`.
    Failing,
    /// Given up on: its retry window passed, the endpoint answered `410 Gone`, or its
    /// address is not one events may go to. Send it again with `redeliver` or `recover`.
    Failed,
}

impl DeliveryStatus {
    /// Every status, in the order a delivery may go through them.
    pub const ALL: [DeliveryStatus; 4] = [
        DeliveryStatus::Pending,
        DeliveryStatus::Failing,
        DeliveryStatus::Delivered,
        DeliveryStatus::Failed,
    ];

    /// The status as the API writes it.
    pub fn name(self) -> &'static str {
        match self {
            DeliveryStatus::Pending => "pending",
            DeliveryStatus::Delivered => "delivered",
            DeliveryStatus::Failing => "failing",
            DeliveryStatus::Failed => "failed",
        }
    }

    /// The status named `name`.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.name() == name)
    }
}

/// One event for one endpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(poem_openapi::Object))]
pub struct WebhookDelivery {
    /// The event's id, sent as its `webhook-id` (`msg_` and 32 hex digits); the same for
    /// each endpoint the event goes to.
    pub id: String,
    /// The endpoint it goes to (`ep_` and 32 hex digits).
    pub endpoint_id: String,
    /// The event's type.
    pub event_type: EventType,
    /// The reference of the case it is about.
    pub reference: String,
    /// When the change it reports happened.
    pub created_at: DateTime<Utc>,
    /// How it stands.
    pub status: DeliveryStatus,
    /// Tries so far.
    pub attempt_count: u32,
    /// When it is tried next; null unless pending or failing.
    pub next_attempt_at: Option<DateTime<Utc>>,
    /// When the endpoint acknowledged it; null until then.
    pub delivered_at: Option<DateTime<Utc>>,
    /// The HTTP status of the last answer; null before any answer came.
    pub last_status: Option<u16>,
    /// What went wrong with the last try; null when it went through.
    pub last_error: Option<String>,
}

/// One try to deliver an event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(poem_openapi::Object))]
pub struct WebhookAttempt {
    /// Which try it was, from 1.
    pub attempt: u32,
    /// When the request was sent.
    pub attempted_at: DateTime<Utc>,
    /// The answer's HTTP status; null when none came (`error` says why).
    pub status: Option<u16>,
    /// What went wrong; null for a try that delivered the event.
    pub error: Option<String>,
    /// How long the endpoint took to answer, or the try to fail, in milliseconds.
    pub duration_ms: u32,
    /// When the next try was set for, after a failed one; null otherwise.
    pub next_attempt_at: Option<DateTime<Utc>>,
}

/// An event for an endpoint with each of its tries, oldest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(poem_openapi::Object))]
pub struct WebhookDeliveryDetail {
    /// The event and how it stands.
    #[serde(flatten)]
    #[cfg_attr(feature = "openapi", oai(flatten))]
    pub delivery: WebhookDelivery,
    /// Its tries, oldest first, as long as the history keeps them.
    pub attempts: Vec<WebhookAttempt>,
}

/// A page of the delivery history, newest event first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(poem_openapi::Object))]
pub struct WebhookDeliveryList {
    /// The events.
    pub data: Vec<WebhookDelivery>,
    /// Pass as `cursor` for the next page, with the same filters; null on the last page.
    pub next_cursor: Option<String>,
}

/// Which of an endpoint's events not delivered to send again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(poem_openapi::Object))]
#[cfg_attr(feature = "openapi", oai(deny_unknown_fields))]
pub struct RecoverRequest {
    /// Events that happened at or after this time.
    pub since: DateTime<Utc>,
    /// And before this time; now when left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<DateTime<Utc>>,
}

/// What a recovery queued.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(poem_openapi::Object))]
pub struct RecoverResult {
    /// Events not delivered (failed, or waiting for a retry) queued to be sent again at
    /// once, each once, in order per case.
    pub queued: u64,
    /// More such events of the window wait: send the same request again for them.
    pub more: bool,
}
