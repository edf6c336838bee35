//! HTTP routes of the intake-api.

pub mod extract;
pub mod intake;
