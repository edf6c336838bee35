//! Webhooks to partners, as the Standard Webhooks specification has them, so partners verify
//! them with its libraries: `webhook-id`, `webhook-timestamp` and `webhook-signature` (`v1,`
//! and base64 HMAC-SHA256 over `id.timestamp.body`, one signature per secret in use), with
//! secrets `whsec_` and base64.
//!
//! The worker sends what the outbox (`store`) holds: each partner's events on a task
//! of their own, so a slow or dead endpoint holds up only itself; each case's events to a
//! partner in order; retried with exponential back-off and jitter until the retry window
//! ends. Replicas claim events with a lease, so in the normal case each is sent once.

mod addresses;
mod delivery;
mod signing;
mod store;

pub use addresses::*;
pub use delivery::*;
pub use signing::*;
pub use store::*;
