//! Hostile client assertions (private_key_jwt), and hostile JWKS registered for them: any
//! bytes must be refused with an assertion failure, or read without a panic; an assertion is
//! accepted only when the client's key signed it, for this issuer, at this time.
//!
//! The input is the `client_assertion`, then, after the first newline, the JWKS the client
//! registered; without a newline the assertion meets [`REGISTERED`], which the RS256, PS256
//! and ES256 seeds are signed for.

#![no_main]

use std::sync::LazyLock;

use auth_server::assertion::{
    ClientAssertion, JWT_BEARER, LEEWAY_SECS, MAX_ASSERTION_CHARS, MAX_LIFETIME_SECS,
};
use auth_server::client_keys::{ClientKeys, KeysRefused, MAX_KEYS};
use auth_server::error::ClientFailure;
use auth_server::token_request::{BodyKind, parse_params};
use chrono::DateTime;
use libfuzzer_sys::fuzz_target;

const CLIENT_ID: &str = "partner-1";
const AUDIENCES: [&str; 2] = ["https://auth.example", "https://auth.example/oauth/token"];
/// The seeds' `iat`: a fixed clock keeps their signatures and times good for every run.
const NOW: i64 = 1_800_000_000;

/// The seeds' client keys, public halves only (RSA `rsa-1`, EC P-256 `ec-1`); the private
/// halves were thrown away once the seeds were signed.
const REGISTERED: &str = r#"{"keys":[{"kty":"RSA","kid":"rsa-1","n":"lJMCHzv85Wqrn1tJUqS1dw6HqNGbXBhm-Aeb82TSkmAnUxOOyl9HlORQkTlD4AqRTGZOnTaex5SAXyfPaCym2aamF6ZEOiQnKbbzQhn5nWcqq5C4v6y2_nVZYq51_k5L7kg01iEr4YbnuitCeq35lXps65v0ArcTVAvjYKsT6Sr44iC7ZnVB6ABfS42GDPfdbO7wtGn8sxYu1-cXfqefwGIJ_m7DlOCKgvMYN_sIM9XmNI55YLLBxJg08Qu4v7lpob0bur5etBU9SX1OhbEliZpuMZcwzvuKdtIMsSJakyTEkovG0VejmRcMbNgm0kGsz9RdfrQTYZqwbL1McBeU9Q","e":"AQAB","use":"sig"},{"kty":"EC","kid":"ec-1","crv":"P-256","x":"DWE3st-bD4p1YYMbAzT7z7MZOoIO0Kb35-ttbZPzFLQ","y":"gf7W-bHe4o5RkbVn-u3MClIPNLJmIJssD16dVH1pNPA","use":"sig"}]}"#;

static KEYS: LazyLock<ClientKeys> =
    LazyLock::new(|| ClientKeys::parse(REGISTERED).expect("the seeds' keys are registrable"));

/// Every failure reading and checking an assertion may end in; replay is the database's
/// to tell, and the others are about the client, not its assertion.
const ASSERTION_FAILURES: [ClientFailure; 8] = [
    ClientFailure::AssertionMalformed,
    ClientFailure::AssertionAlgorithm,
    ClientFailure::AssertionSignature,
    ClientFailure::AssertionIssuer,
    ClientFailure::AssertionAudience,
    ClientFailure::AssertionExpired,
    ClientFailure::AssertionLifetime,
    ClientFailure::AssertionNotYetValid,
];

fuzz_target!(|data: &[u8]| {
    let (assertion, jwks) = match data.iter().position(|&b| b == b'\n') {
        Some(i) => (&data[..i], Some(&data[i + 1..])),
        None => (data, None),
    };
    let registered;
    let keys = match jwks.map(std::str::from_utf8) {
        None => &*KEYS,
        Some(Err(_)) => return,
        Some(Ok(text)) => match ClientKeys::parse(text) {
            Ok(keys) => {
                assert!(!keys.keys().is_empty() && keys.keys().len() <= MAX_KEYS);
                let again = ClientKeys::load(keys.stored()).expect("stored keys load again");
                assert_eq!(again.summary(), keys.summary());
                registered = keys;
                &registered
            }
            Err(KeysRefused(problems)) => {
                assert!(!problems.is_empty());
                return;
            }
        },
    };
    let Ok(text) = std::str::from_utf8(assertion) else {
        return;
    };
    // Through the token request's own parameter parsing, which holds the length limit.
    let body = serde_json::json!({
        "grant_type": "client_credentials",
        "client_assertion_type": JWT_BEARER,
        "client_assertion": text,
    });
    let body = serde_json::to_vec(&body).expect("JSON written");
    let params = match parse_params(BodyKind::Json, &body) {
        Ok(params) => params,
        Err(_) => {
            assert!(text.chars().count() > MAX_ASSERTION_CHARS);
            return;
        }
    };
    assert!(text.chars().count() <= MAX_ASSERTION_CHARS);
    let Some(sent) = params.client_assertion else {
        assert!(text.is_empty());
        return;
    };
    assert_eq!(sent.expose(), text);
    let read = match ClientAssertion::read(sent.expose()) {
        Ok(read) => read,
        Err(failure) => {
            assert_eq!(failure, ClientFailure::AssertionMalformed);
            return;
        }
    };
    let now = DateTime::from_timestamp(NOW, 0).expect("a time");
    match read.verify(CLIENT_ID, keys, &AUDIENCES, now) {
        Ok(spent) => {
            assert_eq!(read.issuer(), Some(CLIENT_ID));
            // The one rule of a single-use id, as for DPoP proofs.
            assert!(
                shared::claims::is_acceptable_jti(&spent.jti),
                "{:?}",
                spent.jti
            );
            let kept_until = spent.expires_at.timestamp();
            assert!(kept_until > NOW && kept_until <= NOW + MAX_LIFETIME_SECS + 2 * LEEWAY_SECS);
        }
        Err(failure) => assert!(ASSERTION_FAILURES.contains(&failure), "{failure:?}"),
    }
});
