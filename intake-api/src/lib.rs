//! The intake-api: verifies partners' bearer tokens, validates enquiries, creates or updates
//! cases that activate after a delay, and attaches eligibility-engine products.

pub mod domain;
