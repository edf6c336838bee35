//! End-to-end tests of the auth-server over HTTP, on SQLite and on PostgreSQL.

mod helpers;

mod clients;
mod keys;
mod limits;
mod token;
