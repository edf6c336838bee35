//! Who is calling: bearer-token authentication as middleware, and the [`Caller`] extractors
//! (a partner, a brand's portal) that each operation declares as its OAuth 2.0 security scheme.

use std::marker::PhantomData;
use std::sync::Arc;

use poem::{Endpoint, Middleware, Request, RequestBody};
use poem_openapi::registry::{MetaOAuthScope, Registry};
use poem_openapi::{ApiExtractor, ApiExtractorType, ExtractParamOptions, OAuthScopes};
use service_kit::telemetry::{OUTCOME, REASON, record, record_client_id};
use shared::claims::{AccessTokenClaims, scopes};
use shared::dpop::VerifiedProof;
use shared::profile::Profile;

use crate::auth::Refusal;
use crate::error::IntakeError;
use crate::sandbox::World;
use crate::state::AppState;

/// Name of the security scheme in the OpenAPI document.
pub const SECURITY_SCHEME: &str = "partnerOAuth";

/// The outcome of checking a request's bearer token, left in the request for what runs after.
#[derive(Clone)]
pub struct Authentication(pub Result<Arc<AccessTokenClaims>, Refusal>);

/// The DPoP proof of a request whose token and proof checked out, not yet recorded as used:
/// it is spent by the operation's [`Caller`], once the request is past the partner's rate
/// limit and the scope check, so that a request refused there writes nothing to the replay
/// store (and the proof may be sent again while it is fresh).
#[derive(Clone)]
struct UnspentProof {
    proof: VerifiedProof,
    state: Arc<AppState>,
}

/// Middleware: verifies the request's bearer token once, before rate limiting and the
/// operation, which read the outcome from the request's [`Authentication`].
pub struct Authenticate {
    state: Arc<AppState>,
}

impl Authenticate {
    /// Verifies against `state`'s verifier.
    pub fn new(state: Arc<AppState>) -> Self {
        Self { state }
    }
}

impl<E: Endpoint> Middleware<E> for Authenticate {
    type Output = AuthenticateEndpoint<E>;

    fn transform(&self, inner: E) -> Self::Output {
        AuthenticateEndpoint {
            inner,
            state: self.state.clone(),
        }
    }
}

/// Endpoint produced by [`Authenticate`].
pub struct AuthenticateEndpoint<E> {
    inner: E,
    state: Arc<AppState>,
}

impl<E: Endpoint> Endpoint for AuthenticateEndpoint<E> {
    type Output = E::Output;

    async fn call(&self, mut req: Request) -> poem::Result<Self::Output> {
        let header = req
            .headers()
            .get(poem::http::header::AUTHORIZATION)
            .map(|v| v.as_bytes());
        let outcome = match crate::auth::dpop_token(header) {
            None => self.state.verifier.authenticate(header).await,
            Some(token) => match Box::pin(dpop(&self.state, &req, token)).await {
                Ok((claims, proof)) => {
                    let state = self.state.clone();
                    req.extensions_mut().insert(UnspentProof { proof, state });
                    Ok(claims)
                }
                Err(e) => Err(e),
            },
        };
        if let Ok(claims) = &outcome {
            record_client_id(&claims.client_id);
        }
        req.extensions_mut().insert(Authentication(outcome));
        self.inner.call(req).await
    }
}

/// Checks a request made under the `DPoP` scheme: its token and its one proof, which is
/// not spent here (see [`UnspentProof`]).
async fn dpop(
    state: &AppState,
    req: &Request,
    token: Result<&str, Refusal>,
) -> Result<(Arc<AccessTokenClaims>, VerifiedProof), Refusal> {
    let token = token?;
    let proof = shared::dpop::single_proof(req.headers().get_all("dpop"));
    let url = called_url(state, req);
    state
        .verifier
        .authenticate_dpop(token, proof, req.method().as_str(), &url)
        .await
}

/// Takes a request's proof: with server nonces on, only if it carries a current one; and
/// only if it was not used before at any replica. When that cannot be told, the request is
/// refused for now (503), never let through.
async fn spend(state: &AppState, proof: &VerifiedProof) -> Result<(), Refusal> {
    let nonces = state.dpop_nonces.as_deref();
    let now = chrono::Utc::now().timestamp();
    service_kit::dpop_nonce::spend(&state.replay, nonces, proof, now)
        .await
        .map_err(Refusal::from)
}

/// The URL the client called: `INTAKE_PUBLIC_URL` and the path, or, without it, `http://`,
/// the `Host` and the path.
fn called_url(state: &AppState, req: &Request) -> String {
    let path = req.uri().path();
    match &state.config.public_url {
        Some(public) => format!("{}{path}", public.as_str().trim_end_matches('/')),
        None => {
            let host = req
                .headers()
                .get(poem::http::header::HOST)
                .and_then(|h| h.to_str().ok())
                .or_else(|| req.uri().authority().map(|a| a.as_str()))
                .unwrap_or_default();
            format!("http://{host}{path}")
        }
    }
}

/// The scope an operation requires of its caller's token.
pub trait RequiredScope: Send + Sync + 'static {
    /// The scope's name.
    const SCOPE: &'static str;

    /// What the scope lets a client do, as the document's security scheme lists it.
    const DESCRIPTION: &'static str;

    /// Why a token holding the scope may still not call the operation (a reason for logs
    /// and metrics), if it may not.
    fn refuses(_claims: &AccessTokenClaims) -> Option<&'static str> {
        None
    }
}

/// Partners' operations: `enquiry:case:intake:create`.
pub struct CaseIntake;

impl RequiredScope for CaseIntake {
    const SCOPE: &'static str = scopes::CASE_INTAKE_CREATE;
    const DESCRIPTION: &'static str = "Creating cases through the enquiry intake method";
}

/// Partners' referrals: `enquiry:referral:create`.
pub struct ReferralCreate;

impl RequiredScope for ReferralCreate {
    const SCOPE: &'static str = scopes::REFERRAL_CREATE;
    const DESCRIPTION: &'static str = "Creating case referral data";
}

/// Partners' webhook operations: `webhooks:manage`.
pub struct WebhooksManage;

impl RequiredScope for WebhooksManage {
    const SCOPE: &'static str = scopes::WEBHOOKS_MANAGE;
    const DESCRIPTION: &'static str =
        "Managing the partner's webhook endpoints and reading the event catalogue";
}

/// The customer portal's operation: `portal:redirect:redeem`.
pub struct RedirectRedeem;

impl RequiredScope for RedirectRedeem {
    const SCOPE: &'static str = scopes::PORTAL_REDIRECT_REDEEM;
    const DESCRIPTION: &'static str =
        "Redeeming a customer's redirect link (brands' customer portals)";

    /// A portal redeems only the links of the brands its token names, so one naming none (a
    /// client registered by 0.1.0, not bound since) redeems nothing: refused as lacking the
    /// scope, before any link is looked at.
    fn refuses(claims: &AccessTokenClaims) -> Option<&'static str> {
        if !claims.brands().is_empty() {
            return None;
        }
        tracing::warn!(
            client_id = %claims.client_id,
            "portal client bound to no brand: it redeems nothing until `auth-server client set-brands` binds it"
        );
        Some("portal_unbound")
    }
}

/// A caller whose bearer token verified and carries `S::SCOPE`.
pub struct Caller<S> {
    /// The token's claims.
    pub claims: Arc<AccessTokenClaims>,
    _scope: PhantomData<S>,
}

/// `S::SCOPE` as the document's security requirement names it: an operation declares its
/// caller as `#[oai(scope = "Partner::SCOPE")] partner: Partner`, so the requirement says
/// which scope the caller's check asks for.
pub struct Scope<S>(PhantomData<S>);

impl<S: RequiredScope> OAuthScopes for Scope<S> {
    fn meta() -> Vec<MetaOAuthScope> {
        vec![MetaOAuthScope {
            name: S::SCOPE,
            description: Some(S::DESCRIPTION),
        }]
    }

    fn name(&self) -> &'static str {
        S::SCOPE
    }
}

impl<S: RequiredScope> Caller<S> {
    /// The scope the caller's token must carry, for the operation's `#[oai(scope)]`.
    pub const SCOPE: Scope<S> = Scope(PhantomData);
}

/// A partner: its token carries `enquiry:case:intake:create`.
pub type Partner = Caller<CaseIntake>;

/// A partner referring a customer: its token carries `enquiry:referral:create`.
pub type Referrer = Caller<ReferralCreate>;

/// A partner managing its webhooks: its token carries `webhooks:manage`.
pub type WebhookManager = Caller<WebhooksManage>;

/// A brand's customer portal: its token carries `portal:redirect:redeem` and names at
/// least one brand.
pub type Portal = Caller<RedirectRedeem>;

impl<S> Caller<S> {
    /// The caller's client id.
    pub fn client_id(&self) -> &str {
        &self.claims.client_id
    }

    /// The world the caller's requests live in: a sandbox client's apart from the real one.
    pub fn world(&self) -> World {
        World::of(self.claims.sandbox)
    }
}

impl Portal {
    /// The brands whose links this portal redeems.
    pub fn brands(&self) -> &[String] {
        self.claims.brands()
    }
}

/// The caller behind `req` with a token for `S`, or why there is none. A DPoP proof is
/// spent here, last: the cheap refusals before it (the rate limit, the scope) leave it unused.
async fn caller<S: RequiredScope>(req: &Request) -> Result<Caller<S>, IntakeError> {
    let outcome = req
        .extensions()
        .get::<Authentication>()
        .map(|a| a.0.clone())
        .unwrap_or(Err(Refusal::Missing));
    let mut claims = outcome
        .map_err(|e| {
            let reason = e.reason();
            (e, reason)
        })
        .and_then(|claims| {
            let refused = if claims.has_scope(S::SCOPE) {
                S::refuses(&claims)
            } else {
                Some("scope")
            };
            match refused {
                None => Ok(claims),
                Some(reason) => Err((Refusal::InsufficientScope(S::SCOPE), reason)),
            }
        });
    if claims.is_ok()
        && let Some(UnspentProof { proof, state }) = req.extensions().get::<UnspentProof>()
        && let Err(e) = spend(state, proof).await
    {
        let reason = e.reason();
        claims = Err((e, reason));
    }
    claims
        .map(|claims| Caller {
            claims,
            _scope: PhantomData,
        })
        .map_err(|(e, reason)| {
            metrics::counter!("intake_auth_failures_total", "reason" => reason).increment(1);
            record(OUTCOME, "unauthenticated");
            record(REASON, reason);
            match IntakeError::from(e) {
                IntakeError::Unauthenticated(e, _) => {
                    let profile = req
                        .data::<Arc<AppState>>()
                        .map_or(Profile::Standard, |s| s.verifier.profile());
                    IntakeError::Unauthenticated(e, profile)
                }
                other => other,
            }
        })
}

impl<'a, S: RequiredScope> ApiExtractor<'a> for Caller<S> {
    const TYPES: &'static [ApiExtractorType] = &[ApiExtractorType::SecurityScheme];
    type ParamType = ();
    type ParamRawType = ();

    fn register(registry: &mut Registry) {
        registry.create_security_scheme(
            SECURITY_SCHEME,
            service_kit::openapi::client_credentials_scheme(
                "OAuth 2.0 client credentials: an RS256 JWT access token from the auth-server, sent as `Authorization: Bearer <token>`; a DPoP-bound token (RFC 9449) as `Authorization: DPoP <token>` with a new `DPoP` proof header for every request.",
                [
                    Scope::<CaseIntake>::meta(),
                    Scope::<ReferralCreate>::meta(),
                    Scope::<RedirectRedeem>::meta(),
                    Scope::<WebhooksManage>::meta(),
                ]
                .into_iter()
                .flatten()
                .collect(),
            ),
        );
    }

    fn security_schemes() -> Vec<&'static str> {
        vec![SECURITY_SCHEME]
    }

    async fn from_request(
        request: &'a Request,
        _body: &mut RequestBody,
        _opts: ExtractParamOptions<Self::ParamType>,
    ) -> poem::Result<Self> {
        Ok(caller(request).await?)
    }
}
