//! End-to-end tests of the intake-api over HTTP, against a real auth-server, on SQLite and
//! on PostgreSQL.

mod helpers;

mod activation;
mod attach;
mod bearer;
mod cases;
mod jwks;
mod replicas;
mod validation;
