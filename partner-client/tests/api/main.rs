//! The partner client against the real auth-server and intake-api over HTTP, on SQLite and
//! on PostgreSQL, and its wire types against the committed OpenAPI documents.

mod helpers;

mod calls;
mod dpop;
mod tokens;
mod webhooks;
mod wire;
