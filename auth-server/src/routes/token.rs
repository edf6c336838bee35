//! `POST /oauth/token`: the client-credentials grant.

use std::sync::Arc;

use chrono::Utc;
use poem::Request;
use poem_openapi::payload::Json;
use poem_openapi::registry::{MetaMediaType, MetaRequest, Registry};
use poem_openapi::types::{Example, Type};
use poem_openapi::{
    ApiExtractor, ApiExtractorType, ApiResponse, ExtractParamOptions, Object, OpenApi, Tags,
};
use service_kit::replay::Use;
use service_kit::telemetry::{OUTCOME, REASON, record};
use shared::error::OAuthErrorBody;
use shared::profile::Profile;

use crate::assertion::{ClientAssertion, SpentAssertion};
use crate::error::{ClientFailure, OAuthError};
use crate::registry::{ClientAuth, Snapshot};
use crate::state::AppState;
use crate::token_request::{self, BodyKind};

/// The closing line's field naming the key an issued token was signed with.
pub const KID: &str = "kid";

/// The closing line's field holding an issued token's `jti`: with the line's client id, the
/// audit record of the issuance.
pub const JTI: &str = "jti";

/// The closing line's field holding an issued token's scopes.
pub const SCOPE: &str = "scope";

/// Largest token request body accepted.
pub const MAX_BODY_BYTES: usize = 8 * 1024;

#[derive(Tags)]
enum ApiTags {
    /// Getting access tokens.
    #[oai(rename = "OAuth 2.0")]
    OAuth,
}

/// A token request (RFC 6749 section 4.4.2), as JSON or form-encoded. With
/// client_secret_basic the credentials go in the `Authorization` header instead; with
/// private_key_jwt (RFC 7523) a signed assertion takes the secret's place.
#[derive(Debug, Object)]
pub struct TokenRequest {
    /// Always `client_credentials`.
    pub grant_type: String,
    /// The client identifier (client_secret_post).
    pub client_id: Option<String>,
    /// The client secret (client_secret_post).
    pub client_secret: Option<String>,
    /// Space-separated scopes the token must cover.
    pub scope: String,
    /// With private_key_jwt: `urn:ietf:params:oauth:client-assertion-type:jwt-bearer`.
    pub client_assertion_type: Option<String>,
    /// With private_key_jwt: a JWT signed with one of the client's registered keys
    /// (RS256, PS256, ES256 or EdDSA), with `iss` and `sub` the client id, `aud` the
    /// issuer, `exp` at most an hour ahead, and a `jti` never used before.
    pub client_assertion: Option<String>,
}

/// The request body, read as bytes and parsed by the handler, so every malformed body
/// gets an OAuth `invalid_request` answer rather than a framework error.
pub struct TokenRequestBody {
    content_type: Option<String>,
    bytes: Result<Vec<u8>, OAuthError>,
}

impl<'a> ApiExtractor<'a> for TokenRequestBody {
    const TYPES: &'static [ApiExtractorType] = &[ApiExtractorType::RequestObject];
    type ParamType = ();
    type ParamRawType = ();

    fn register(registry: &mut Registry) {
        TokenRequest::register(registry);
    }

    fn request_meta() -> Option<MetaRequest> {
        // Documented as JSON, the spec's form; form-encoded bodies (RFC 6749's) are read the
        // same way but left out of the document, as generators given two request types for
        // one operation write clients that do not load.
        Some(MetaRequest {
            description: Some(
                "Token request parameters as JSON; `application/x-www-form-urlencoded` bodies with the same parameters are accepted too.",
            ),
            content: vec![MetaMediaType {
                content_type: "application/json",
                schema: TokenRequest::schema_ref(),
            }],
            required: true,
        })
    }

    async fn from_request(
        request: &'a Request,
        body: &mut poem::RequestBody,
        _opts: ExtractParamOptions<Self::ParamType>,
    ) -> poem::Result<Self> {
        let bytes = match body.take() {
            Ok(b) => match b.into_bytes_limit(MAX_BODY_BYTES).await {
                Ok(bytes) => Ok(bytes.to_vec()),
                Err(poem::error::ReadBodyError::PayloadTooLarge) => Err(OAuthError::BodyTooLarge),
                Err(_) => Err(OAuthError::InvalidRequest {
                    hint: "The request body could not be read".into(),
                }),
            },
            Err(_) => Ok(Vec::new()),
        };
        Ok(Self {
            content_type: request.content_type().map(str::to_owned),
            bytes,
        })
    }
}

/// Defines an OAuth error body type for one status, with a typical instance as its OpenAPI
/// example; the wire shape is that of every OAuth error.
macro_rules! oauth_error_body {
    ($(#[$meta:meta])* $name:ident = $example:expr) => {
        $(#[$meta])*
        #[derive(Debug, Object)]
        #[oai(example)]
        pub struct $name {
            /// The RFC 6749 error code.
            pub error: String,
            /// A human-readable explanation.
            pub error_description: String,
            /// What to check, where there is something specific.
            #[oai(skip_serializing_if_is_none)]
            pub hint: Option<String>,
            /// The same text as `error_description`.
            pub message: String,
        }

        impl Example for $name {
            fn example() -> Self {
                $example.body().into()
            }
        }

        impl From<OAuthErrorBody> for $name {
            fn from(b: OAuthErrorBody) -> Self {
                Self {
                    error: b.error,
                    error_description: b.error_description,
                    hint: b.hint,
                    message: b.message,
                }
            }
        }
    };
}

oauth_error_body!(
    /// `invalid_request`, `unsupported_grant_type` or `invalid_scope`.
    BadRequestBody = OAuthError::parameter("client_id")
);
oauth_error_body!(
    /// `invalid_client`.
    InvalidClientBody = OAuthError::InvalidClient {
        used_authorization_header: false,
        failure: ClientFailure::WrongSecret,
    }
);
oauth_error_body!(
    /// The body is over 8 KiB.
    TooLargeBody = OAuthError::BodyTooLarge
);
oauth_error_body!(
    /// Over the rate limit or the failed-authentication limit.
    TooManyRequestsBody = OAuthError::TooManyRequests {
        retry_after_secs: 30
    }
);
oauth_error_body!(
    /// An unexpected failure.
    ServerErrorBody = OAuthError::ServerError
);
oauth_error_body!(
    /// The database cannot be reached; try again.
    UnavailableBody = OAuthError::TemporarilyUnavailable
);

/// A successful token response (RFC 6749 section 5.1).
#[derive(Debug, Object)]
#[oai(example)]
pub struct AccessTokenResponse {
    /// `Bearer`; `DPoP` for a token bound to the key of the request's `DPoP` proof.
    pub token_type: String,
    /// Lifetime in seconds: 900.
    pub expires_in: i64,
    /// A JWT signed with the algorithm of the key its `kid` names in the JWKS: RS256 unless
    /// the deployment moved to PS256 or ES256.
    pub access_token: String,
}

impl Example for AccessTokenResponse {
    fn example() -> Self {
        Self {
            token_type: "Bearer".into(),
            expires_in: shared::claims::TOKEN_TTL_SECS,
            access_token: "eyJ0eXAiOiJhdCtqd3QiLCJhbGciOiJSUzI1NiIsImtpZCI6Ii4uLiJ9.eyJpc3MiOiIuLi4ifQ.c2lnbmF0dXJl".into(),
        }
    }
}

/// Responses of the token endpoint.
#[derive(ApiResponse)]
pub enum TokenResponse {
    /// The access token.
    #[oai(status = 200)]
    Ok(
        Json<AccessTokenResponse>,
        #[oai(header = "Cache-Control")] String,
        #[oai(header = "Pragma")] String,
    ),
    /// `invalid_request`, `unsupported_grant_type`, `invalid_scope` or `invalid_dpop_proof`.
    #[oai(status = 400)]
    BadRequest(
        Json<BadRequestBody>,
        #[oai(header = "Cache-Control")] String,
    ),
    /// `invalid_client`: unknown client, wrong or expired secret, an assertion that does
    /// not verify or was used before, or a disabled client.
    #[oai(status = 401)]
    Unauthorized(
        Json<InvalidClientBody>,
        #[oai(header = "Cache-Control")] String,
        #[oai(header = "WWW-Authenticate")] Option<String>,
    ),
    /// The body is larger than 8 KiB.
    #[oai(status = 413)]
    PayloadTooLarge(Json<TooLargeBody>, #[oai(header = "Cache-Control")] String),
    /// Too many requests, or too many failed authentications, from this client and address.
    #[oai(status = 429)]
    TooManyRequests(
        Json<TooManyRequestsBody>,
        #[oai(header = "Cache-Control")] String,
        #[oai(header = "Retry-After")] u64,
    ),
    /// An unexpected failure on the server's side.
    #[oai(status = 500)]
    ServerError(
        Json<ServerErrorBody>,
        #[oai(header = "Cache-Control")] String,
    ),
    /// `temporarily_unavailable`: a client assertion or DPoP proof could not be recorded as
    /// used, as the store of used ones cannot be reached; send the request again (with a new
    /// proof) after `Retry-After` seconds.
    #[oai(status = 503)]
    Unavailable(
        Json<UnavailableBody>,
        #[oai(header = "Cache-Control")] String,
        #[oai(header = "Retry-After")] u64,
    ),
}

const NO_STORE: &str = "no-store";

/// Seconds a client is asked to wait after a 503.
const UNAVAILABLE_RETRY_AFTER_SECS: u64 = 5;

impl From<OAuthError> for TokenResponse {
    fn from(e: OAuthError) -> Self {
        let body = e.body();
        let cc = NO_STORE.to_owned();
        match e {
            OAuthError::InvalidClient {
                used_authorization_header,
                ..
            } => Self::Unauthorized(
                Json(body.into()),
                cc,
                used_authorization_header.then(|| r#"Basic realm="OAuth""#.to_owned()),
            ),
            OAuthError::BodyTooLarge => Self::PayloadTooLarge(Json(body.into()), cc),
            OAuthError::ServerError => Self::ServerError(Json(body.into()), cc),
            OAuthError::TemporarilyUnavailable => {
                Self::Unavailable(Json(body.into()), cc, UNAVAILABLE_RETRY_AFTER_SECS)
            }
            OAuthError::TooManyRequests { retry_after_secs } => {
                Self::TooManyRequests(Json(body.into()), cc, retry_after_secs)
            }
            _ => Self::BadRequest(Json(body.into()), cc),
        }
    }
}

/// The token endpoint.
pub struct TokenApi {
    /// Shared state.
    pub state: Arc<AppState>,
}

#[OpenApi]
impl TokenApi {
    /// Get an access token (client credentials grant).
    ///
    /// Authenticate with `client_id` and `client_secret` in the body (client_secret_post)
    /// or in an `Authorization: Basic` header (client_secret_basic), or, for a client
    /// registered with keys, with `client_assertion_type` and a signed `client_assertion`
    /// (private_key_jwt). Cache the token and ask for a new one about 30 seconds before
    /// `expires_in` runs out.
    #[oai(
        path = "/oauth/token",
        method = "post",
        operation_id = "issueToken",
        tag = "ApiTags::OAuth"
    )]
    async fn token(&self, req: &Request, body: TokenRequestBody) -> TokenResponse {
        let (params, basic) = match read_request(req, body) {
            Ok(read) => read,
            Err(e) => return refuse(e, None),
        };
        let snapshot = self.state.registry.snapshot();
        let assertion = params
            .client_assertion
            .as_ref()
            .map(|a| ClientAssertion::read(a.expose()));
        let claimed_id = basic
            .as_ref()
            .map(|b| b.client_id.as_str())
            .or(params.client_id.as_deref())
            .or_else(|| assertion.as_ref()?.as_ref().ok()?.issuer())
            .unwrap_or_default();
        let client = snapshot
            .clients
            .get_key_value(claimed_id)
            .map(|(id, _)| id.as_str());
        let credentials = Credentials {
            params,
            basic,
            assertion,
        };
        match self.issue(req, credentials, &snapshot, client).await {
            Ok(resp) => resp,
            Err(e) => refuse(e, client),
        }
    }
}

/// Counts and logs a refusal, naming the client only when it is registered: any other id is
/// the caller's invention (each would be a new series) or a secret pasted in the wrong field.
fn refuse(e: OAuthError, client: Option<&str>) -> TokenResponse {
    let reason = e.reason();
    match client {
        Some(id) => {
            metrics::counter!(
                "auth_token_requests_failed_total",
                "reason" => reason,
                "client_id" => id.to_owned()
            )
            .increment(1);
            service_kit::telemetry::record_client_id(id);
        }
        None => {
            metrics::counter!("auth_token_requests_failed_total", "reason" => reason).increment(1)
        }
    }
    record(OUTCOME, "refused");
    record(REASON, reason);
    e.into()
}

/// What a request authenticates with: its parameters, any Basic credentials, and its
/// client assertion, read.
struct Credentials {
    params: token_request::TokenParams,
    basic: Option<token_request::BasicCredentials>,
    assertion: Option<Result<ClientAssertion, ClientFailure>>,
}

/// What the deployment's profile refuses before any credential is checked: under FAPI 2.0,
/// a request without an assertion or with a secret, whatever the client (so the answer
/// tells nothing of it), and an assertion signed with an algorithm the profile leaves out.
fn refused_by_profile(profile: Profile, credentials: &Credentials) -> Option<ClientFailure> {
    if profile.allows_secrets_and_bearer() {
        return None;
    }
    let secret = credentials.basic.is_some() || credentials.params.client_secret.is_some();
    match &credentials.assertion {
        _ if secret => Some(ClientFailure::SecretNotAccepted),
        None => Some(ClientFailure::SecretNotAccepted),
        Some(Ok(assertion)) => assertion
            .algorithm()
            .is_some_and(|alg| !profile.algorithms().contains(&alg))
            .then_some(ClientFailure::AssertionAlgorithm),
        Some(Err(_)) => None,
    }
}

/// The parameters and any Basic credentials of a request, each read once.
fn read_request(
    req: &Request,
    body: TokenRequestBody,
) -> Result<
    (
        token_request::TokenParams,
        Option<token_request::BasicCredentials>,
    ),
    OAuthError,
> {
    let bytes = body.bytes?;
    let kind: BodyKind = token_request::body_kind(body.content_type.as_deref(), &bytes)?;
    let params = token_request::parse_params(kind, &bytes)?;
    let basic = match req.headers().get(poem::http::header::AUTHORIZATION) {
        Some(h) => {
            token_request::parse_basic(h.to_str().map_err(|_| OAuthError::InvalidClient {
                used_authorization_header: true,
                failure: ClientFailure::MalformedCredentials,
            })?)?
        }
        None => None,
    };
    Ok((params, basic))
}

impl TokenApi {
    /// Records a client's assertion as spent, at every replica at once (the replay store is
    /// theirs in common); refuses one spent before, and answers 503 when the store cannot
    /// say.
    async fn spend(&self, client_id: &str, spent: &SpentAssertion) -> Result<(), OAuthError> {
        let used = self
            .state
            .replay
            .first_use(
                &crate::store::assertions::CLIENT_ASSERTIONS,
                client_id,
                &spent.jti,
                spent.made_at,
                spent.expires_at,
            )
            .await
            .map_err(|_| OAuthError::TemporarilyUnavailable)?;
        let failure = match used {
            Use::First => return Ok(()),
            Use::Again => ClientFailure::AssertionReplayed,
            Use::MadeBeforeMemory => ClientFailure::AssertionPredatesReplayStore,
        };
        Err(OAuthError::InvalidClient {
            used_authorization_header: false,
            failure,
        })
    }

    /// The keys of `client_id`, when it is registered by JWKS URL and the request carries an
    /// assertion it could be checked with: from the cache, or fetched. Any other request
    /// (a secret, keys registered inline) waits on nothing here.
    async fn fetch_keys(
        &self,
        snapshot: &Snapshot,
        client_id: &str,
        credentials: &Credentials,
    ) -> Option<token_request::FetchedKeys> {
        let assertion = credentials.assertion.as_ref()?.as_ref().ok()?;
        let ClientAuth::JwksUri(url) = &snapshot.clients.get(client_id)?.auth else {
            return None;
        };
        let keys = self
            .state
            .client_jwks
            .keys_for(client_id, url, assertion.kid())
            .await;
        Some(token_request::FetchedKeys {
            client_id: client_id.to_owned(),
            keys,
        })
    }

    /// Issues a token for a request whose claimed id is `client` when that names a
    /// registered client.
    async fn issue(
        &self,
        req: &Request,
        credentials: Credentials,
        snapshot: &Snapshot,
        client: Option<&str>,
    ) -> Result<TokenResponse, OAuthError> {
        let used_authorization_header = req
            .headers()
            .contains_key(poem::http::header::AUTHORIZATION);
        let source = self
            .state
            .config
            .trusted_proxies
            .source_of(req)
            .map(|ip| ip.to_string())
            .unwrap_or_default();
        let limits = &self.state.limits;
        // Per source first, so that no client id, real or made up, gets counters of its own
        // before the source is within its limit.
        limits.check(limits.hit_source(&format!("token-source:{source}")).await)?;
        // Ids that are not clients share one key per source: made-up ids never get state of
        // their own, and cost the same work as a real one.
        let client_key = client.unwrap_or("?");
        let failures_key = format!("token-failures:{client_key}:{source}");
        // A brute-force guard: once too many authentications failed, refuse before checking.
        limits.check(limits.peek_failures(&failures_key).await)?;
        limits.check(
            limits
                .hit_request(&format!("token:{client_key}:{source}"))
                .await,
        )?;
        let profile = self.state.config.profile();
        if let Some(failure) = refused_by_profile(profile, &credentials) {
            return Err(OAuthError::InvalidClient {
                used_authorization_header,
                failure,
            });
        }
        let now = Utc::now();
        let audiences = self
            .state
            .assertion_audiences
            .each_ref()
            .map(String::as_str);
        let fetched_keys = match client {
            Some(id) => self.fetch_keys(snapshot, id, &credentials).await,
            None => None,
        };
        let presented = token_request::Presented {
            basic: credentials.basic,
            used_authorization_header,
            fetched_keys,
        };
        let grant = match token_request::authorize(
            credentials.params,
            presented,
            credentials.assertion,
            snapshot,
            &audiences,
            now,
        ) {
            Err(e @ OAuthError::InvalidClient { .. }) => {
                limits.hit_failure(&failures_key).await;
                return Err(e);
            }
            other => other?,
        };
        service_kit::telemetry::record_client_id(&grant.client_id);
        // Boxed: the proof's checks and its single-use record are a large future, which would
        // otherwise weigh on every request's.
        let bound_to = if req.headers().contains_key("dpop") {
            Box::pin(crate::token_binding::proof_key(
                req,
                &self.state,
                now.timestamp(),
            ))
            .await?
        } else {
            None
        };
        if bound_to.is_none() && (grant.dpop_required || profile.is_fapi2()) {
            return Err(OAuthError::InvalidDpopProof {
                reason: shared::dpop::ProofFault::Required,
                algorithms: profile.algorithms(),
            });
        }
        // Spent last, by the token it earns: a request refused for anything else leaves it
        // unused. Boxed for the same reason as the proof.
        if let Some(spent) = &grant.assertion {
            match Box::pin(self.spend(&grant.client_id, spent)).await {
                // A store that forgot is not the client's failure: it is not counted as one.
                Err(
                    e @ OAuthError::InvalidClient {
                        failure: ClientFailure::AssertionReplayed,
                        ..
                    },
                ) => {
                    limits.hit_failure(&failures_key).await;
                    return Err(e);
                }
                other => other?,
            }
        }
        let key = snapshot.signing_key(now).ok_or_else(|| {
            tracing::error!("no signing key is active");
            OAuthError::ServerError
        })?;
        let mut claims = token_request::claims_for(
            &grant,
            &self.state.config.issuer,
            &self.state.config.audience,
            now,
        );
        let token_type = match bound_to {
            Some(jkt) => {
                claims.cnf = Some(shared::claims::Confirmation { jkt });
                "DPoP"
            }
            None => "Bearer",
        };
        let signed = key.sign_jwt(&claims);
        self.state.signing.record(signed.is_ok());
        let access_token = signed.map_err(|e| {
            tracing::error!(error = format!("{e:#}"), kid = %key.kid, "signing failed");
            OAuthError::ServerError
        })?;
        metrics::counter!("auth_tokens_issued_total", "client_id" => grant.client_id.clone())
            .increment(1);
        // The audit record of the issuance is the request's own log line.
        for (field, value) in [
            (OUTCOME, "token_issued"),
            (KID, key.kid.as_str()),
            (JTI, claims.jti.as_str()),
            (SCOPE, claims.scope.as_str()),
        ] {
            record(field, value);
        }
        Ok(TokenResponse::Ok(
            Json(AccessTokenResponse {
                token_type: token_type.into(),
                expires_in: shared::claims::TOKEN_TTL_SECS,
                access_token,
            }),
            NO_STORE.into(),
            "no-cache".into(),
        ))
    }
}
