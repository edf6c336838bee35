//! Why a request's access token or DPoP proof is refused: one typed answer for every service
//! that takes tokens (the intake-api, the auth-server's `/revocations`). A reason added here
//! is counted, logged and explained the same at both, and every match over it is checked
//! whole by the compiler: nothing falls through to "malformed" unnoticed.

/// Why a token is refused on its own account, before its client is looked at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenFault {
    /// Not three base64url parts with a JSON header, or claims that are not an access
    /// token's.
    Malformed,
    /// An `alg` no key of ours can have (`none`, HMAC, ...), or not the algorithm of the key
    /// its `kid` names.
    Algorithm,
    /// Not typed as an access token (`at+jwt`, RFC 9068).
    Typ,
    /// A critical header extension: none is understood here (RFC 7515 section 4.1.11).
    Crit,
    /// No `kid`.
    KidMissing,
    /// A `kid` no published key has.
    KidUnknown,
    /// Past its `exp`, give or take the leeway.
    Expired,
    /// Before its `nbf`, give or take the leeway.
    NotYetValid,
    /// Another issuer's.
    Issuer,
    /// For another audience.
    Audience,
    /// The key its `kid` names did not sign it.
    Signature,
    /// A registered claim (`exp`, `nbf`, `iss`, `aud`, `sub`) missing.
    Claims,
}

impl TokenFault {
    /// The reason a refusal is counted and logged under.
    pub const fn label(self) -> &'static str {
        match self {
            Self::Malformed => "malformed",
            Self::Algorithm => "algorithm",
            Self::Typ => "typ",
            Self::Crit => "crit",
            Self::KidMissing => "kid_missing",
            Self::KidUnknown => "kid_unknown",
            Self::Expired => "expired",
            Self::NotYetValid => "not_yet_valid",
            Self::Issuer => "issuer",
            Self::Audience => "audience",
            Self::Signature => "signature",
            Self::Claims => "claims",
        }
    }
}

impl std::fmt::Display for TokenFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.label())
    }
}

impl std::error::Error for TokenFault {}

/// Why a DPoP proof (RFC 9449) is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProofFault {
    /// None came beside a DPoP-bound token.
    Missing,
    /// None came with a token request, and the client's tokens are all to be DPoP-bound.
    Required,
    /// More than one `DPoP` header (section 4.3: which one was meant is not ours to guess).
    Multiple,
    /// Empty, or longer than any proof we take.
    Size,
    /// Not a compact JWS of base64url JSON, or a header value that is not text.
    Malformed,
    /// Not typed `dpop+jwt`.
    Typ,
    /// An algorithm the deployment's profile does not take.
    Alg,
    /// A critical header extension: none is understood here.
    Crit,
    /// No public key, or one that cannot sign with the header's algorithm.
    Jwk,
    /// The key carries private members: the client has lost it.
    PrivateKey,
    /// The signature does not verify with the proof's own key.
    Signature,
    /// No `jti`, or one empty, too long, or holding control characters.
    Jti,
    /// Made for another HTTP method.
    Htm,
    /// Made for another URL.
    Htu,
    /// Too old, or from too far ahead.
    Iat,
    /// Without this access token's hash, or with another's.
    Ath,
    /// Its `jti` was used before, at this or another replica.
    Replayed,
    /// Made before the replay store's memory begins, so it may have been used before.
    PredatesReplayStore,
}

impl ProofFault {
    /// The reason a refusal is counted and logged under.
    pub const fn label(self) -> &'static str {
        match self {
            Self::Missing => "proof_missing",
            Self::Required => "dpop_required",
            Self::Multiple => "proof_multiple",
            Self::Size => "proof_size",
            Self::Malformed => "proof_malformed",
            Self::Typ => "proof_typ",
            Self::Alg => "proof_alg",
            Self::Crit => "proof_crit",
            Self::Jwk => "proof_jwk",
            Self::PrivateKey => "proof_private_key",
            Self::Signature => "proof_signature",
            Self::Jti => "proof_jti",
            Self::Htm => "proof_htm",
            Self::Htu => "proof_htu",
            Self::Iat => "proof_iat",
            Self::Ath => "proof_ath",
            Self::Replayed => "proof_replayed",
            Self::PredatesReplayStore => "proof_predates_replay_store",
        }
    }

    /// What the client is told, in a challenge's `error_description`: enough to mend its
    /// proofs, nothing of ours.
    pub const fn problem(self) -> &'static str {
        match self {
            Self::Missing | Self::Required => "Send one DPoP proof header with the request",
            Self::Multiple => "Send exactly one DPoP proof header",
            Self::Replayed => "The DPoP proof was used before: make a new one for each request",
            Self::PredatesReplayStore => {
                "The DPoP proof was made before the server's record of used proofs begins: make a new one"
            }
            Self::Htm | Self::Htu => "The DPoP proof is for another method or URL",
            Self::Iat => "The DPoP proof is too old or from the future",
            Self::Ath => "The DPoP proof does not carry this access token's hash (ath)",
            Self::Alg | Self::Typ | Self::Crit => "The DPoP proof header is not acceptable",
            Self::Jwk | Self::PrivateKey => "The DPoP proof must carry one public key (jwk)",
            Self::Signature => "The DPoP proof signature does not verify",
            Self::Jti => "The DPoP proof's jti must be 1 to 255 bytes with no control characters",
            Self::Size | Self::Malformed => "The DPoP proof is malformed",
        }
    }
}

impl std::fmt::Display for ProofFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.label())
    }
}

/// Why a presented access token is not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenRefusal {
    /// The `Authorization` value is not text.
    Unreadable,
    /// The `DPoP` scheme with nothing after it.
    Missing,
    /// Longer than any token we issue.
    TooLong,
    /// The token itself is not good (see [`TokenFault`]).
    Fault(TokenFault),
    /// It verifies, and its client is disabled.
    ClientDisabled,
    /// Sent as a bearer token where every token must be sender-constrained (FAPI 2.0).
    BearerNotAccepted,
    /// DPoP-bound, and sent as a bearer token: a thief holding only the token gets nowhere.
    BoundTokenAsBearer,
    /// Sent under the `DPoP` scheme, and bound to no key.
    TokenNotBound,
    /// The proof is made with another key than the one the token is bound to.
    ProofKeyMismatch,
}

impl TokenRefusal {
    /// The reason a refusal is counted and logged under.
    pub const fn label(self) -> &'static str {
        match self {
            Self::Unreadable => "header",
            Self::Missing => "missing",
            Self::TooLong => "too_long",
            Self::Fault(fault) => fault.label(),
            Self::ClientDisabled => "client_disabled",
            Self::BearerNotAccepted => "bearer_not_accepted",
            Self::BoundTokenAsBearer => "bound_token_as_bearer",
            Self::TokenNotBound => "token_not_bound",
            Self::ProofKeyMismatch => "proof_key_mismatch",
        }
    }

    /// What the client is told, in a challenge's `error_description`: enough to act on
    /// (renew, fix the configuration), nothing about our keys or clients beyond that.
    pub const fn problem(self) -> &'static str {
        match self {
            Self::Fault(TokenFault::Expired) => "The access token expired",
            Self::Fault(TokenFault::NotYetValid) => "The access token is not valid yet",
            Self::Fault(TokenFault::Issuer) => "The access token is from another issuer",
            Self::Fault(TokenFault::Audience) => "The access token is for another audience",
            Self::Fault(TokenFault::KidUnknown) => "The access token is signed with an unknown key",
            Self::Fault(TokenFault::KidMissing) => "The access token names no signing key",
            Self::Fault(TokenFault::Signature) => "The access token signature does not verify",
            Self::Fault(TokenFault::Claims) => "The access token lacks a required claim",
            Self::Fault(TokenFault::Algorithm | TokenFault::Typ | TokenFault::Crit) => {
                "The access token header is not acceptable"
            }
            Self::Fault(TokenFault::Malformed) | Self::Unreadable | Self::TooLong => {
                "The access token is malformed"
            }
            Self::ClientDisabled => "The client is disabled",
            Self::BoundTokenAsBearer => {
                "The access token is DPoP-bound: send it as DPoP with a proof"
            }
            Self::TokenNotBound => "The access token is not DPoP-bound: send it as Bearer",
            Self::ProofKeyMismatch => {
                "The DPoP proof is not signed with the key the token is bound to"
            }
            Self::Missing => "No access token after DPoP",
            Self::BearerNotAccepted => {
                "This service follows FAPI 2.0: send a DPoP-bound token as DPoP with a proof, never as Bearer"
            }
        }
    }
}

impl std::fmt::Display for TokenRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.label())
    }
}

impl From<TokenFault> for TokenRefusal {
    fn from(fault: TokenFault) -> Self {
        Self::Fault(fault)
    }
}

/// Why a token that verifies cannot be vetted yet: refused for now (503), never admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unvetted {
    /// The list of disabled clients was never fetched.
    RevocationsNotLoaded,
    /// The list of disabled clients is older than the deployment allows.
    RevocationsStale,
    /// Whether the DPoP proof was used before cannot be told: the replay store is down.
    ReplayStore,
}

impl Unvetted {
    /// The reason a refusal is counted and logged under.
    pub const fn label(self) -> &'static str {
        match self {
            Self::RevocationsNotLoaded => "revocations_not_loaded",
            Self::RevocationsStale => "revocations_stale",
            Self::ReplayStore => "replay_store_unavailable",
        }
    }
}

impl std::fmt::Display for Unvetted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.label())
    }
}

/// Why a request is not authenticated or not allowed, at any service that takes our tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// No token was sent.
    Missing,
    /// A token was sent as bearer and is not taken.
    Invalid(TokenRefusal),
    /// A token was sent under the `DPoP` scheme, or is DPoP-bound, and is not taken.
    InvalidBoundToken(TokenRefusal),
    /// The DPoP proof is missing or not taken.
    InvalidProof(ProofFault),
    /// The token is good, and lacks the scope the operation needs, named here.
    InsufficientScope(&'static str),
    /// The token verifies, and cannot be vetted for now.
    Unvetted(Unvetted),
    /// Server nonces are on, and the proof carries none, or one no longer accepted.
    UseDpopNonce,
}

impl Refusal {
    /// The same refusal for a token sent under the `DPoP` scheme: a fault of the token is
    /// then a bound token's, answered with DPoP's challenge.
    pub const fn under_dpop(self) -> Self {
        match self {
            Self::Invalid(why) => Self::InvalidBoundToken(why),
            Self::Missing
            | Self::InvalidBoundToken(_)
            | Self::InvalidProof(_)
            | Self::InsufficientScope(_)
            | Self::Unvetted(_)
            | Self::UseDpopNonce => self,
        }
    }

    /// The reason for the failure metric and the log line.
    pub const fn reason(&self) -> &'static str {
        match self {
            Self::Missing => "missing",
            Self::Invalid(why) | Self::InvalidBoundToken(why) => why.label(),
            Self::InvalidProof(why) => why.label(),
            Self::InsufficientScope(_) => "scope",
            Self::Unvetted(why) => why.label(),
            Self::UseDpopNonce => "use_dpop_nonce",
        }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Missing => f.write_str("no bearer token"),
            Self::Invalid(why) => write!(f, "invalid token: {why}"),
            Self::InvalidBoundToken(why) => write!(f, "invalid DPoP-bound token: {why}"),
            Self::InvalidProof(why) => write!(f, "invalid DPoP proof: {why}"),
            Self::InsufficientScope(scope) => write!(f, "insufficient scope: {scope} needed"),
            Self::Unvetted(why) => write!(f, "cannot vet the token: {why}"),
            Self::UseDpopNonce => f.write_str("DPoP proof without a current server nonce"),
        }
    }
}

impl std::error::Error for Refusal {}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN_FAULTS: [TokenFault; 12] = [
        TokenFault::Malformed,
        TokenFault::Algorithm,
        TokenFault::Typ,
        TokenFault::Crit,
        TokenFault::KidMissing,
        TokenFault::KidUnknown,
        TokenFault::Expired,
        TokenFault::NotYetValid,
        TokenFault::Issuer,
        TokenFault::Audience,
        TokenFault::Signature,
        TokenFault::Claims,
    ];

    /// Every refusal, each reason once.
    fn every_refusal() -> Vec<Refusal> {
        let mut token: Vec<TokenRefusal> = TOKEN_FAULTS.into_iter().map(Into::into).collect();
        token.extend([
            TokenRefusal::Unreadable,
            TokenRefusal::Missing,
            TokenRefusal::TooLong,
            TokenRefusal::ClientDisabled,
            TokenRefusal::BearerNotAccepted,
            TokenRefusal::BoundTokenAsBearer,
            TokenRefusal::TokenNotBound,
            TokenRefusal::ProofKeyMismatch,
        ]);
        let proof = [
            ProofFault::Missing,
            ProofFault::Required,
            ProofFault::Multiple,
            ProofFault::Size,
            ProofFault::Malformed,
            ProofFault::Typ,
            ProofFault::Alg,
            ProofFault::Crit,
            ProofFault::Jwk,
            ProofFault::PrivateKey,
            ProofFault::Signature,
            ProofFault::Jti,
            ProofFault::Htm,
            ProofFault::Htu,
            ProofFault::Iat,
            ProofFault::Ath,
            ProofFault::Replayed,
            ProofFault::PredatesReplayStore,
        ];
        let unvetted = [
            Unvetted::RevocationsNotLoaded,
            Unvetted::RevocationsStale,
            Unvetted::ReplayStore,
        ];
        let mut all = vec![
            Refusal::Missing,
            Refusal::InsufficientScope("s"),
            Refusal::UseDpopNonce,
        ];
        all.extend(token.into_iter().map(Refusal::Invalid));
        all.extend(proof.into_iter().map(Refusal::InvalidProof));
        all.extend(unvetted.into_iter().map(Refusal::Unvetted));
        all
    }

    #[test]
    fn every_reason_has_a_label_of_its_own() {
        let all = every_refusal();
        let labels: std::collections::HashSet<&str> = all.iter().map(Refusal::reason).collect();
        // `missing` twice: no token at all, and the DPoP scheme with none after it.
        assert_eq!(labels.len(), all.len() - 1, "{labels:?}");
        assert!(
            labels
                .iter()
                .all(|l| !l.is_empty() && l.chars().all(|c| c.is_ascii_lowercase() || c == '_'))
        );
    }

    #[test]
    fn only_unreadable_tokens_are_called_malformed() {
        let malformed = "The access token is malformed";
        for refusal in every_refusal() {
            let Refusal::Invalid(why) = refusal else {
                continue;
            };
            let expected = matches!(
                why,
                TokenRefusal::Fault(TokenFault::Malformed)
                    | TokenRefusal::Unreadable
                    | TokenRefusal::TooLong
            );
            assert_eq!(why.problem() == malformed, expected, "{why:?}");
        }
    }
}
