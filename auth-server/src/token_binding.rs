//! DPoP at the token endpoint (RFC 9449 section 5): a request carrying a proof gets a token
//! bound to the proof's key, good only beside proofs made with that key.

use poem::Request;
use service_kit::dpop_nonce::Unspent;
use shared::dpop::ProofFault;

use crate::error::OAuthError;
use crate::state::AppState;

/// The thumbprint of the key the request proves it holds, when it carries a `DPoP` proof for
/// `POST` on the token endpoint's URL; `None` when it carries none. A proof is good once, at
/// every replica, for as long as it could be accepted; when that cannot be recorded, the
/// request is refused as the server's to retry (503). With server nonces on, a proof must
/// carry a current one (`use_dpop_nonce` otherwise).
pub async fn proof_key(
    req: &Request,
    state: &AppState,
    now: i64,
) -> Result<Option<String>, OAuthError> {
    let algorithms = state.config.profile().algorithms();
    let refuse = |reason| OAuthError::InvalidDpopProof { reason, algorithms };
    let Some(proof) = shared::dpop::single_proof(req.headers().get_all("dpop")).map_err(refuse)?
    else {
        return Ok(None);
    };
    let url = token_endpoint(&state.config.issuer);
    let expected = shared::dpop::Expected {
        method: "POST",
        url: &url,
        access_token: None,
        now,
        algorithms,
    };
    let proof = shared::dpop::verify(proof, expected).map_err(refuse)?;
    let nonces = state.dpop_nonces.as_deref();
    match service_kit::dpop_nonce::spend(&state.replay, nonces, &proof, now).await {
        Ok(()) => {}
        Err(Unspent::UseNonce) => return Err(OAuthError::UseDpopNonce),
        Err(Unspent::Unavailable) => return Err(OAuthError::TemporarilyUnavailable),
        Err(Unspent::Replayed) => return Err(refuse(ProofFault::Replayed)),
        Err(Unspent::Forgotten) => return Err(refuse(ProofFault::PredatesReplayStore)),
    }
    Ok(Some(proof.jkt))
}

/// The token endpoint's URL, as partners call it: the issuer's.
pub fn token_endpoint(issuer: &str) -> String {
    format!("{}/oauth/token", issuer.trim_end_matches('/'))
}
