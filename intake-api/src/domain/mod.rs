//! Domain types: every value past the HTTP edge is parsed into one of these.
