//! Webhooks in the database: partners' endpoints, their event types and their secrets
//! (`endpoints`); the queue of events as the delivery worker claims them and records their
//! outcomes (`queue`); what one try holds and how it ended (`tries`); and each try as
//! partners and operators read it, resend it, and as the retention prunes it (`history`).
//! Events are queued, in the transaction of the change they report, by `store::fan_out`.

mod endpoints;
mod history;
mod queue;
mod tries;

pub use endpoints::{
    ChangedBy, Created, EndpointChange, EndpointView, NewEndpoint, SetOutcome, Subscription,
};
pub use history::{AttemptView, DeliveryView, HistoryCursor, HistoryQuery, RECOVER_AT_ONCE, Tried};
pub use queue::{CHECKED_WITHIN, EndpointDue};
pub use tries::{DueDelivery, TryOutcome};

#[cfg(test)]
mod tests;
