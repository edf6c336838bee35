//! DPoP (RFC 9449): a key the client keeps to itself and proves it holds with every request,
//! so that a token copied on its way is of no use without it.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};

use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::jwk::{Jwk, ThumbprintHash};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde::Serialize;
use shared::dpop::{PROOF_TYP, token_hash};

use crate::error::{BuildError, TokenError};

/// A P-256 key that signs DPoP proofs (ES256); its `Debug` shows only its thumbprint.
///
/// It also keeps the last server nonce (RFC 9449 section 8) each server handed out, by
/// origin, and puts it in the next proof for that server; clones share them.
#[derive(Clone)]
pub struct DpopKey {
    encoding: EncodingKey,
    jwk: Jwk,
    thumbprint: String,
    nonces: Arc<Mutex<HashMap<String, String>>>,
}

impl fmt::Debug for DpopKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DpopKey")
            .field("thumbprint", &self.thumbprint)
            .finish_non_exhaustive()
    }
}

/// The claims of a proof (RFC 9449 section 4.2).
#[derive(Serialize)]
struct ProofClaims<'a> {
    jti: String,
    htm: &'a str,
    htu: &'a str,
    iat: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    ath: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    nonce: Option<String>,
}

/// The longest nonce kept: a server's are far shorter; a longer one is not taken.
const MAX_NONCE_CHARS: usize = 512;

/// What a nonce is kept under: the URL's scheme, host and port.
fn origin(url: &str) -> Option<String> {
    let url = reqwest::Url::parse(url).ok()?;
    Some(url.origin().ascii_serialization())
}

impl DpopKey {
    /// A new key, kept in memory only: tokens bound to it are good only in this process,
    /// which is what makes a copied one useless.
    pub fn generate() -> Result<Self, BuildError> {
        let unusable = || BuildError::InvalidKey("no P-256 key could be generated".into());
        let pair =
            EcdsaKeyPair::generate(&ECDSA_P256_SHA256_FIXED_SIGNING).map_err(|_| unusable())?;
        let pkcs8 = pair.to_pkcs8v1().map_err(|_| unusable())?;
        // The public point: 0x04, then x and y, 32 bytes each.
        let point = pair.public_key().as_ref();
        let jwk: Jwk = serde_json::from_value(serde_json::json!({
            "kty": "EC",
            "crv": "P-256",
            "x": URL_SAFE_NO_PAD.encode(&point[1..33]),
            "y": URL_SAFE_NO_PAD.encode(&point[33..65]),
        }))
        .map_err(|_| unusable())?;
        let thumbprint = jwk
            .thumbprint(ThumbprintHash::SHA256)
            .map_err(|_| unusable())?;
        Ok(Self {
            encoding: EncodingKey::from_ec_der(pkcs8.as_ref()),
            jwk,
            thumbprint,
            nonces: Arc::default(),
        })
    }

    /// Keeps the nonce of an answer from `url`'s server (its `DPoP-Nonce` header), if it
    /// carries one, for the next proof made for that server. Returns whether it did.
    pub fn remember_nonce(&self, url: &str, headers: &reqwest::header::HeaderMap) -> bool {
        let nonce = headers
            .get("dpop-nonce")
            .and_then(|v| v.to_str().ok())
            .filter(|n| !n.is_empty() && n.len() <= MAX_NONCE_CHARS);
        let (Some(nonce), Some(origin)) = (nonce, origin(url)) else {
            return false;
        };
        let mut nonces = self.nonces.lock().unwrap_or_else(|e| e.into_inner());
        nonces.insert(origin, nonce.to_owned());
        true
    }

    /// The nonce kept for `url`'s server, if any.
    pub fn nonce_for(&self, url: &str) -> Option<String> {
        let nonces = self.nonces.lock().unwrap_or_else(|e| e.into_inner());
        nonces.get(&origin(url)?).cloned()
    }

    /// The key's JWK SHA-256 thumbprint (RFC 7638): what a token bound to it names in
    /// `cnf.jkt`.
    pub fn thumbprint(&self) -> &str {
        &self.thumbprint
    }

    /// A new proof for one request: `method` on `url`, beside `access_token` when one is
    /// sent (its hash goes in `ath`; none at the token endpoint), with the nonce `url`'s
    /// server last handed out, if it has.
    pub fn proof(
        &self,
        method: &str,
        url: &str,
        access_token: Option<&str>,
    ) -> Result<String, TokenError> {
        let mut header = Header::new(Algorithm::ES256);
        header.typ = Some(PROOF_TYP.to_owned());
        header.jwk = Some(self.jwk.clone());
        let htu = url.split(['?', '#']).next().unwrap_or(url);
        let claims = ProofClaims {
            jti: uuid::Uuid::new_v4().to_string(),
            htm: method,
            htu,
            iat: chrono::Utc::now().timestamp(),
            ath: access_token.map(token_hash),
            nonce: self.nonce_for(url),
        };
        jsonwebtoken::encode(&header, &claims, &self.encoding)
            .map_err(|e| TokenError::Signing(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proof_carries_the_public_key_and_the_request() {
        let key = DpopKey::generate().unwrap();
        let proof = key
            .proof(
                "POST",
                "https://intake.example/partners/external/intake?x=1",
                Some("tok"),
            )
            .unwrap();
        let header = jsonwebtoken::decode_header(&proof).unwrap();
        assert_eq!(header.typ.as_deref(), Some(PROOF_TYP));
        let jwk = header.jwk.expect("the public key");
        assert_eq!(
            jwk.thumbprint(ThumbprintHash::SHA256).unwrap(),
            key.thumbprint()
        );
        let mut validation = jsonwebtoken::Validation::new(Algorithm::ES256);
        validation.set_required_spec_claims::<&str>(&[]);
        validation.validate_exp = false;
        let claims = jsonwebtoken::decode::<serde_json::Value>(
            &proof,
            &jsonwebtoken::DecodingKey::from_jwk(&jwk).unwrap(),
            &validation,
        )
        .expect("signed with the key it carries")
        .claims;
        assert_eq!(claims["htm"], "POST");
        assert_eq!(
            claims["htu"],
            "https://intake.example/partners/external/intake"
        );
        assert_eq!(claims["ath"], token_hash("tok"));
        assert!(claims.get("nonce").is_none());
        let again = key.proof("POST", "https://intake.example/", None).unwrap();
        assert_ne!(proof, again);
        assert!(!format!("{key:?}").contains("EncodingKey"));
    }

    fn claims_of(proof: &str) -> serde_json::Value {
        let payload = proof.split('.').nth(1).unwrap();
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).unwrap()).unwrap()
    }

    #[test]
    fn a_servers_nonce_goes_in_the_next_proofs_for_that_server_only() {
        let key = DpopKey::generate().unwrap();
        let mut headers = reqwest::header::HeaderMap::new();
        assert!(!key.remember_nonce("https://intake.example/x", &headers));
        headers.insert("DPoP-Nonce", "n-1".parse().unwrap());
        assert!(key.remember_nonce("https://intake.example/partners/external/intake", &headers));
        let shared = key.clone();
        let proof = shared
            .proof(
                "GET",
                "https://intake.example:443/partners/external/cases/1",
                None,
            )
            .unwrap();
        assert_eq!(claims_of(&proof)["nonce"], "n-1");
        // Another server's proofs carry none; a new nonce replaces the old.
        let other = key
            .proof("POST", "https://auth.example/oauth/token", None)
            .unwrap();
        assert!(claims_of(&other).get("nonce").is_none());
        headers.insert("DPoP-Nonce", "n-2".parse().unwrap());
        key.remember_nonce("https://intake.example/", &headers);
        assert_eq!(
            shared.nonce_for("https://intake.example/a").as_deref(),
            Some("n-2")
        );
        headers.insert(
            "DPoP-Nonce",
            "x".repeat(MAX_NONCE_CHARS + 1).parse().unwrap(),
        );
        assert!(!key.remember_nonce("https://intake.example/", &headers));
    }
}
