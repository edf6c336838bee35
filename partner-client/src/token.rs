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

use crate::error::TokenError;
use crate::wire::{AccessTokenResponse, OAuthErrorBody};

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

/// A partner's `client_id` and `client_secret`.
#[derive(Debug, Clone)]
pub struct Credentials {
    /// The client identifier.
    pub client_id: String,
    /// The client secret; redacted in `Debug`.
    pub client_secret: ClientSecret,
}

impl Credentials {
    /// The credentials the partner was given.
    pub fn new(client_id: impl Into<String>, client_secret: impl Into<String>) -> Self {
        Self {
            client_id: client_id.into(),
            client_secret: ClientSecret::new(client_secret),
        }
    }
}

/// How the credentials reach the token endpoint (both are RFC 6749 section 2.3.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AuthMethod {
    /// `client_secret_post`: in the request body, as spec 5.2 shows.
    #[default]
    Post,
    /// `client_secret_basic`: in an `Authorization: Basic` header.
    Basic,
}

/// A bearer token, kept as its `Authorization` header value. Its `Debug` never shows it: it
/// opens the API as the secret does, and it is marked sensitive for HTTP-level logs too.
#[derive(Clone, PartialEq, Eq)]
pub struct AccessToken(HeaderValue);

impl AccessToken {
    /// `Bearer <token>`, or `None` when the token cannot be a header value.
    fn new(token: &str) -> Option<Self> {
        let mut value = HeaderValue::from_str(&format!("Bearer {token}")).ok()?;
        value.set_sensitive(true);
        Some(Self(value))
    }

    /// The `Authorization` header value, `Bearer <token>`.
    pub fn header(&self) -> HeaderValue {
        self.0.clone()
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

/// Where tokens come from, and the one cached: what [`Client`](crate::Client) calls with,
/// and what any other caller of a client-credentials API can use on its own (a resource
/// server reading the auth-server's `/revocations`, for one).
pub struct TokenSource {
    http: reqwest::Client,
    token_url: reqwest::Url,
    credentials: Credentials,
    method: AuthMethod,
    scope: String,
    renew_before: Duration,
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
            slot: tokio::sync::Mutex::default(),
            finished: AtomicU64::new(0),
        }
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

    /// One token request.
    async fn request(&self) -> Result<Cached, TokenError> {
        let secret = self.credentials.client_secret.expose();
        let id = self.credentials.client_id.as_str();
        let (in_body, header) = match self.method {
            AuthMethod::Post => ((Some(id), Some(secret)), None),
            AuthMethod::Basic => ((None, None), Some(basic_header(id, secret))),
        };
        let body = TokenRequest {
            grant_type: "client_credentials",
            client_id: in_body.0,
            client_secret: in_body.1,
            scope: &self.scope,
        };
        let mut req = self.http.post(self.token_url.clone()).json(&body);
        if let Some(h) = header {
            req = req.header(AUTHORIZATION, h);
        }
        // The lifetime counts from before the request: the token was issued after it.
        let requested = Instant::now();
        let resp = req.send().await.map_err(http_error)?;
        let status = resp.status().as_u16();
        let retry_after = crate::error::retry_after(resp.headers().get(RETRY_AFTER));
        let bytes = resp.bytes().await.map_err(http_error)?;
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
        if !answer.token_type.eq_ignore_ascii_case("bearer") || answer.expires_in <= 0 {
            return Err(unexpected);
        }
        let expires_in = Duration::from_secs(answer.expires_in.unsigned_abs());
        let token = AccessToken::new(&answer.access_token).ok_or(unexpected)?;
        Ok(Cached::new(token, requested, expires_in, self.renew_before))
    }
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
        AccessToken::new("tok3n").expect("a header value")
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
}
