//! Request extractors: the verified partner, and a JSON body taken leniently so the
//! domain parser can report every problem at once in our own error shape.

use std::collections::BTreeMap;
use std::marker::PhantomData;
use std::sync::{Arc, OnceLock};

use intake_shared::claims::{AccessTokenClaims, scopes};
use intake_shared::ratelimit::Decision;
use poem::http::StatusCode;
use poem::web::Json as PoemJson;
use poem::{IntoResponse, Request, RequestBody};
use poem_openapi::registry::{
    MetaMediaType, MetaOAuthFlow, MetaOAuthFlows, MetaOAuthScope, MetaRequest, MetaSecurityScheme,
    Registry,
};
use poem_openapi::types::Type;
use poem_openapi::{ApiExtractor, ApiExtractorType, ExtractParamOptions};

use crate::auth::AuthError;
use crate::routes::bodies::{
    InvalidScope, NotJson, TooLarge, TooManyAttempts, Unauthenticated, Unreadable,
};
use crate::startup::AppState;

/// Name of the security scheme in the OpenAPI document.
pub const SECURITY_SCHEME: &str = "partnerOAuth";

/// Largest intake request body accepted.
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// The token URL shown in the OpenAPI document, set once from the configured issuer.
pub static TOKEN_URL: OnceLock<&'static str> = OnceLock::new();

fn message<T: poem_openapi::types::ToJSON + Default>(status: StatusCode) -> poem::Response {
    (status, PoemJson(T::default().to_json())).into_response()
}

/// The answer to a request that is not authenticated or not allowed.
pub fn auth_error_response(e: AuthError) -> poem::Response {
    match e {
        AuthError::Missing => {
            let mut r = message::<Unauthenticated>(StatusCode::UNAUTHORIZED);
            r.headers_mut()
                .insert("www-authenticate", "Bearer".parse().expect("static header"));
            r
        }
        AuthError::Invalid(_) => {
            let mut r = message::<Unauthenticated>(StatusCode::UNAUTHORIZED);
            r.headers_mut().insert(
                "www-authenticate",
                r#"Bearer error="invalid_token""#.parse().expect("static header"),
            );
            r
        }
        AuthError::InsufficientScope => {
            let mut r = message::<InvalidScope>(StatusCode::FORBIDDEN);
            r.headers_mut().insert(
                "www-authenticate",
                r#"Bearer error="insufficient_scope", scope="enquiry:case:intake:create""#
                    .parse()
                    .expect("static header"),
            );
            r
        }
    }
}

/// A partner whose bearer token verified and carries `enquiry:case:intake:create`.
pub struct Partner(pub Arc<AccessTokenClaims>);

impl<'a> ApiExtractor<'a> for Partner {
    const TYPES: &'static [ApiExtractorType] = &[ApiExtractorType::SecurityScheme];
    type ParamType = ();
    type ParamRawType = ();

    fn register(registry: &mut Registry) {
        let token_url = *TOKEN_URL.get_or_init(|| "http://127.0.0.1:8081/oauth/token");
        registry.create_security_scheme(
            SECURITY_SCHEME,
            MetaSecurityScheme {
                ty: "oauth2",
                description: Some(
                    "OAuth 2.0 client credentials: an RS256 JWT access token from the auth-server, sent as `Authorization: Bearer <token>`.",
                ),
                name: None,
                key_in: None,
                scheme: None,
                bearer_format: None,
                flows: Some(MetaOAuthFlows {
                    implicit: None,
                    password: None,
                    client_credentials: Some(MetaOAuthFlow {
                        authorization_url: None,
                        token_url: Some(token_url),
                        refresh_url: None,
                        scopes: vec![
                            MetaOAuthScope {
                                name: scopes::CASE_INTAKE_CREATE,
                                description: Some("Creating cases through the enquiry intake method"),
                            },
                            MetaOAuthScope {
                                name: scopes::REFERRAL_CREATE,
                                description: Some("Creating case referral data"),
                            },
                        ],
                    }),
                    authorization_code: None,
                }),
                openid_connect_url: None,
            },
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
        let state = request
            .data::<Arc<AppState>>()
            .ok_or_else(|| poem::Error::from_status(StatusCode::INTERNAL_SERVER_ERROR))?;
        let header = request
            .headers()
            .get(poem::http::header::AUTHORIZATION)
            .map(|v| v.as_bytes());
        match state
            .verifier
            .authenticate(header, scopes::CASE_INTAKE_CREATE)
            .await
        {
            Ok(claims) => {
                intake_shared::telemetry::record_client_id(&claims.client_id);
                let decision = state
                    .limiter
                    .hit(
                        &format!("intake:{}", claims.client_id),
                        state.partner_limit(),
                    )
                    .await;
                if decision != Decision::Allowed {
                    metrics::counter!("ratelimit_refused_total", "service" => "intake-api")
                        .increment(1);
                    let mut r = message::<TooManyAttempts>(StatusCode::TOO_MANY_REQUESTS);
                    r.headers_mut()
                        .insert("retry-after", decision.retry_after_secs().into());
                    return Err(poem::Error::from_response(r));
                }
                Ok(Partner(claims))
            }
            Err(e) => {
                let reason = match e {
                    AuthError::Missing => "missing",
                    AuthError::Invalid(r) => r,
                    AuthError::InsufficientScope => "scope",
                };
                metrics::counter!("intake_auth_failures_total", "reason" => reason).increment(1);
                use intake_shared::telemetry::{Field, record};
                record(Field::Outcome, "unauthenticated");
                record(Field::Reason, reason);
                Err(poem::Error::from_response(auth_error_response(e)))
            }
        }
    }
}

/// A JSON body documented as `T` but read as raw JSON, so that every problem is
/// reported by the domain parser rather than the first one by the framework.
pub struct LenientJson<T> {
    /// The body as sent.
    pub raw: String,
    /// The parsed JSON.
    pub value: serde_json::Value,
    _doc: PhantomData<T>,
}

impl<'a, T: Type> ApiExtractor<'a> for LenientJson<T> {
    const TYPES: &'static [ApiExtractorType] = &[ApiExtractorType::RequestObject];
    type ParamType = ();
    type ParamRawType = ();

    fn register(registry: &mut Registry) {
        T::register(registry);
    }

    fn request_meta() -> Option<MetaRequest> {
        Some(MetaRequest {
            description: None,
            content: vec![MetaMediaType {
                content_type: "application/json",
                schema: T::schema_ref(),
            }],
            required: true,
        })
    }

    async fn from_request(
        _request: &'a Request,
        body: &mut RequestBody,
        _opts: ExtractParamOptions<Self::ParamType>,
    ) -> poem::Result<Self> {
        let bytes = match body.take() {
            Ok(b) => b
                .into_bytes_limit(MAX_BODY_BYTES)
                .await
                .map_err(|e| match e {
                    poem::error::ReadBodyError::PayloadTooLarge => poem::Error::from_response(
                        message::<TooLarge>(StatusCode::PAYLOAD_TOO_LARGE),
                    ),
                    _ => poem::Error::from_response(message::<Unreadable>(StatusCode::BAD_REQUEST)),
                })?,
            Err(_) => Default::default(),
        };
        let not_json = || poem::Error::from_response(message::<NotJson>(StatusCode::BAD_REQUEST));
        let raw = String::from_utf8(bytes.to_vec()).map_err(|_| not_json())?;
        let value = serde_json::from_str(&raw).map_err(|_| not_json())?;
        Ok(Self {
            raw,
            value,
            _doc: PhantomData,
        })
    }
}

/// `{"message": "The given data was invalid.", "errors": {...}}`
#[derive(Debug, poem_openapi::Object)]
#[oai(example)]
pub struct ValidationErrorBody {
    /// Always "The given data was invalid.".
    pub message: String,
    /// Every problem, by field path (`field`, `credit_issues.0`, `addresses.1.postcode`).
    pub errors: BTreeMap<String, Vec<String>>,
}

impl poem_openapi::types::Example for ValidationErrorBody {
    fn example() -> Self {
        let mut errors = crate::domain::ValidationErrors::default();
        errors.add("email", "The email field must be a valid email address.");
        errors.add(
            "credit_issues.0",
            "The selected credit issues.0 is invalid.",
        );
        errors.add(
            "addresses.1.postcode",
            "The addresses.1.postcode field is required.",
        );
        Self::new(errors)
    }
}

impl ValidationErrorBody {
    /// The body for these errors.
    pub fn new(errors: crate::domain::ValidationErrors) -> Self {
        Self {
            message: "The given data was invalid.".into(),
            errors: errors.into_map(),
        }
    }
}
