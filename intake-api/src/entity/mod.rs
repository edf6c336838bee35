//! Database tables of the intake-api.

pub mod case;
pub mod case_event;
pub mod idempotency_key;
pub mod redirect_token;
pub mod submission;
pub mod webhook_attempt;
pub mod webhook_delivery;
pub mod webhook_endpoint;
