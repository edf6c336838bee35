//! DPoP at the token endpoint (RFC 9449 section 5): a request carrying a proof gets a token
//! bound to the proof's key, good only beside proofs made with that key.

use poem::Request;

use crate::error::OAuthError;
use crate::state::AppState;

/// The thumbprint of the key the request proves it holds, when it carries a `DPoP` proof for
/// `POST` on the token endpoint's URL; `None` when it carries none. A proof is good once, on
/// every replica sharing the Redis.
pub async fn proof_key(
    req: &Request,
    state: &AppState,
    now: i64,
) -> Result<Option<String>, OAuthError> {
    let refuse = |reason| OAuthError::InvalidDpopProof { reason };
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
    };
    let proof = shared::dpop::verify(proof, expected).map_err(refuse)?;
    if !state
        .limits
        .first_use(&proof.replay_key(), shared::dpop::JTI_RETENTION_SECS)
        .await
    {
        return Err(refuse("proof_replayed"));
    }
    Ok(Some(proof.jkt))
}

/// The token endpoint's URL, as partners call it: the issuer's.
pub fn token_endpoint(issuer: &str) -> String {
    format!("{}/oauth/token", issuer.trim_end_matches('/'))
}
