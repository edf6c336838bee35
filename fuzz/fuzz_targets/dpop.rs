//! Hostile DPoP proofs and `Authorization: DPoP` headers: any bytes must be refused with a
//! known reason, or read without a panic; a proof is accepted only for the request it names.

#![no_main]

use intake_api::auth::{AuthError, dpop_token};
use libfuzzer_sys::fuzz_target;
use shared::dpop::{Expected, MAX_PROOF_BYTES, verify};

/// Every reason a proof may be refused for.
const REASONS: [&str; 14] = [
    "proof_size",
    "proof_malformed",
    "proof_typ",
    "proof_alg",
    "proof_crit",
    "proof_jwk",
    "proof_private_key",
    "proof_signature",
    "proof_jti",
    "proof_htm",
    "proof_htu",
    "proof_iat",
    "proof_ath",
    "proof_key_mismatch",
];

fuzz_target!(|data: &[u8]| {
    match dpop_token(Some(data)) {
        None | Some(Ok(_)) => {}
        Some(Err(AuthError::InvalidBoundToken(reason))) => {
            assert!(["missing", "too_long"].contains(&reason), "{reason}")
        }
        Some(Err(e)) => panic!("a DPoP header is refused only as a bound token: {e}"),
    }
    let Ok(proof) = std::str::from_utf8(data) else {
        return;
    };
    let expected = Expected {
        method: "POST",
        url: "https://intake.example/partners/external/intake",
        access_token: Some("token"),
        now: 1_800_000_000,
        algorithms: &shared::dpop::ALGORITHMS,
    };
    match verify(proof, expected) {
        Ok(checked) => {
            assert!(proof.trim().len() <= MAX_PROOF_BYTES);
            assert!(
                shared::claims::is_acceptable_jti(&checked.jti),
                "{:?}",
                checked.jti
            );
            assert_eq!(checked.jkt.len(), 43);
        }
        Err(reason) => assert!(REASONS.contains(&reason), "{reason}"),
    }
});
