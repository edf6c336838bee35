//! Hostile DPoP proofs and `Authorization: DPoP` headers: any bytes must be refused with a
//! known reason, or read without a panic; a proof is accepted only for the request it names.

#![no_main]

use intake_api::auth::{Refusal, dpop_token};
use libfuzzer_sys::fuzz_target;
use shared::dpop::{Expected, MAX_PROOF_BYTES, ProofFault, verify};
use shared::refusal::TokenRefusal;

fuzz_target!(|data: &[u8]| {
    match dpop_token(Some(data)) {
        None | Some(Ok(_)) => {}
        Some(Err(Refusal::InvalidBoundToken(TokenRefusal::Missing | TokenRefusal::TooLong))) => {}
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
        Err(
            ProofFault::Size
            | ProofFault::Malformed
            | ProofFault::Typ
            | ProofFault::Alg
            | ProofFault::Crit
            | ProofFault::Jwk
            | ProofFault::PrivateKey
            | ProofFault::Signature
            | ProofFault::Jti
            | ProofFault::Htm
            | ProofFault::Htu
            | ProofFault::Iat
            | ProofFault::Ath,
        ) => {}
        Err(
            why @ (ProofFault::Missing
            | ProofFault::Required
            | ProofFault::Multiple
            | ProofFault::Replayed
            | ProofFault::PredatesReplayStore),
        ) => panic!("{why} is not the proof's own fault"),
    }
});
