//! Webhooks in the database: partners' endpoints, their event types and their secrets
//! (`endpoints`), and (`outbox`) the events as the delivery worker claims them and records
//! their outcomes, and as partners and operators list and resend them. Events are queued by
//! the changes they report (`store::outbox`).

mod endpoints;
mod outbox;

pub use endpoints::{
    Created, EndpointChange, EndpointView, NewEndpoint, SetOutcome, Subscription, endpoint_name,
    parse_endpoint_name,
};
pub use outbox::{DeliveryView, DueDelivery, EndpointDue, TryOutcome};

#[cfg(test)]
mod tests;
