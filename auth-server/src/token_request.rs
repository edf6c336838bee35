//! Parsing and deciding a client-credentials token request (RFC 6749 section 4.4).

use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use chrono::{DateTime, Utc};
use serde::de::{Deserializer, MapAccess, Visitor};
use service_kit::Secret;
use shared::claims::{AccessTokenClaims, TOKEN_TTL_SECS, scopes};

use crate::assertion::{ClientAssertion, JWT_BEARER, MAX_ASSERTION_CHARS, SpentAssertion};
use crate::client_keys::ClientKeys;
use crate::error::{ClientFailure, OAuthError};
use crate::registry::{ClientAuth, ClientEntry, SecretCheck, Snapshot};

/// What an unknown client id is checked against: one secret nobody has (the hash of the
/// empty string, which no generated secret is).
static DECOY: std::sync::LazyLock<ClientEntry> = std::sync::LazyLock::new(|| ClientEntry {
    scopes: Vec::new(),
    brands: None,
    disabled: false,
    secrets: vec![(crate::secrets::hash_secret(""), None)],
    auth: ClientAuth::Secret,
    dpop_required: false,
    sandbox: false,
});

/// The parameters the endpoint reads; anything else is ignored (RFC 6749 section 3.2).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct TokenParams {
    /// `grant_type`.
    pub grant_type: Option<String>,
    /// `client_id`.
    pub client_id: Option<String>,
    /// `client_secret`, for client_secret_post.
    pub client_secret: Option<Secret<String>>,
    /// `scope`, space-separated.
    pub scope: Option<String>,
    /// `client_assertion_type`, for private_key_jwt.
    pub client_assertion_type: Option<String>,
    /// `client_assertion`, for private_key_jwt: a credential, kept out of logs like a secret.
    pub client_assertion: Option<Secret<String>>,
}

/// The parameters the endpoint reads.
const PARAMS: [&str; 6] = [
    "grant_type",
    "client_id",
    "client_secret",
    "scope",
    "client_assertion_type",
    "client_assertion",
];

/// Longest value a token request parameter may have, as the document says: room for any
/// identifier, secret or list of our scopes.
pub const MAX_PARAM_CHARS: usize = 255;

impl TokenParams {
    fn set(&mut self, name: &str, value: Option<String>) -> Result<(), OAuthError> {
        let longest = match name {
            "client_assertion" => MAX_ASSERTION_CHARS,
            _ => MAX_PARAM_CHARS,
        };
        if PARAMS.contains(&name) && value.as_ref().is_some_and(|v| v.chars().count() > longest) {
            return Err(OAuthError::InvalidRequest {
                hint: format!(
                    "The `{name}` parameter must not be longer than {longest} characters"
                ),
            });
        }
        let slot_was_set = match name {
            "grant_type" => std::mem::replace(&mut self.grant_type, value).is_some(),
            "client_id" => std::mem::replace(&mut self.client_id, value).is_some(),
            "client_secret" => {
                std::mem::replace(&mut self.client_secret, value.map(Secret::new)).is_some()
            }
            "scope" => std::mem::replace(&mut self.scope, value).is_some(),
            "client_assertion_type" => {
                std::mem::replace(&mut self.client_assertion_type, value).is_some()
            }
            "client_assertion" => {
                std::mem::replace(&mut self.client_assertion, value.map(Secret::new)).is_some()
            }
            _ => return Ok(()),
        };
        if slot_was_set {
            return Err(OAuthError::parameter(name));
        }
        Ok(())
    }
}

/// Which body encoding the request used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyKind {
    /// `application/json` (the spec).
    Json,
    /// `application/x-www-form-urlencoded` (RFC 6749).
    Form,
}

/// Decides the body encoding from the `Content-Type` header; without one, from the body.
pub fn body_kind(content_type: Option<&str>, body: &[u8]) -> Result<BodyKind, OAuthError> {
    let Some(ct) = content_type else {
        let first = body.iter().find(|b| !b.is_ascii_whitespace());
        return Ok(if first == Some(&b'{') {
            BodyKind::Json
        } else {
            BodyKind::Form
        });
    };
    let essence = ct
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    match essence.as_str() {
        "application/json" => Ok(BodyKind::Json),
        "application/x-www-form-urlencoded" => Ok(BodyKind::Form),
        _ => Err(OAuthError::InvalidRequest {
            hint: "Send the parameters as application/json or application/x-www-form-urlencoded"
                .into(),
        }),
    }
}

/// Reads the parameters of a body; a parameter given twice, or not as a string, is refused.
pub fn parse_params(kind: BodyKind, body: &[u8]) -> Result<TokenParams, OAuthError> {
    match kind {
        BodyKind::Form => parse_form(body),
        BodyKind::Json => parse_json(body),
    }
}

fn parse_form(body: &[u8]) -> Result<TokenParams, OAuthError> {
    let mut params = TokenParams::default();
    if std::str::from_utf8(body).is_err() {
        return Err(OAuthError::InvalidRequest {
            hint: "The request body must be UTF-8".into(),
        });
    }
    for (name, value) in form_urlencoded::parse(body) {
        let value = (!value.is_empty()).then(|| value.into_owned());
        params.set(&name, value)?;
    }
    Ok(params)
}

fn malformed_json() -> OAuthError {
    OAuthError::InvalidRequest {
        hint: "The request body must be a JSON object".into(),
    }
}

fn parse_json(body: &[u8]) -> Result<TokenParams, OAuthError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(TokenParams::default());
    }
    // A visitor rather than a map type: duplicate keys must be seen, not silently merged.
    struct ParamsVisitor;
    impl<'de> Visitor<'de> for ParamsVisitor {
        type Value = Result<TokenParams, OAuthError>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a JSON object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut params = TokenParams::default();
            let mut first_error = None;
            // The whole object is read even after an error, so a malformed tail is still
            // reported as malformed JSON rather than as a parameter problem.
            while let Some(name) = map.next_key::<String>()? {
                let value: serde_json::Value = map.next_value()?;
                if first_error.is_some() || !PARAMS.contains(&name.as_str()) {
                    continue;
                }
                let value = match value {
                    serde_json::Value::Null => Ok(None),
                    serde_json::Value::String(s) if s.is_empty() => Ok(None),
                    serde_json::Value::String(s) => Ok(Some(s)),
                    _ => Err(OAuthError::parameter(&name)),
                };
                if let Err(e) = value.and_then(|v| params.set(&name, v)) {
                    first_error = Some(e);
                }
            }
            Ok(first_error.map_or(Ok(params), Err))
        }
    }
    let mut de = serde_json::Deserializer::from_slice(body);
    let parsed = (&mut de)
        .deserialize_map(ParamsVisitor)
        .map_err(|_| malformed_json())?;
    de.end().map_err(|_| malformed_json())?;
    parsed
}

/// Client credentials from an `Authorization: Basic` header (RFC 6749 section 2.3.1).
#[derive(Debug)]
pub struct BasicCredentials {
    /// The client id.
    pub client_id: String,
    /// The secret.
    pub client_secret: Secret<String>,
}

/// Parses an `Authorization` header. `Ok(None)`: not a Basic header. `Err`: a Basic
/// header that cannot be read, which is a failed client authentication.
pub fn parse_basic(header: &str) -> Result<Option<BasicCredentials>, OAuthError> {
    let invalid = OAuthError::InvalidClient {
        used_authorization_header: true,
        failure: ClientFailure::MalformedCredentials,
    };
    let Some((scheme, rest)) = header.trim().split_once(' ') else {
        return Ok(None);
    };
    if !scheme.eq_ignore_ascii_case("basic") {
        return Ok(None);
    }
    let decoded = STANDARD.decode(rest.trim()).map_err(|_| invalid.clone())?;
    let decoded = String::from_utf8(decoded).map_err(|_| invalid.clone())?;
    let (id, secret) = decoded.split_once(':').ok_or_else(|| invalid.clone())?;
    // Both halves are form-urlencoded before encoding (RFC 6749 section 2.3.1).
    let unescape = |s: &str| -> String {
        form_urlencoded::parse(format!("v={s}").as_bytes())
            .next()
            .map(|(_, v)| v.into_owned())
            .unwrap_or_default()
    };
    Ok(Some(BasicCredentials {
        client_id: unescape(id),
        client_secret: Secret::new(unescape(secret)),
    }))
}

/// A token request that passed every check.
#[derive(Debug)]
pub struct Grant {
    /// The authenticated client.
    pub client_id: String,
    /// The scopes granted, in the order asked, without repeats.
    pub scopes: Vec<String>,
    /// The client's brands, when the redeem scope is granted: the resource server lets the
    /// token redeem only those brands' links.
    pub brands: Option<Vec<String>>,
    /// The assertion the client authenticated with, which must be spent before the token
    /// is issued; none for a secret.
    pub assertion: Option<SpentAssertion>,
    /// Whether the client gets only DPoP-bound tokens.
    pub dpop_required: bool,
    /// Whether it is a sandbox client: its token says so, for the resource server to keep
    /// what it makes apart from real cases.
    pub sandbox: bool,
}

/// The keys fetched from a client's JWKS URL for the assertion of a request, or why there
/// are none.
#[derive(Debug)]
pub struct FetchedKeys {
    /// The client whose URL they came from.
    pub client_id: String,
    /// The keys.
    pub keys: Result<Arc<ClientKeys>, ClientFailure>,
}

/// What a request presented besides its parameters.
#[derive(Debug, Default)]
pub struct Presented {
    /// Credentials from an `Authorization: Basic` header.
    pub basic: Option<BasicCredentials>,
    /// Whether it carried an `Authorization` header (answered with a challenge).
    pub used_authorization_header: bool,
    /// For an assertion of a client registered by JWKS URL, its keys, fetched beforehand
    /// (the only step that waits on the network).
    pub fetched_keys: Option<FetchedKeys>,
}

/// Checks a request against the snapshot, in the order partners' libraries expect:
/// grant type, client id, scope present, client authentication, then scopes. A request
/// carrying a client assertion (`assertion`, read from its `client_assertion`) is checked
/// as private_key_jwt, for any of `audiences`.
pub fn authorize(
    params: TokenParams,
    presented: Presented,
    assertion: Option<Result<ClientAssertion, ClientFailure>>,
    snapshot: &Snapshot,
    audiences: &[&str],
    now: DateTime<Utc>,
) -> Result<Grant, OAuthError> {
    if params.grant_type.as_deref() != Some("client_credentials") {
        return Err(OAuthError::UnsupportedGrantType);
    }
    if assertion.is_some() || params.client_assertion_type.is_some() {
        return authorize_assertion(params, presented, assertion, snapshot, audiences, now);
    }
    let Presented {
        basic,
        used_authorization_header,
        ..
    } = presented;
    let (client_id, secret) = match basic {
        Some(basic) => {
            // One authentication method per request (RFC 6749 section 2.3); the same
            // credentials repeated in the body are tolerated, different ones are not.
            if params
                .client_id
                .as_ref()
                .is_some_and(|id| *id != basic.client_id)
            {
                return Err(OAuthError::parameter("client_id"));
            }
            if params
                .client_secret
                .as_ref()
                .is_some_and(|s| s != &basic.client_secret)
            {
                return Err(OAuthError::parameter("client_secret"));
            }
            (basic.client_id, Some(basic.client_secret))
        }
        None => {
            let id = params
                .client_id
                .ok_or_else(|| OAuthError::parameter("client_id"))?;
            (id, params.client_secret)
        }
    };
    let scope = params.scope.ok_or_else(|| OAuthError::parameter("scope"))?;
    let client = authenticate(snapshot.clients.get(&client_id), secret.as_ref(), now).map_err(
        |failure| OAuthError::InvalidClient {
            used_authorization_header,
            failure,
        },
    )?;
    grant(client_id, client, &scope)
}

/// Checks a private_key_jwt request (RFC 7523 section 3): the assertion names the client,
/// and must be signed by one of its keys.
fn authorize_assertion(
    params: TokenParams,
    presented: Presented,
    assertion: Option<Result<ClientAssertion, ClientFailure>>,
    snapshot: &Snapshot,
    audiences: &[&str],
    now: DateTime<Utc>,
) -> Result<Grant, OAuthError> {
    let invalid = |failure| OAuthError::InvalidClient {
        used_authorization_header: presented.used_authorization_header,
        failure,
    };
    // Half of private_key_jwt (an assertion without its type, or the type alone) is a
    // client authentication that failed (RFC 7521 section 4.2), as a missing secret is; a
    // type other than JWT's is a request we do not understand.
    let assertion = match (params.client_assertion_type.as_deref(), assertion) {
        (Some(JWT_BEARER), Some(assertion)) => assertion,
        (None, _) | (Some(JWT_BEARER), None) => {
            return Err(invalid(ClientFailure::AssertionMalformed));
        }
        (Some(_), _) => return Err(OAuthError::parameter("client_assertion_type")),
    };
    let scope = params.scope.ok_or_else(|| OAuthError::parameter("scope"))?;
    if presented.basic.is_some() || params.client_secret.is_some() {
        return Err(invalid(ClientFailure::MultipleAuthMethods));
    }
    let assertion = assertion.map_err(invalid)?;
    // The `client_id` parameter is optional here (RFC 7523 section 3.1); when sent, the
    // assertion must be that client's.
    let client_id = params
        .client_id
        .or_else(|| assertion.issuer().map(str::to_owned))
        .ok_or(invalid(ClientFailure::AssertionIssuer))?;
    let client = snapshot
        .clients
        .get(&client_id)
        .ok_or(invalid(ClientFailure::UnknownClient))?;
    let keys = match &client.auth {
        ClientAuth::Secret => return Err(invalid(ClientFailure::WrongAuthMethod)),
        ClientAuth::PrivateKeyJwt(keys) => keys.clone(),
        ClientAuth::JwksUri(_) => match presented.fetched_keys {
            Some(fetched) if fetched.client_id == client_id => fetched.keys.map_err(invalid)?,
            _ => return Err(invalid(ClientFailure::JwksUnavailable)),
        },
    };
    let spent = assertion
        .verify(&client_id, &keys, audiences, now)
        .map_err(invalid)?;
    // As with a secret: only a valid assertion says it is the partner still calling.
    if client.disabled {
        return Err(invalid(ClientFailure::DisabledClient));
    }
    let mut granted = grant(client_id, client, &scope)?;
    granted.assertion = Some(spent);
    Ok(granted)
}

/// The grant for an authenticated client asking for `scope`: every scope must be known
/// and the client's.
fn grant(client_id: String, client: &ClientEntry, scope: &str) -> Result<Grant, OAuthError> {
    let mut granted: Vec<String> = Vec::new();
    for s in scope.split(' ').filter(|s| !s.is_empty()) {
        if !scopes::is_known(s) || !client.scopes.iter().any(|c| c == s) {
            return Err(OAuthError::InvalidScope {
                scope: s.to_owned(),
            });
        }
        if !granted.iter().any(|g| g == s) {
            granted.push(s.to_owned());
        }
    }
    if granted.is_empty() {
        return Err(OAuthError::parameter("scope"));
    }
    let brands = granted
        .iter()
        .any(|g| g == scopes::PORTAL_REDIRECT_REDEEM)
        .then(|| client.brands.clone())
        .flatten();
    Ok(Grant {
        client_id,
        scopes: granted,
        brands,
        assertion: None,
        dpop_required: client.dpop_required,
        sandbox: client.sandbox,
    })
}

/// The client, when `secret` authenticates it at `now`; else why not.
fn authenticate<'a>(
    client: Option<&'a ClientEntry>,
    secret: Option<&Secret<String>>,
    now: DateTime<Utc>,
) -> Result<&'a ClientEntry, ClientFailure> {
    // An unknown id is checked against a decoy, so it takes as long as a wrong secret.
    let check = match secret {
        Some(s) => client.unwrap_or(&DECOY).check_secret(s.expose(), now),
        None => SecretCheck::Wrong,
    };
    match (client, check) {
        (None, _) => Err(ClientFailure::UnknownClient),
        // Such a client has no secret: whatever was sent is not its way in.
        (Some(c), _) if c.auth.is_private_key_jwt() => Err(ClientFailure::WrongAuthMethod),
        (Some(_), SecretCheck::Wrong) => Err(ClientFailure::WrongSecret),
        (Some(_), SecretCheck::Expired) => Err(ClientFailure::ExpiredSecret),
        // Only the right secret says it is the partner calling: anyone else is just wrong.
        (Some(c), SecretCheck::Current) if c.disabled => Err(ClientFailure::DisabledClient),
        (Some(c), SecretCheck::Current) => Ok(c),
    }
}

/// The claims of a token for `grant`, issued at `now`.
pub fn claims_for(
    grant: &Grant,
    issuer: &str,
    audience: &str,
    now: DateTime<Utc>,
) -> AccessTokenClaims {
    let iat = now.timestamp();
    AccessTokenClaims {
        iss: issuer.to_owned(),
        sub: grant.client_id.clone(),
        client_id: grant.client_id.clone(),
        aud: audience.to_owned(),
        scope: grant.scopes.join(" "),
        iat,
        nbf: iat,
        exp: iat + TOKEN_TTL_SECS,
        jti: uuid::Uuid::new_v4().simple().to_string(),
        brands: grant.brands.clone(),
        cnf: None,
        sandbox: grant.sandbox,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(body: &str) -> Result<TokenParams, OAuthError> {
        parse_params(BodyKind::Json, body.as_bytes())
    }

    #[test]
    fn json_and_form_bodies_give_the_same_parameters() {
        let a = json(r#"{"grant_type":"client_credentials","client_id":"c","client_secret":"s","scope":"x y","extra":1}"#).unwrap();
        let b = parse_params(
            BodyKind::Form,
            b"grant_type=client_credentials&client_id=c&client_secret=s&scope=x+y&extra=1",
        )
        .unwrap();
        assert_eq!(a, b);
        assert_eq!(a.scope.as_deref(), Some("x y"));
    }

    #[test]
    fn an_overlong_parameter_is_refused_naming_it() {
        let long = "x".repeat(MAX_PARAM_CHARS + 1);
        let refused = json(&format!(r#"{{"client_id":"{long}"}}"#));
        assert_eq!(
            refused,
            Err(OAuthError::InvalidRequest {
                hint: "The `client_id` parameter must not be longer than 255 characters".into()
            })
        );
        let fits = "x".repeat(MAX_PARAM_CHARS);
        assert!(json(&format!(r#"{{"client_id":"{fits}"}}"#)).is_ok());
    }

    #[test]
    fn a_repeated_parameter_is_named() {
        assert_eq!(
            json(r#"{"scope":"a","scope":"b"}"#),
            Err(OAuthError::parameter("scope"))
        );
        assert_eq!(
            parse_params(BodyKind::Form, b"client_id=a&client_id=b"),
            Err(OAuthError::parameter("client_id"))
        );
    }

    #[test]
    fn a_non_string_parameter_is_named() {
        assert_eq!(
            json(r#"{"client_id":42}"#),
            Err(OAuthError::parameter("client_id"))
        );
        assert_eq!(
            json(r#"{"scope":["a"]}"#),
            Err(OAuthError::parameter("scope"))
        );
    }

    #[test]
    fn malformed_json_is_an_invalid_request() {
        for body in ["{", "[1]", "\"x\"", "{} {}", "nul"] {
            assert!(
                matches!(json(body), Err(OAuthError::InvalidRequest { .. })),
                "{body}"
            );
        }
    }

    #[test]
    fn content_types_are_matched_on_their_essence() {
        assert_eq!(
            body_kind(Some("application/json; charset=utf-8"), b""),
            Ok(BodyKind::Json)
        );
        assert_eq!(
            body_kind(Some("Application/X-WWW-Form-Urlencoded"), b""),
            Ok(BodyKind::Form)
        );
        assert!(body_kind(Some("text/plain"), b"").is_err());
        assert_eq!(body_kind(None, b" {}"), Ok(BodyKind::Json));
        assert_eq!(body_kind(None, b"a=b"), Ok(BodyKind::Form));
    }

    #[test]
    fn basic_credentials_are_decoded_and_unescaped() {
        let h = format!("Basic {}", STANDARD.encode("my%20id:p%3Ass"));
        let c = parse_basic(&h).unwrap().unwrap();
        assert_eq!(c.client_id, "my id");
        assert_eq!(c.client_secret.expose(), "p:ss");
        assert!(parse_basic("Bearer abc").unwrap().is_none());
        assert!(parse_basic("Basic !!!").is_err());
        assert!(parse_basic(&format!("Basic {}", STANDARD.encode("nocolon"))).is_err());
    }

    #[test]
    fn each_failed_client_authentication_is_told_apart() {
        use ClientFailure::{DisabledClient, ExpiredSecret, UnknownClient, WrongSecret};
        let now = Utc::now();
        let intake = scopes::CASE_INTAKE_CREATE;
        let client = |disabled| ClientEntry {
            scopes: vec![intake.to_owned()],
            brands: None,
            auth: ClientAuth::Secret,
            dpop_required: false,
            sandbox: false,
            disabled,
            secrets: vec![
                (crate::secrets::hash_secret("new"), None),
                (
                    crate::secrets::hash_secret("old"),
                    Some(now - chrono::Duration::minutes(1)),
                ),
            ],
        };
        let cases = [
            (
                "unknown id",
                "nobody",
                Some("new"),
                false,
                Err(UnknownClient),
            ),
            ("wrong secret", "c", Some("guess"), false, Err(WrongSecret)),
            ("no secret", "c", None, false, Err(WrongSecret)),
            (
                "secret past its grace",
                "c",
                Some("old"),
                false,
                Err(ExpiredSecret),
            ),
            (
                "disabled, right secret",
                "c",
                Some("new"),
                true,
                Err(DisabledClient),
            ),
            // Only the right secret shows it is the partner still calling.
            (
                "disabled, wrong secret",
                "c",
                Some("guess"),
                true,
                Err(WrongSecret),
            ),
            (
                "disabled, expired secret",
                "c",
                Some("old"),
                true,
                Err(ExpiredSecret),
            ),
            ("right secret", "c", Some("new"), false, Ok(())),
        ];
        for (name, id, secret, disabled, expected) in cases {
            let snapshot = Snapshot {
                clients: std::collections::HashMap::from([("c".to_owned(), client(disabled))]),
                ..Snapshot::default()
            };
            let params = TokenParams {
                grant_type: Some("client_credentials".into()),
                client_id: Some(id.into()),
                client_secret: secret.map(|s| Secret::new(s.to_owned())),
                scope: Some(intake.into()),
                ..TokenParams::default()
            };
            let got = authorize(params, Presented::default(), None, &snapshot, &[], now)
                .map(|_| ())
                .map_err(|e| match e {
                    OAuthError::InvalidClient { failure, .. } => failure,
                    other => panic!("{name}: {other:?}"),
                });
            assert_eq!(got, expected, "{name}");
        }
    }
}
