//! Webhooks to partners, as the Standard Webhooks specification has them, so partners verify
//! them with its libraries: `webhook-id`, `webhook-timestamp` and `webhook-signature` (`v1,`
//! and base64 HMAC-SHA256 over `id.timestamp.body`, one signature per secret in use), with
//! secrets `whsec_` and base64.
//!
//! The worker (`delivery`) sends what the outbox table holds (`store`): each partner's events on a task
//! of their own, so a slow or dead endpoint holds up only itself; each case's events to a
//! partner in order; retried with exponential back-off and jitter until the retry window
//! ends. Replicas claim events with a lease, so in the normal case each is sent once.
//! A partner's task claims the next events while the last ones are out and records
//! outcomes in batches, so one partner gets as many events a second as its endpoint
//! answers; a change on this replica wakes the worker, the poll finding the rest.
//!
//! Operators manage endpoints, secrets and deliveries with `intake-api webhook ...` (`cli`).

mod cli;
pub mod delivery;
pub mod signing;
pub mod store;
pub mod target;

pub(crate) use cli::webhook_report;
pub use cli::{WebhookCommand, webhook};
pub use delivery::run;
