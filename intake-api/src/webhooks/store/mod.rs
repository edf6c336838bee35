//! Webhooks in the database: partners' endpoints, their event types and their secrets
//! (`endpoints`), and (`outbox`) the events as the delivery worker claims them and records
//! their outcomes, (`tries`) what one try holds and how it ended, and (`history`) as partners and operators read each try, resend them,
//! and as the retention prunes them. Events are queued by
//! the changes they report (`store::outbox`).

mod endpoints;
mod history;
mod outbox;
mod tries;

pub use endpoints::{
    ChangedBy, Created, EndpointChange, EndpointView, NewEndpoint, SetOutcome, Subscription,
    endpoint_name, parse_endpoint_name,
};
pub use history::{AttemptView, DeliveryView, HistoryCursor, HistoryQuery, RECOVER_AT_ONCE, Tried};
pub use outbox::{CHECKED_WITHIN, EndpointDue};
pub use tries::{DueDelivery, TryOutcome};

#[cfg(test)]
mod tests;
