//! HTTP routes of the intake-api.

pub mod bodies;
pub mod extract;
pub mod intake;
