//! What resource servers and client libraries fetch: the JWKS and the RFC 8414 metadata.

use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::Utc;
use poem::{Request, RequestBody};
use poem_openapi::param::Header;
use poem_openapi::payload::Json;
use poem_openapi::registry::{MetaOAuthScope, Registry};
use poem_openapi::{
    ApiExtractor, ApiExtractorType, ApiResponse, ExtractParamOptions, OAuthScopes, Object, OpenApi,
    Tags,
};
use serde::Serialize;
use shared::claims::scopes;
use shared::dpop::ProofFault;
use shared::error::OAuthErrorBody;

use crate::bearer::Refusal;
use crate::client_keys::SIGNING_ALGORITHMS;

use crate::keys::Jwk;
use crate::state::AppState;

#[derive(Tags)]
enum ApiTags {
    /// Keys and metadata for verifying tokens.
    Discovery,
}

/// A JSON Web Key Set (RFC 7517 section 5).
#[derive(Debug, Object)]
pub struct JwkSet {
    /// The public keys that sign (or recently signed, or will soon sign) access tokens.
    pub keys: Vec<Jwk>,
}

/// Response of the JWKS endpoint.
#[derive(ApiResponse)]
pub enum JwksResponse {
    /// The published keys.
    #[oai(status = 200)]
    Ok(
        Json<JwkSet>,
        #[oai(header = "Cache-Control")] String,
        #[oai(header = "ETag")] String,
    ),
    /// Unchanged since the `ETag` sent in `If-None-Match`.
    #[oai(status = 304)]
    NotModified(
        #[oai(header = "Cache-Control")] String,
        #[oai(header = "ETag")] String,
    ),
}

/// The clients whose tokens resource servers must refuse, though the tokens verify.
#[derive(Debug, Object, Serialize)]
pub struct RevocationList {
    /// Ids of disabled clients, sorted.
    pub disabled_clients: Vec<String>,
}

/// Response of the revocation list endpoint.
#[derive(ApiResponse)]
pub enum RevocationsResponse {
    /// The current list; fetch it again before relying on it (`no-cache`).
    #[oai(status = 200)]
    Ok(
        Json<RevocationList>,
        #[oai(header = "Cache-Control")] String,
        #[oai(header = "ETag")] String,
    ),
    /// Unchanged since the `ETag` sent in `If-None-Match`.
    #[oai(status = 304)]
    NotModified(
        #[oai(header = "Cache-Control")] String,
        #[oai(header = "ETag")] String,
    ),
    /// `invalid_token`: no token, or one that does not verify, has expired, or belongs to
    /// a disabled client, or a DPoP-bound one sent as a bearer token or with a proof by
    /// another key; `invalid_dpop_proof`: a bound token's proof is missing, used before,
    /// or not made for this request; `use_dpop_nonce`: server nonces are on and the proof
    /// lacks the current one, which the `DPoP-Nonce` header of every answer carries.
    #[oai(status = 401)]
    Unauthorized(
        Json<OAuthErrorBody>,
        #[oai(header = "WWW-Authenticate")] String,
    ),
    /// `insufficient_scope`: the token does not grant `revocations:read`.
    #[oai(status = 403)]
    Forbidden(
        Json<OAuthErrorBody>,
        #[oai(header = "WWW-Authenticate")] String,
    ),
    /// `temporarily_unavailable`: whether a DPoP proof was used before cannot be told now;
    /// send the request again after `Retry-After` seconds, with a new proof.
    #[oai(status = 503)]
    Unavailable(Json<OAuthErrorBody>, #[oai(header = "Retry-After")] u64),
}

impl RevocationsResponse {
    /// The answer to a refused request; `dpop` names the proof algorithms when the request
    /// came under the `DPoP` scheme or the deployment takes no other, whose challenge (RFC
    /// 9449 section 7.1) lists them.
    fn refused(refusal: Refusal, dpop: Option<&[&str]>) -> Self {
        let (error, description) = match refusal {
            Refusal::Missing => (None, "A bearer token is required."),
            Refusal::Invalid(_) | Refusal::InvalidBoundToken(_) => (
                Some("invalid_token"),
                "The access token is invalid, expired, or its client is disabled.",
            ),
            Refusal::InsufficientScope(_) => (
                Some("insufficient_scope"),
                "The access token does not grant revocations:read.",
            ),
            Refusal::InvalidProof(_) => (
                Some("invalid_dpop_proof"),
                "The DPoP proof is missing, was used before, or was not made for this request.",
            ),
            Refusal::UseDpopNonce => (
                Some("use_dpop_nonce"),
                "Resource server requires nonce in DPoP proof: make a new proof with the nonce of this answer's DPoP-Nonce header.",
            ),
            Refusal::Unvetted(_) => (
                Some("temporarily_unavailable"),
                "The DPoP proof cannot be checked now; send the request again later with a new proof.",
            ),
        };
        let body = Json(OAuthErrorBody {
            error: error.unwrap_or("invalid_token").to_owned(),
            error_description: description.to_owned(),
            hint: None,
            message: description.to_owned(),
        });
        let scope = RevocationsRead.name();
        // RFC 6750 section 3: no error code when no token was sent at all.
        let challenge = match (error, dpop) {
            (None, None) => format!("Bearer scope=\"{scope}\""),
            (None, Some(algs)) => format!(
                "DPoP scope=\"{scope}\", algs=\"{}\"",
                shared::dpop::challenge_algs(algs)
            ),
            (Some(code), None) => format!("Bearer error=\"{code}\", scope=\"{scope}\""),
            (Some(code), Some(algs)) => format!(
                "DPoP error=\"{code}\", scope=\"{scope}\", algs=\"{}\"",
                shared::dpop::challenge_algs(algs)
            ),
        };
        match refusal {
            Refusal::InsufficientScope(_) => Self::Forbidden(body, challenge),
            Refusal::Unvetted(_) => Self::Unavailable(body, service_kit::replay::RETRY_AFTER_SECS),
            Refusal::Missing
            | Refusal::Invalid(_)
            | Refusal::InvalidBoundToken(_)
            | Refusal::InvalidProof(_)
            | Refusal::UseDpopNonce => Self::Unauthorized(body, challenge),
        }
    }
}

/// The `Authorization` header of a resource server's request, documented as the bearer
/// scheme it is for most, and its `DPoP` proof (for a token bound to a key); checked by
/// the operation, which answers in OAuth's own terms.
pub struct ResourceServerToken {
    authorization: Option<String>,
    proof: Result<Option<String>, ProofFault>,
}

/// Name of the resource servers' security scheme in the OpenAPI document.
pub const RESOURCE_SERVER_SCHEME: &str = "resourceServerToken";

/// The scope `/revocations` asks of a resource server's token: the operation's security
/// requirement names it, and its check asks for it.
pub struct RevocationsRead;

impl OAuthScopes for RevocationsRead {
    fn meta() -> Vec<MetaOAuthScope> {
        vec![MetaOAuthScope {
            name: scopes::REVOCATIONS_READ,
            description: Some(
                "Reading the list of clients whose tokens must be refused (resource servers)",
            ),
        }]
    }

    fn name(&self) -> &'static str {
        scopes::REVOCATIONS_READ
    }
}

impl<'a> ApiExtractor<'a> for ResourceServerToken {
    const TYPES: &'static [ApiExtractorType] = &[ApiExtractorType::SecurityScheme];
    type ParamType = ();
    type ParamRawType = ();

    fn register(registry: &mut Registry) {
        registry.create_security_scheme(
            RESOURCE_SERVER_SCHEME,
            service_kit::openapi::client_credentials_scheme(
                "An access token of a resource server's own client, granting `revocations:read` (client credentials at `/oauth/token`), sent as `Authorization: Bearer <token>`. A token bound to a DPoP key is sent as `Authorization: DPoP <token>` instead, with a `DPoP` proof for `GET` on the issuer's `/revocations` URL (RFC 9449 section 7).",
                RevocationsRead::meta(),
            ),
        );
    }

    fn security_schemes() -> Vec<&'static str> {
        vec![RESOURCE_SERVER_SCHEME]
    }

    async fn from_request(
        request: &'a Request,
        _body: &mut RequestBody,
        _opts: ExtractParamOptions<Self::ParamType>,
    ) -> poem::Result<Self> {
        let value = request
            .headers()
            .get(poem::http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let proof = shared::dpop::single_proof(request.headers().get_all("dpop"))
            .map(|p| p.map(str::to_owned));
        Ok(Self {
            authorization: value,
            proof,
        })
    }
}

impl DiscoveryApi {
    /// Whether `token` may read the revocation list: a bearer token, or (`dpop`) a bound
    /// token beside a proof by its key, which is then spent at every replica.
    async fn authorize(
        &self,
        snapshot: &crate::registry::Snapshot,
        token: &ResourceServerToken,
        dpop: bool,
    ) -> Result<(), Refusal> {
        let now = Utc::now();
        let scope = RevocationsRead.name();
        let Some(authorization) = token.authorization.as_deref().filter(|_| dpop) else {
            let bearer = token.authorization.as_deref();
            return self
                .state
                .bearer
                .check(snapshot, bearer, scope, now)
                .await
                .map(drop);
        };
        let url = format!(
            "{}/revocations",
            self.state.config.issuer.trim_end_matches('/')
        );
        let proof = token.proof.as_ref().map(Option::as_deref).map_err(|r| *r);
        let (_, proof) = self
            .state
            .bearer
            .check_dpop(snapshot, authorization, proof, "GET", &url, scope, now)
            .await?;
        let nonces = self.state.dpop_nonces.as_deref();
        service_kit::dpop_nonce::spend(&self.state.replay, nonces, &proof, now.timestamp())
            .await
            .map_err(Refusal::from)
    }
}

/// A strong entity tag for a body: resource servers poll with `If-None-Match`, so an
/// unchanged document costs a 304 and no body.
fn etag<T: Serialize>(body: &T) -> String {
    let json = serde_json::to_vec(body).unwrap_or_default();
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, &json);
    format!("\"{}\"", URL_SAFE_NO_PAD.encode(&digest.as_ref()[..16]))
}

/// Whether an `If-None-Match` value names `etag` (RFC 9110 13.1.2: weak comparison).
fn matches(if_none_match: Option<&str>, etag: &str) -> bool {
    if_none_match.is_some_and(|v| {
        v.split(',')
            .map(|t| t.trim().trim_start_matches("W/"))
            .any(|t| t == etag || t == "*")
    })
}

/// Authorization server metadata (RFC 8414).
#[derive(Debug, Object)]
pub struct ServerMetadata {
    /// The issuer: the `iss` of every token.
    pub issuer: String,
    /// Where to ask for tokens.
    pub token_endpoint: String,
    /// Where the signing keys are published.
    pub jwks_uri: String,
    /// Only `client_credentials`.
    pub grant_types_supported: Vec<String>,
    /// `client_secret_basic`, `client_secret_post` and `private_key_jwt`.
    pub token_endpoint_auth_methods_supported: Vec<String>,
    /// The algorithms a `private_key_jwt` client may sign its assertions with.
    pub token_endpoint_auth_signing_alg_values_supported: Vec<String>,
    /// Every scope a client can be granted.
    pub scopes_supported: Vec<String>,
    /// Empty: there is no authorization endpoint.
    pub response_types_supported: Vec<String>,
    /// What DPoP proofs may be signed with (RFC 9449): a request with one gets a token
    /// bound to its key. Server nonces are not used.
    pub dpop_signing_alg_values_supported: Vec<String>,
}

/// The discovery endpoints.
pub struct DiscoveryApi {
    /// Shared state.
    pub state: Arc<AppState>,
}

#[OpenApi]
impl DiscoveryApi {
    /// The public signing keys (JWKS).
    ///
    /// Cache it for the `max-age` it is served with; refetch early when a token carries a
    /// `kid` you do not know.
    #[oai(
        path = "/.well-known/jwks.json",
        method = "get",
        operation_id = "getJwks",
        tag = "ApiTags::Discovery"
    )]
    async fn jwks(
        &self,
        #[oai(name = "If-None-Match")] if_none_match: Header<Option<String>>,
    ) -> JwksResponse {
        let snapshot = self.state.registry.snapshot();
        let keys: Vec<Jwk> = snapshot
            .published_keys(Utc::now())
            .into_iter()
            .map(|k| k.jwk.clone())
            .collect();
        let tag = etag(&keys);
        let cache = format!("public, max-age={}", self.state.config.jwks_max_age_secs);
        if matches(if_none_match.0.as_deref(), &tag) {
            return JwksResponse::NotModified(cache, tag);
        }
        JwksResponse::Ok(Json(JwkSet { keys }), cache, tag)
    }

    /// Clients whose tokens must be refused.
    ///
    /// For resource servers: a token whose `client_id` is listed must be refused even
    /// though it verifies, until the client is enabled again. Poll it every few seconds
    /// with `If-None-Match`; keep the last list while this endpoint cannot be reached.
    /// Read with an access token granting `revocations:read`, of the resource server's own
    /// client (`auth-server client create <name> --scopes revocations:read`).
    #[oai(
        path = "/revocations",
        method = "get",
        operation_id = "getRevocations",
        tag = "ApiTags::Discovery"
    )]
    async fn revocations(
        &self,
        #[oai(scope = "RevocationsRead")] token: ResourceServerToken,
        #[oai(name = "If-None-Match")] if_none_match: Header<Option<String>>,
    ) -> RevocationsResponse {
        let snapshot = self.state.registry.snapshot();
        let dpop = token
            .authorization
            .as_deref()
            .is_some_and(|v| shared::claims::names_scheme(v, "dpop"));
        if let Err(refusal) = self.authorize(&snapshot, &token, dpop).await {
            tracing::info!(reason = %refusal, "revocation list refused");
            metrics::counter!("auth_revocations_refused_total", "reason" => refusal.reason())
                .increment(1);
            let profile = self.state.config.profile();
            let algorithms = self.state.bearer.proof_algorithms();
            let dpop_challenge = (dpop || profile.is_fapi2()).then_some(algorithms);
            return RevocationsResponse::refused(refusal, dpop_challenge);
        }
        let mut disabled_clients: Vec<String> = snapshot
            .clients
            .iter()
            .filter(|(_, c)| c.disabled)
            .map(|(id, _)| id.clone())
            .collect();
        disabled_clients.sort_unstable();
        let list = RevocationList { disabled_clients };
        let tag = etag(&list);
        let cache = "no-cache".to_owned();
        if matches(if_none_match.0.as_deref(), &tag) {
            return RevocationsResponse::NotModified(cache, tag);
        }
        RevocationsResponse::Ok(Json(list), cache, tag)
    }

    /// Authorization server metadata (RFC 8414).
    #[oai(
        path = "/.well-known/oauth-authorization-server",
        method = "get",
        operation_id = "getServerMetadata",
        tag = "ApiTags::Discovery"
    )]
    async fn metadata(&self) -> Json<ServerMetadata> {
        // What is accepted, exactly: under FAPI 2.0 no secret method and no RS256.
        let profile = self.state.config.profile();
        let (auth_methods, assertion_algorithms): (&[&str], &[&str]) = if profile.is_fapi2() {
            (&["private_key_jwt"], profile.algorithms())
        } else {
            (
                &[
                    "client_secret_basic",
                    "client_secret_post",
                    "private_key_jwt",
                ],
                &SIGNING_ALGORITHMS,
            )
        };
        let issuer = self.state.config.issuer.trim_end_matches('/').to_owned();
        Json(ServerMetadata {
            token_endpoint: format!("{issuer}/oauth/token"),
            jwks_uri: format!("{issuer}/.well-known/jwks.json"),
            issuer,
            grant_types_supported: vec!["client_credentials".into()],
            token_endpoint_auth_methods_supported: auth_methods
                .iter()
                .map(|m| m.to_string())
                .collect(),
            token_endpoint_auth_signing_alg_values_supported: assertion_algorithms
                .iter()
                .map(|a| a.to_string())
                .collect(),
            scopes_supported: shared::claims::scopes::ALL
                .iter()
                .map(|s| s.to_string())
                .collect(),
            response_types_supported: vec![],
            dpop_signing_alg_values_supported: profile
                .algorithms()
                .iter()
                .map(|a| a.to_string())
                .collect(),
        })
    }
}
