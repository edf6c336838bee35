//! Access tokens: asked for with the client's credentials, cached, and renewed before they
//! expire (spec 5.4), with one token request in flight however many calls need a token.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use reqwest::header::{AUTHORIZATION, HeaderValue, RETRY_AFTER};
use serde::Serialize;

use serde::Deserialize;
use shared::error::OAuthErrorBody;

use crate::dpop_key::DpopKey;
use crate::error::{BuildError, TokenError, retry_after};

/// How long before expiry a token is renewed by default (spec 5.4).
pub const DEFAULT_RENEW_BEFORE: Duration = Duration::from_secs(30);

/// A successful token response (`AccessTokenResponse`). Not `Debug`: it holds the token.
#[derive(Deserialize)]
struct AccessTokenResponse {
    token_type: String,
    expires_in: i64,
    access_token: String,
}

/// A partner's client secret. Its `Debug` never shows it, and it has no `Display`, so it
/// cannot reach a log by accident.
#[derive(Clone)]
pub struct ClientSecret(String);

impl ClientSecret {
    /// Wraps the secret the partner was given.
    pub fn new(secret: impl Into<String>) -> Self {
        Self(secret.into())
    }

    fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ClientSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ClientSecret([REDACTED])")
    }
}

impl From<String> for ClientSecret {
    fn from(secret: String) -> Self {
        Self(secret)
    }
}

/// What a partner proves it is the client with at the token endpoint.
#[derive(Debug, Clone)]
pub enum ClientAuthentication {
    /// A client secret, sent as the [`AuthMethod`] says.
    Secret(ClientSecret),
    /// `private_key_jwt` (RFC 7523): each token request carries a new assertion signed with
    /// the client's private key, good for a minute and once; nothing that could be replayed
    /// later is ever sent. The [`AuthMethod`] does not apply.
    PrivateKeyJwt(AssertionKey),
}

/// A partner's `client_id`, and its secret or signing key.
#[derive(Debug, Clone)]
pub struct Credentials {
    /// The client identifier.
    pub client_id: String,
    /// The secret or the key; neither is shown by `Debug`.
    pub authentication: ClientAuthentication,
}

impl Credentials {
    /// The credentials of a client given a secret.
    pub fn new(client_id: impl Into<String>, client_secret: impl Into<String>) -> Self {
        Self {
            client_id: client_id.into(),
            authentication: ClientAuthentication::Secret(ClientSecret::new(client_secret)),
        }
    }

    /// The credentials of a client registered with its public keys (`private_key_jwt`),
    /// signing its assertions with `key`.
    pub fn with_key(client_id: impl Into<String>, key: AssertionKey) -> Self {
        Self {
            client_id: client_id.into(),
            authentication: ClientAuthentication::PrivateKeyJwt(key),
        }
    }
}

/// The algorithms a client assertion may be signed with: the asymmetric ones the
/// auth-server accepts (never `none` or an HMAC, which would need a shared secret).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AssertionAlgorithm {
    /// RSASSA-PKCS1-v1_5 with SHA-256, on an RSA key of 2048 bits or more.
    RS256,
    /// RSASSA-PSS with SHA-256, on an RSA key.
    PS256,
    /// ECDSA on P-256 with SHA-256.
    ES256,
    /// Ed25519.
    EdDSA,
}

impl AssertionAlgorithm {
    /// Every one, as settings and documents list them.
    pub const ALL: [Self; 4] = [Self::ES256, Self::PS256, Self::RS256, Self::EdDSA];

    /// Its JOSE name (`alg`).
    pub const fn name(self) -> &'static str {
        match self {
            Self::RS256 => "RS256",
            Self::PS256 => "PS256",
            Self::ES256 => "ES256",
            Self::EdDSA => "EdDSA",
        }
    }

    fn jwt(self) -> jsonwebtoken::Algorithm {
        match self {
            Self::RS256 => jsonwebtoken::Algorithm::RS256,
            Self::PS256 => jsonwebtoken::Algorithm::PS256,
            Self::ES256 => jsonwebtoken::Algorithm::ES256,
            Self::EdDSA => jsonwebtoken::Algorithm::EdDSA,
        }
    }
}

impl std::fmt::Display for AssertionAlgorithm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Read by its JOSE name, exactly: a setting naming another is refused with the list.
impl std::str::FromStr for AssertionAlgorithm {
    type Err = String;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|a| a.name() == name)
            .ok_or_else(|| format!("{name:?} is not one of ES256, PS256, RS256, EdDSA"))
    }
}

/// The private key a client signs its assertions with; its `Debug` shows only the
/// algorithm and key id.
#[derive(Clone)]
pub struct AssertionKey {
    key: jsonwebtoken::EncodingKey,
    algorithm: AssertionAlgorithm,
    kid: Option<String>,
}

impl fmt::Debug for AssertionKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AssertionKey")
            .field("algorithm", &self.algorithm)
            .field("kid", &self.kid)
            .finish_non_exhaustive()
    }
}

impl AssertionKey {
    /// The private key in `pem` (PKCS#8, or PKCS#1 for RSA), used with `algorithm`.
    pub fn from_pem(algorithm: AssertionAlgorithm, pem: &[u8]) -> Result<Self, BuildError> {
        use jsonwebtoken::EncodingKey;
        let key = match algorithm {
            AssertionAlgorithm::RS256 | AssertionAlgorithm::PS256 => EncodingKey::from_rsa_pem(pem),
            AssertionAlgorithm::ES256 => EncodingKey::from_ec_pem(pem),
            AssertionAlgorithm::EdDSA => EncodingKey::from_ed_pem(pem),
        }
        .map_err(|e| BuildError::InvalidKey(format!("not a {algorithm:?} private key: {e}")))?;
        Ok(Self {
            key,
            algorithm,
            kid: None,
        })
    }

    /// Names the key in each assertion's header (`kid`), as the client's JWKS names it:
    /// the auth-server then checks that key alone.
    pub fn with_kid(mut self, kid: impl Into<String>) -> Self {
        self.kid = Some(kid.into());
        self
    }

    /// A new assertion that `client_id` is asking `audience` (the token endpoint's URL) for a
    /// token: good for a minute from `now`, with a random `jti`.
    fn assertion(&self, client_id: &str, audience: &str, now: i64) -> Result<String, TokenError> {
        let mut header = jsonwebtoken::Header::new(self.algorithm.jwt());
        header.kid = self.kid.clone();
        let claims = AssertionClaims {
            iss: client_id,
            sub: client_id,
            aud: audience,
            iat: now,
            exp: now + ASSERTION_LIFETIME_SECS,
            jti: uuid::Uuid::new_v4().to_string(),
        };
        jsonwebtoken::encode(&header, &claims, &self.key)
            .map_err(|e| TokenError::Signing(e.to_string()))
    }
}

/// How long an assertion is good for: it is made for one request, sent at once.
const ASSERTION_LIFETIME_SECS: i64 = 60;

/// The `client_assertion_type` of a JWT assertion (RFC 7523 section 2.2).
const JWT_BEARER: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";

/// The claims of a client assertion (RFC 7523 section 3).
#[derive(Serialize)]
struct AssertionClaims<'a> {
    iss: &'a str,
    sub: &'a str,
    aud: &'a str,
    iat: i64,
    exp: i64,
    jti: String,
}

/// How a client secret reaches the token endpoint (both are RFC 6749 section 2.3.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AuthMethod {
    /// `client_secret_post`: in the request body, as spec 5.2 shows.
    #[default]
    Post,
    /// `client_secret_basic`: in an `Authorization: Basic` header.
    Basic,
}

/// An access token, kept as its `Authorization` header value. Its `Debug` never shows it:
/// it opens the API as the secret does, and it is marked sensitive for HTTP-level logs too.
#[derive(Clone, PartialEq, Eq)]
pub struct AccessToken {
    header: HeaderValue,
    /// The token alone, when it is DPoP-bound: each call's proof carries its hash.
    bound: Option<String>,
}

impl AccessToken {
    /// `Bearer <token>`, or `DPoP <token>` when `bound`; `None` when the token cannot be a
    /// header value.
    fn new(token: &str, bound: bool) -> Option<Self> {
        let scheme = if bound { "DPoP" } else { "Bearer" };
        let mut header = HeaderValue::from_str(&format!("{scheme} {token}")).ok()?;
        header.set_sensitive(true);
        Some(Self {
            header,
            bound: bound.then(|| token.to_owned()),
        })
    }

    /// The `Authorization` header value, `Bearer <token>` or `DPoP <token>`.
    pub fn header(&self) -> HeaderValue {
        self.header.clone()
    }

    /// The token itself when it is DPoP-bound, for the proof of each call.
    pub fn bound_token(&self) -> Option<&str> {
        self.bound.as_deref()
    }
}

impl fmt::Debug for AccessToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AccessToken([REDACTED])")
    }
}

/// A token and when to stop using it.
struct Cached {
    token: AccessToken,
    /// From here on a call asks for a new token first.
    renew_at: Instant,
    /// Past here the token is no use, even when no new one can be had.
    expires_at: Instant,
}

impl Cached {
    /// When a token asked for at `requested` with lifetime `expires_in` is renewed: `margin`
    /// before it expires, or half-way through a lifetime shorter than the margin (renewing
    /// at once would ask for a token on every call).
    fn new(token: AccessToken, requested: Instant, expires_in: Duration, margin: Duration) -> Self {
        let keep = if expires_in > margin {
            expires_in - margin
        } else {
            expires_in / 2
        };
        Self {
            token,
            renew_at: requested + keep,
            expires_at: requested + expires_in,
        }
    }
}

/// What calls share under the lock.
#[derive(Default)]
struct Slot {
    cached: Option<Cached>,
    /// The failure of the last token request, when it failed.
    last_failure: Option<TokenError>,
}

/// Where tokens come from, and the one cached: what a client calls with,
/// and what any other caller of a client-credentials API can use on its own (a resource
/// server reading the auth-server's `/revocations`, for one).
pub struct TokenSource {
    http: reqwest::Client,
    token_url: reqwest::Url,
    credentials: Credentials,
    method: AuthMethod,
    scope: String,
    renew_before: Duration,
    /// The key tokens are bound to, when they are DPoP-bound.
    dpop: Option<DpopKey>,
    /// Held across a token request: that is what makes it the only one in flight.
    slot: tokio::sync::Mutex<Slot>,
    /// Token requests finished, so a call that waited for the lock knows one ended meanwhile.
    finished: AtomicU64,
}

impl fmt::Debug for TokenSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenSource")
            .field("token_url", &self.token_url.as_str())
            .field("credentials", &self.credentials)
            .field("method", &self.method)
            .field("scope", &self.scope)
            .field("renew_before", &self.renew_before)
            .finish_non_exhaustive()
    }
}

/// The token request body (spec 5.2). Not `Debug`: it may hold the secret.
#[derive(Serialize)]
struct TokenRequest<'a> {
    grant_type: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    client_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    client_secret: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    client_assertion_type: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    client_assertion: Option<String>,
    scope: &'a str,
}

impl TokenSource {
    /// A source asking `token_url` for tokens with `scope`, authenticating with `method`,
    /// and renewing each `renew_before` it expires.
    pub fn new(
        http: reqwest::Client,
        token_url: reqwest::Url,
        credentials: Credentials,
        method: AuthMethod,
        scope: String,
        renew_before: Duration,
    ) -> Self {
        Self {
            http,
            token_url,
            credentials,
            method,
            scope,
            renew_before,
            dpop: None,
            slot: tokio::sync::Mutex::default(),
            finished: AtomicU64::new(0),
        }
    }

    /// Asks for tokens bound to `key` (DPoP, RFC 9449): each token request carries a proof
    /// made with it, and so must every call made with the tokens ([`Self::proof`]).
    pub fn with_dpop(mut self, key: DpopKey) -> Self {
        self.dpop = Some(key);
        self
    }

    /// The key tokens are bound to, when they are.
    pub fn dpop_key(&self) -> Option<&DpopKey> {
        self.dpop.as_ref()
    }

    /// The `DPoP` header value for a call of `method` on `url` with `token`, when the token
    /// is DPoP-bound; `None` for a bearer token.
    pub fn proof(
        &self,
        method: &str,
        url: &str,
        token: &AccessToken,
    ) -> Result<Option<HeaderValue>, TokenError> {
        let (Some(key), Some(bound)) = (&self.dpop, token.bound_token()) else {
            return Ok(None);
        };
        let proof = key.proof(method, url, Some(bound))?;
        HeaderValue::from_str(&proof)
            .map(Some)
            .map_err(|e| TokenError::Signing(e.to_string()))
    }

    /// A token to call with now: the cached one until its renewal time, a new one after.
    pub async fn current(&self) -> Result<AccessToken, TokenError> {
        self.get(None).await
    }

    /// A token other than `rejected`, which the API just refused.
    pub async fn replace(&self, rejected: &AccessToken) -> Result<AccessToken, TokenError> {
        self.get(Some(rejected)).await
    }

    async fn get(&self, rejected: Option<&AccessToken>) -> Result<AccessToken, TokenError> {
        let seen = self.finished.load(Ordering::Acquire);
        let mut slot = self.slot.lock().await;
        let now = Instant::now();
        let usable = |c: &&Cached, until: Instant| now < until && Some(&c.token) != rejected;
        if let Some(c) = slot.cached.as_ref().filter(|c| usable(c, c.renew_at)) {
            return Ok(c.token.clone());
        }
        // A token request ended while this call waited and failed: this call shares its
        // answer rather than trying again, so a burst meets an outage with one request.
        if self.finished.load(Ordering::Acquire) != seen
            && let Some(failure) = &slot.last_failure
        {
            return match slot.cached.as_ref().filter(|c| usable(c, c.expires_at)) {
                Some(c) => Ok(c.token.clone()),
                None => Err(failure.clone()),
            };
        }
        let outcome = self.request().await;
        self.finished.fetch_add(1, Ordering::AcqRel);
        match outcome {
            Ok(fresh) => {
                let token = fresh.token.clone();
                *slot = Slot {
                    cached: Some(fresh),
                    last_failure: None,
                };
                Ok(token)
            }
            Err(failure) => {
                slot.last_failure = Some(failure.clone());
                // The old token, while it lasts, is better than no call at all.
                let now = Instant::now();
                match slot.cached.as_ref() {
                    Some(c) if now < c.expires_at && Some(&c.token) != rejected => {
                        Ok(c.token.clone())
                    }
                    _ => Err(failure),
                }
            }
        }
    }

    /// One token request, sent again once when the server asks for a DPoP nonce it has
    /// just handed out (RFC 9449 section 8): with a new proof, and a new assertion.
    async fn request(&self) -> Result<Cached, TokenError> {
        let mut sent = self.send().await?;
        if sent.asks_for_nonce {
            sent = self.send().await?;
        }
        let Sent {
            status,
            retry_after,
            bytes,
            requested,
            ..
        } = sent;
        if status != 200 {
            return match serde_json::from_slice::<OAuthErrorBody>(&bytes) {
                Ok(body) => Err(TokenError::Refused {
                    status,
                    body,
                    retry_after,
                }),
                Err(_) => Err(TokenError::UnexpectedResponse { status }),
            };
        }
        let unexpected = TokenError::UnexpectedResponse { status };
        let answer: AccessTokenResponse =
            serde_json::from_slice(&bytes).map_err(|_| unexpected.clone())?;
        // A DPoP-bound token is asked for with a proof and comes as `DPoP`; a bearer one,
        // had any way, is never taken for one.
        let bound = match (answer.token_type.to_ascii_lowercase().as_str(), &self.dpop) {
            ("bearer", None) => false,
            ("dpop", Some(_)) => true,
            _ => return Err(unexpected),
        };
        if answer.expires_in <= 0 {
            return Err(unexpected);
        }
        let expires_in = Duration::from_secs(answer.expires_in.unsigned_abs());
        let token = AccessToken::new(&answer.access_token, bound).ok_or(unexpected)?;
        Ok(Cached::new(token, requested, expires_in, self.renew_before))
    }

    /// Sends one token request, keeping the DPoP nonce the answer carries.
    async fn send(&self) -> Result<Sent, TokenError> {
        let id = self.credentials.client_id.as_str();
        let mut body = TokenRequest {
            grant_type: "client_credentials",
            client_id: None,
            client_secret: None,
            client_assertion_type: None,
            client_assertion: None,
            scope: &self.scope,
        };
        let mut header = None;
        match (&self.credentials.authentication, self.method) {
            (ClientAuthentication::Secret(secret), AuthMethod::Post) => {
                body.client_id = Some(id);
                body.client_secret = Some(secret.expose());
            }
            (ClientAuthentication::Secret(secret), AuthMethod::Basic) => {
                header = Some(basic_header(id, secret.expose()));
            }
            (ClientAuthentication::PrivateKeyJwt(key), _) => {
                let now = chrono::Utc::now().timestamp();
                body.client_id = Some(id);
                body.client_assertion_type = Some(JWT_BEARER);
                body.client_assertion = Some(key.assertion(id, self.token_url.as_str(), now)?);
            }
        }
        let mut req = self.http.post(self.token_url.clone()).json(&body);
        if let Some(h) = header {
            req = req.header(AUTHORIZATION, h);
        }
        if let Some(key) = &self.dpop {
            req = req.header("DPoP", key.proof("POST", self.token_url.as_str(), None)?);
        }
        // The lifetime counts from before the request: the token was issued after it.
        let requested = Instant::now();
        let resp = req.send().await.map_err(http_error)?;
        let status = resp.status().as_u16();
        let retry_after = retry_after(resp.headers().get(RETRY_AFTER));
        let new_nonce = self
            .dpop
            .as_ref()
            .is_some_and(|key| key.remember_nonce(self.token_url.as_str(), resp.headers()));
        let bytes = resp.bytes().await.map_err(http_error)?.to_vec();
        let asks_for_nonce = new_nonce
            && status == 400
            && serde_json::from_slice::<OAuthErrorBody>(&bytes)
                .is_ok_and(|b| b.error == USE_DPOP_NONCE);
        Ok(Sent {
            status,
            retry_after,
            bytes,
            requested,
            asks_for_nonce,
        })
    }
}

/// The error code of a server asking for a DPoP nonce (RFC 9449 sections 8 and 9).
pub(crate) const USE_DPOP_NONCE: &str = "use_dpop_nonce";

/// A token request's answer, read.
struct Sent {
    status: u16,
    retry_after: Option<Duration>,
    bytes: Vec<u8>,
    requested: Instant,
    /// The server refused the proof for its nonce, and handed out a new one.
    asks_for_nonce: bool,
}

fn http_error(e: reqwest::Error) -> TokenError {
    TokenError::Http(Arc::new(e))
}

/// `Basic base64(id:secret)`, each half form-urlencoded first as RFC 6749 section 2.3.1
/// requires (a `:` in an id would otherwise split it wrongly).
fn basic_header(id: &str, secret: &str) -> String {
    let encode = |s: &str| form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
    let pair = format!("{}:{}", encode(id), encode(secret));
    format!("Basic {}", STANDARD.encode(pair))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token() -> AccessToken {
        AccessToken::new("tok3n", false).expect("a header value")
    }

    #[test]
    fn every_algorithm_reads_its_own_name_and_no_other() {
        for algorithm in AssertionAlgorithm::ALL {
            assert_eq!(algorithm.name().parse(), Ok(algorithm));
        }
        for other in ["es256", "HS256", "none", ""] {
            let refused = other.parse::<AssertionAlgorithm>().expect_err(other);
            assert!(refused.contains("ES256, PS256, RS256, EdDSA"), "{refused}");
        }
    }

    #[test]
    fn a_token_is_renewed_thirty_seconds_before_it_expires() {
        let t0 = Instant::now();
        let margin = Duration::from_secs(30);
        let c = Cached::new(token(), t0, Duration::from_secs(900), margin);
        assert_eq!(c.renew_at - t0, Duration::from_secs(870));
        assert_eq!(c.expires_at - t0, Duration::from_secs(900));
    }

    #[test]
    fn a_lifetime_shorter_than_the_margin_is_renewed_half_way() {
        let t0 = Instant::now();
        let margin = Duration::from_secs(30);
        let c = Cached::new(token(), t0, Duration::from_secs(20), margin);
        assert_eq!(c.renew_at - t0, Duration::from_secs(10));
    }

    #[test]
    fn basic_credentials_are_form_encoded_before_base64() {
        let h = basic_header("id:1", "s e+cret");
        let decoded = STANDARD.decode(h.trim_start_matches("Basic ")).unwrap();
        assert_eq!(String::from_utf8(decoded).unwrap(), "id%3A1:s+e%2Bcret");
    }

    #[test]
    fn secrets_and_tokens_never_show_in_debug() {
        let creds = Credentials::new("partner-1", "hunter2-secret");
        let shown = format!("{creds:?} {:?}", token());
        assert!(shown.contains("partner-1"), "{shown}");
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(!shown.contains("tok3n"), "{shown}");
    }

    /// A new P-256 key as PKCS#8 PEM, and its public point.
    fn p256_key() -> (String, Vec<u8>) {
        use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};
        let pair = EcdsaKeyPair::generate(&ECDSA_P256_SHA256_FIXED_SIGNING).unwrap();
        let der = pair.to_pkcs8v1().unwrap();
        let pem = format!(
            "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n",
            STANDARD.encode(der.as_ref())
        );
        (pem, pair.public_key().as_ref().to_vec())
    }

    #[test]
    fn an_assertion_names_the_client_and_the_endpoint_and_is_good_for_a_minute() {
        let (pem, public) = p256_key();
        let key = AssertionKey::from_pem(AssertionAlgorithm::ES256, pem.as_bytes())
            .unwrap()
            .with_kid("key-1");
        let audience = "https://auth.example/oauth/token";
        let first = key.assertion("partner-1", audience, 1_700_000_000).unwrap();
        let second = key.assertion("partner-1", audience, 1_700_000_000).unwrap();

        let header = jsonwebtoken::decode_header(&first).unwrap();
        assert_eq!(header.alg, jsonwebtoken::Algorithm::ES256);
        assert_eq!(header.kid.as_deref(), Some("key-1"));
        let mut validation = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::ES256);
        validation.set_audience(&[audience]);
        validation.validate_exp = false;
        let decoding = jsonwebtoken::DecodingKey::from_ec_der(&public);
        let claims: serde_json::Value = jsonwebtoken::decode(&first, &decoding, &validation)
            .expect("verifies with the public key")
            .claims;
        assert_eq!(claims["iss"], "partner-1");
        assert_eq!(claims["sub"], "partner-1");
        assert_eq!(claims["aud"], audience);
        assert_eq!(claims["iat"], 1_700_000_000);
        assert_eq!(claims["exp"], 1_700_000_060);
        let jti = |token: &str| -> String {
            jsonwebtoken::decode::<serde_json::Value>(token, &decoding, &validation)
                .unwrap()
                .claims["jti"]
                .as_str()
                .unwrap()
                .to_owned()
        };
        assert_ne!(jti(&first), jti(&second), "each assertion is used once");
    }

    #[test]
    fn a_key_that_does_not_fit_its_algorithm_is_refused_and_never_shown() {
        let (pem, _) = p256_key();
        for algorithm in [AssertionAlgorithm::RS256, AssertionAlgorithm::EdDSA] {
            let err = AssertionKey::from_pem(algorithm, pem.as_bytes()).unwrap_err();
            assert!(
                matches!(err, BuildError::InvalidKey(_)),
                "{algorithm:?}: {err}"
            );
        }
        assert!(AssertionKey::from_pem(AssertionAlgorithm::ES256, b"not a key").is_err());
        let key = AssertionKey::from_pem(AssertionAlgorithm::ES256, pem.as_bytes()).unwrap();
        let creds = Credentials::with_key("partner-1", key);
        let shown = format!("{creds:?}");
        let body = pem.lines().nth(1).unwrap();
        assert!(
            shown.contains("ES256") && !shown.contains(&body[..20]),
            "{shown}"
        );
    }
}
