//! What the delivery worker holds of one event while it tries to send it, and how the try
//! ended: read by the queue, which claims events and records outcomes, and by the history,
//! which keeps each try. Neither names the other for these.

use chrono::{DateTime, Utc};
use uuid::Uuid;

/// An event claimed for sending, with what its payload needs.
#[derive(Debug, Clone)]
pub struct DueDelivery {
    /// The event's id.
    pub id: Uuid,
    /// The case it is about.
    pub case_id: Uuid,
    /// The event type.
    pub event_type: String,
    /// When the change happened.
    pub created_at: DateTime<Utc>,
    /// Tries so far, this one included.
    pub attempts: i32,
    /// The case's reference.
    pub reference: String,
    /// The case's brand.
    pub brand: String,
    /// The case's status now.
    pub status: String,
    /// The product attached, for `product.attached`.
    pub product_uuid: Option<Uuid>,
    /// Whether later events of its case waited for it when it was claimed.
    pub later_waiting: bool,
    /// A sandbox case whose address asks its events to fail a few tries first
    /// ([`crate::sandbox::Trigger::WebhookFails`]).
    pub fails_on_purpose: bool,
}

/// How a try ended.
#[derive(Debug, Clone)]
pub enum TryOutcome {
    /// The partner answered 2xx.
    Delivered {
        /// The answer's status.
        status: u16,
    },
    /// To be tried again at the given time.
    Retry {
        /// When.
        at: DateTime<Utc>,
        /// The answer's status, if one came.
        status: Option<u16>,
        /// What went wrong.
        error: String,
    },
    /// Given up on.
    Failed {
        /// The answer's status, if one came.
        status: Option<u16>,
        /// What went wrong.
        error: String,
    },
}
