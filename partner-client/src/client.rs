//! The client: typed calls that carry a cached token and retry once with a fresh one on 401.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use reqwest::Method;
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderValue, RETRY_AFTER, WWW_AUTHENTICATE};
use serde::de::DeserializeOwned;

use token_client::{
    AccessToken, AuthMethod, BuildError, Credentials, DEFAULT_RENEW_BEFORE, DpopKey, TokenSource,
    retry_after,
};

use crate::error::Error;
use crate::wire::{
    AttachRequest, CaseResponse, CaseStatusBody, Enquiry, RedirectResponse, ReferralRequest,
    ReferralResponse,
};

/// The scope partners' calls need.
pub const INTAKE_SCOPE: &str = "enquiry:case:intake:create";

/// The scope [`Client::refer`] needs.
pub const REFERRAL_SCOPE: &str = "enquiry:referral:create";

/// A partner's client of the intake API. Cheap to clone; clones share one token.
#[derive(Clone)]
pub struct Client {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    http: reqwest::Client,
    submit_url: reqwest::Url,
    attach_url: reqwest::Url,
    referral_url: reqwest::Url,
    cases_url: reqwest::Url,
    /// `/partners/external/webhooks`, the base of the webhook operations.
    pub(crate) webhooks_url: reqwest::Url,
    tokens: TokenSource,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("submit_url", &self.inner.submit_url.as_str())
            .field("attach_url", &self.inner.attach_url.as_str())
            .field("referral_url", &self.inner.referral_url.as_str())
            .field("tokens", &self.inner.tokens)
            .finish()
    }
}

/// A successful answer: its body and how it came.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer<T> {
    /// The status code: 201 for a new case, 200 otherwise.
    pub status: u16,
    /// `Idempotent-Replayed: true`: the stored answer to an earlier request with the same
    /// `Idempotency-Key`; nothing was changed this time.
    pub replayed: bool,
    /// The body.
    pub body: T,
}

impl Answer<CaseResponse> {
    /// Whether the enquiry made a new case rather than updating one.
    pub fn created(&self) -> bool {
        self.status == 201
    }
}

/// An `Idempotency-Key`: sent again with the same body, a retry gets the first answer and
/// changes nothing (README, "Retrying safely").
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct IdempotencyKey(HeaderValue);

impl IdempotencyKey {
    /// A fresh random key (a UUID), one per enquiry or attach.
    pub fn random() -> Self {
        let key = uuid::Uuid::new_v4().to_string();
        Self(HeaderValue::from_str(&key).expect("a UUID is a valid header value"))
    }

    /// A key of the caller's own: 1 to 255 visible ASCII characters, as the service takes.
    pub fn new(key: &str) -> Result<Self, InvalidIdempotencyKey> {
        let visible = key.bytes().all(|b| b.is_ascii_graphic());
        if key.is_empty() || key.len() > 255 || !visible {
            return Err(InvalidIdempotencyKey);
        }
        HeaderValue::from_str(key)
            .map(Self)
            .map_err(|_| InvalidIdempotencyKey)
    }

    /// The key as sent.
    pub fn as_str(&self) -> &str {
        self.0.to_str().unwrap_or_default()
    }
}

/// A key that is empty, over 255 characters, or not visible ASCII.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("an Idempotency-Key is 1 to 255 visible ASCII characters")]
pub struct InvalidIdempotencyKey;

/// Settings for a [`Client`]; every one but the credentials and URLs has a default.
#[derive(Debug)]
pub struct ClientBuilder {
    credentials: Credentials,
    token_url: String,
    intake_url: String,
    method: AuthMethod,
    scope: String,
    renew_before: Duration,
    http: Option<reqwest::Client>,
    dpop: Option<DpopKey>,
}

impl ClientBuilder {
    /// How the credentials are sent; `client_secret_post` by default.
    pub fn auth_method(mut self, method: AuthMethod) -> Self {
        self.method = method;
        self
    }

    /// The scope asked for; [`INTAKE_SCOPE`] by default.
    pub fn scope(mut self, scope: impl Into<String>) -> Self {
        self.scope = scope.into();
        self
    }

    /// How long before expiry a token is renewed; 30 s by default (spec 5.4). A larger
    /// margin suits requests that may spend long in transit.
    pub fn renew_before(mut self, margin: Duration) -> Self {
        self.renew_before = margin;
        self
    }

    /// The HTTP client to use, for a proxy, timeouts or trusted CAs of the caller's own;
    /// the default gives a connection 10 s to open and a request 60 s to complete.
    pub fn http_client(mut self, http: reqwest::Client) -> Self {
        self.http = Some(http);
        self
    }

    /// Binds the client's tokens to `key` (DPoP, RFC 9449): a token copied on its way is of
    /// no use without the key, which never leaves this process. The partner's client must
    /// be allowed DPoP at the auth-server; `DpopKey::generate()` makes a key.
    pub fn dpop(mut self, key: DpopKey) -> Self {
        self.dpop = Some(key);
        self
    }

    /// The client; fails when a URL does not parse.
    pub fn build(self) -> Result<Client, BuildError> {
        let token_url = parse_url("token", &self.token_url)?;
        let base = parse_url("intake", &self.intake_url)?;
        if base.cannot_be_a_base() {
            return Err(BuildError::InvalidUrl {
                which: "intake",
                reason: "it cannot be a base URL".into(),
            });
        }
        let endpoint = |path: &str| {
            let url = format!("{}{path}", base.as_str().trim_end_matches('/'));
            parse_url("intake", &url)
        };
        let (submit_url, attach_url, referral_url, cases_url, webhooks_url) = (
            endpoint("/partners/external/intake")?,
            endpoint("/partners/external/intake/attach")?,
            endpoint("/partners/external/referrals")?,
            endpoint("/partners/external/cases")?,
            endpoint("/partners/external/webhooks")?,
        );
        let http = match self.http {
            Some(http) => http,
            None => reqwest::Client::builder()
                .user_agent(concat!("partner-client/", env!("CARGO_PKG_VERSION")))
                // No timeout at all would let one stalled connection hold a call for ever.
                .connect_timeout(Duration::from_secs(10))
                .timeout(Duration::from_secs(60))
                // The services close a connection idle for 5 seconds: one kept in the pool
                // longer could be closed under the next call.
                .pool_idle_timeout(Duration::from_secs(4))
                .build()
                .map_err(BuildError::Http)?,
        };
        let mut tokens = TokenSource::new(
            http.clone(),
            token_url,
            self.credentials,
            self.method,
            self.scope,
            self.renew_before,
        );
        if let Some(key) = self.dpop {
            tokens = tokens.with_dpop(key);
        }
        Ok(Client {
            inner: Arc::new(Inner {
                http,
                submit_url,
                attach_url,
                referral_url,
                cases_url,
                webhooks_url,
                tokens,
            }),
        })
    }
}

fn parse_url(which: &'static str, url: &str) -> Result<reqwest::Url, BuildError> {
    reqwest::Url::parse(url).map_err(|e| BuildError::InvalidUrl {
        which,
        reason: e.to_string(),
    })
}

impl Client {
    /// Settings for a client with `credentials`, getting tokens at `token_url` (e.g.
    /// `https://auth.example/oauth/token`) and calling the intake API at `intake_url` (its
    /// base, e.g. `https://intake.example`).
    pub fn builder(
        credentials: Credentials,
        token_url: impl Into<String>,
        intake_url: impl Into<String>,
    ) -> ClientBuilder {
        ClientBuilder {
            credentials,
            token_url: token_url.into(),
            intake_url: intake_url.into(),
            method: AuthMethod::default(),
            scope: INTAKE_SCOPE.to_owned(),
            renew_before: DEFAULT_RENEW_BEFORE,
            http: None,
            dpop: None,
        }
    }

    /// Submits an enquiry (`POST /partners/external/intake`): a new case (201) or an update
    /// of the customer's case (200).
    pub async fn submit(
        &self,
        enquiry: &Enquiry,
        idempotency_key: Option<&IdempotencyKey>,
    ) -> Result<Answer<CaseResponse>, Error> {
        let url = &self.inner.submit_url;
        self.post(url, enquiry, idempotency_key, &[200, 201]).await
    }

    /// Attaches a product to the customer's case (`POST /partners/external/intake/attach`);
    /// the answer holds the link to send the customer to.
    pub async fn attach(
        &self,
        request: &AttachRequest,
        idempotency_key: Option<&IdempotencyKey>,
    ) -> Result<Answer<RedirectResponse>, Error> {
        let url = &self.inner.attach_url;
        self.post(url, request, idempotency_key, &[200]).await
    }

    /// Refers a customer before their enquiry exists (`POST /partners/external/referrals`):
    /// 201 for the partner's first referral of the customer, 200 for a customer it referred
    /// or sent an enquiry for before; the answer holds the referral's reference and the link
    /// where the customer completes the enquiry. A referral grants nothing: the case is
    /// read back ([`Client::case`]) only after an enquiry of the partner's own. The token must carry [`REFERRAL_SCOPE`]: ask for it with
    /// [`ClientBuilder::scope`] (both scopes, space-separated, to submit as well).
    pub async fn refer(
        &self,
        referral: &ReferralRequest,
        idempotency_key: Option<&IdempotencyKey>,
    ) -> Result<Answer<ReferralResponse>, Error> {
        let url = &self.inner.referral_url;
        self.post(url, referral, idempotency_key, &[200, 201]).await
    }

    /// Reads a case back (`GET /partners/external/cases/{reference}`): its status, when it
    /// activates and the product attached last. A reference this partner has not submitted
    /// an enquiry on is [`Error::CaseNotFound`].
    pub async fn case(&self, reference: &str) -> Result<CaseStatusBody, Error> {
        let mut url = self.inner.cases_url.clone();
        // Pushed as one segment, so whatever the reference holds stays in it, encoded. The
        // base was checked to be one when the client was built, so there are segments.
        if let Ok(mut segments) = url.path_segments_mut() {
            segments.push(reference);
        }
        let answer = self.call(Method::GET, &url, None, None, &[200]).await?;
        Ok(answer.body)
    }

    pub(crate) async fn post<B: serde::Serialize, T: DeserializeOwned>(
        &self,
        url: &reqwest::Url,
        body: &B,
        key: Option<&IdempotencyKey>,
        success: &[u16],
    ) -> Result<Answer<T>, Error> {
        // Serialised once: the retry sends the very same bytes, as an idempotent retry must.
        let body = serde_json::to_vec(body).expect("the wire types always serialise");
        self.call(Method::POST, url, Some(&body), key, success)
            .await
    }

    pub(crate) async fn call<T: DeserializeOwned>(
        &self,
        method: Method,
        url: &reqwest::Url,
        body: Option<&[u8]>,
        key: Option<&IdempotencyKey>,
        success: &[u16],
    ) -> Result<Answer<T>, Error> {
        let mut token = self.inner.tokens.current().await?;
        let mut resp = self.send(&method, url, body, key, &token).await?;
        let (mut nonce_retried, mut token_replaced) = (false, false);
        while resp.status() == reqwest::StatusCode::UNAUTHORIZED {
            if !nonce_retried && self.asks_for_nonce(url, &resp) {
                // The server hands out DPoP nonces and this proof had none it still takes:
                // the answer brought one, and the same token goes again with it.
                nonce_retried = true;
            } else if !token_replaced {
                // Revoked key, disabled and re-enabled client, clock skew: a new token may
                // pass. Once only: a second 401 will not be cured by a third token.
                token_replaced = true;
                token = self.inner.tokens.replace(&token).await?;
            } else {
                break;
            }
            resp = self.send(&method, url, body, key, &token).await?;
        }
        read(resp, success).await
    }

    async fn send(
        &self,
        method: &Method,
        url: &reqwest::Url,
        body: Option<&[u8]>,
        key: Option<&IdempotencyKey>,
        token: &AccessToken,
    ) -> Result<reqwest::Response, Error> {
        let mut req = self
            .inner
            .http
            .request(method.clone(), url.clone())
            .header(AUTHORIZATION, token.header());
        if let Some(body) = body {
            req = req
                .header(CONTENT_TYPE, "application/json")
                .body(body.to_vec());
        }
        // A new proof for each send, the retry's too: a proof is good once.
        if let Some(proof) = self
            .inner
            .tokens
            .proof(method.as_str(), url.as_str(), token)?
        {
            req = req.header("DPoP", proof);
        }
        if let Some(key) = key {
            req = req.header("Idempotency-Key", key.0.clone());
        }
        let resp = req.send().await.map_err(Error::Http)?;
        if let Some(dpop) = self.inner.tokens.dpop_key() {
            dpop.remember_nonce(url.as_str(), resp.headers());
        }
        Ok(resp)
    }

    /// Whether a 401 asks for a DPoP nonce (RFC 9449 section 9) that this client now has.
    fn asks_for_nonce(&self, url: &reqwest::Url, resp: &reqwest::Response) -> bool {
        let Some(dpop) = self.inner.tokens.dpop_key() else {
            return false;
        };
        let challenge = resp
            .headers()
            .get(WWW_AUTHENTICATE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        challenge.contains(r#"error="use_dpop_nonce""#) && dpop.nonce_for(url.as_str()).is_some()
    }
}

/// Reads an answer: the body of a success, or the error it stands for.
async fn read<T: DeserializeOwned>(
    resp: reqwest::Response,
    success: &[u16],
) -> Result<Answer<T>, Error> {
    let status = resp.status().as_u16();
    let headers = resp.headers();
    let replayed = headers
        .get("idempotent-replayed")
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"true"));
    let retry_after = retry_after(headers.get(RETRY_AFTER));
    let challenge = headers
        .get(WWW_AUTHENTICATE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let bytes = resp.bytes().await.map_err(Error::Http)?;
    if success.contains(&status) {
        // An answer without a body (204) reads as JSON null: `()` for the callers expecting it.
        let bytes = if status == 204 {
            &b"null"[..]
        } else {
            &bytes[..]
        };
        let body = serde_json::from_slice(bytes)
            .map_err(|source| Error::UnexpectedBody { status, source })?;
        return Ok(Answer {
            status,
            replayed,
            body,
        });
    }
    Err(Error::from_answer(status, &bytes, retry_after, challenge))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idempotency_keys_are_one_to_255_visible_characters() {
        let cases = [
            ("empty", String::new(), false),
            ("one character", "a".into(), true),
            ("255 characters", "k".repeat(255), true),
            ("256 characters", "k".repeat(256), false),
            ("a space", "a b".into(), false),
            ("a newline", "a\nb".into(), false),
            ("non-ASCII", "clé".into(), false),
        ];
        for (name, key, ok) in cases {
            assert_eq!(IdempotencyKey::new(&key).is_ok(), ok, "{name}");
        }
        let random = IdempotencyKey::random();
        assert_eq!(random.as_str().len(), 36);
        assert_ne!(random, IdempotencyKey::random());
    }

    #[test]
    fn urls_are_checked_and_the_endpoints_joined_to_the_base() {
        let creds = || Credentials::new("id", "secret");
        let client = Client::builder(creds(), "http://a/oauth/token", "http://i/base/")
            .build()
            .expect("builds");
        assert_eq!(
            client.inner.submit_url.as_str(),
            "http://i/base/partners/external/intake"
        );
        assert_eq!(
            client.inner.attach_url.as_str(),
            "http://i/base/partners/external/intake/attach"
        );
        let bad = Client::builder(creds(), "not a url", "http://i").build();
        assert!(matches!(
            bad,
            Err(BuildError::InvalidUrl { which: "token", .. })
        ));
        let bad = Client::builder(creds(), "http://a", "mailto:x@y").build();
        assert!(matches!(
            bad,
            Err(BuildError::InvalidUrl {
                which: "intake",
                ..
            })
        ));
    }

    #[test]
    fn a_clients_debug_shows_its_urls_and_client_id_but_never_the_secret() {
        let creds = Credentials::new("partner-7", "s3cr3t-value");
        let client = Client::builder(creds, "http://a/oauth/token", "http://i")
            .build()
            .expect("builds");
        let shown = format!("{client:?}");
        assert!(shown.contains("partner-7"), "{shown}");
        assert!(shown.contains("http://a/oauth/token"), "{shown}");
        assert!(!shown.contains("s3cr3t"), "{shown}");
    }
}
