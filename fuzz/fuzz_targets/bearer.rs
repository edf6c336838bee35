//! Hostile `Authorization` headers: any bytes a client sends must be refused or read without a
//! panic, before a key or the JWKS is ever consulted.

#![no_main]

use intake_api::auth::{MAX_TOKEN_BYTES, Refusal, parse_bearer};
use shared::access_token::TokenFault;
use shared::refusal::TokenRefusal;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    match parse_bearer(Some(data)) {
        Ok(parsed) => {
            let header = std::str::from_utf8(data).expect("only UTF-8 headers carry a token");
            let token = parsed.token;
            assert!(!token.is_empty() && token.len() <= MAX_TOKEN_BYTES);
            assert_eq!(token.trim(), token);
            assert_eq!(token.split('.').count(), 3, "{token:?}");
            // The token is the header's own text after a `Bearer` scheme, never something rebuilt.
            let scheme = header
                .trim_start()
                .get(..6)
                .expect("a scheme before the token");
            assert!(scheme.eq_ignore_ascii_case("bearer"));
            assert!(header.trim_end().ends_with(token));
        }
        Err(Refusal::Missing) => {}
        Err(Refusal::Invalid(
            TokenRefusal::Unreadable
            | TokenRefusal::TooLong
            | TokenRefusal::Fault(TokenFault::Malformed),
        )) => {}
        Err(Refusal::Invalid(why)) => panic!("{} is not known before verification", why.label()),
        Err(Refusal::InsufficientScope(_)) => panic!("scope is not known before verification"),
        Err(Refusal::Unvetted(_)) => {
            panic!("the revocation list is consulted only after verification")
        }
        Err(
            Refusal::InvalidProof(_) | Refusal::InvalidBoundToken(_) | Refusal::UseDpopNonce,
        ) => {
            panic!("a bearer header is never read as DPoP")
        }
    }
});
