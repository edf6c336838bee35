//! The OpenAPI documents as partners' tools read them: what the derive macros write, made
//! exact by each service, and the `Allow` header that the document's paths make possible.

use std::sync::Arc;

use poem::http::{HeaderValue, Method, StatusCode, header};
use poem::{Endpoint, IntoResponse, Middleware, Request, Response};
use poem_openapi::registry::{MetaOAuthFlow, MetaOAuthFlows, MetaOAuthScope, MetaSecurityScheme};
use poem_openapi::{OpenApi, OpenApiService};
use serde_json::{Map, Value, json};

/// The token URL a client-credentials scheme is registered with: the issuer's is known only
/// at run time, when [`set_token_url`] puts it in its place.
pub const TOKEN_URL_PLACEHOLDER: &str = "https://token-url.invalid/oauth/token";

/// An OAuth 2.0 security scheme of the client-credentials grant offering `scopes`, its token
/// URL [`TOKEN_URL_PLACEHOLDER`] until the service's documents name the issuer's.
pub fn client_credentials_scheme(
    description: &'static str,
    scopes: Vec<MetaOAuthScope>,
) -> MetaSecurityScheme {
    MetaSecurityScheme {
        ty: "oauth2",
        description: Some(description),
        name: None,
        key_in: None,
        scheme: None,
        bearer_format: None,
        flows: Some(MetaOAuthFlows {
            implicit: None,
            password: None,
            client_credentials: Some(MetaOAuthFlow {
                authorization_url: None,
                token_url: Some(TOKEN_URL_PLACEHOLDER),
                refresh_url: None,
                scopes,
            }),
            authorization_code: None,
        }),
        openid_connect_url: None,
    }
}

/// Names `token_url` as the token endpoint of the client-credentials flow of `doc`'s security
/// scheme `scheme` ([`client_credentials_scheme`]).
pub fn set_token_url(doc: &mut Value, scheme: &str, token_url: &str) {
    let flow = format!("/components/securitySchemes/{scheme}/flows/clientCredentials");
    if let Some(flow) = doc.pointer_mut(&flow).and_then(Value::as_object_mut) {
        flow.insert("tokenUrl".into(), json!(token_url));
    }
}

/// A service's OpenAPI document and its interactive docs page, made once at start-up
/// ([`documents`]).
pub struct ApiDocuments {
    /// The document, as JSON.
    pub json: String,
    /// The Swagger UI page with the document inside.
    pub html: String,
}

/// The documents of `api`: the derived document, tidied ([`tidy`]) and then refined by the
/// service with what the derive cannot say (value sets known only from configuration,
/// conditional requirements, named examples).
pub fn documents<T: OpenApi>(
    api: &OpenApiService<T, ()>,
    refine: impl FnOnce(&mut Value),
) -> ApiDocuments {
    let derived = api.spec();
    let mut doc: Value = serde_json::from_str(&derived).unwrap_or(Value::Null);
    tidy(&mut doc);
    refine(&mut doc);
    let json = serde_json::to_string_pretty(&doc).unwrap_or(derived.clone());
    // The docs page embeds the document it was made with, verbatim: swap in the refined one.
    let html = api.swagger_ui_html().replacen(&derived, &json, 1);
    ApiDocuments { json, html }
}

/// Rewrites the one shape the derive writes that generators refuse: a field of a named type
/// with a description of its own, written `allOf: [{$ref}, {description}]`
/// (openapi-python-client: "Cannot take allOf a non-object"), becomes the `$ref` with the
/// description beside it, which every generator and the docs page read.
pub fn tidy(doc: &mut Value) {
    match doc {
        Value::Object(map) => {
            let lone_ref = match map.get("allOf") {
                Some(Value::Array(parts)) if parts.len() == 2 => parts[0]
                    .get("$ref")
                    .filter(|_| parts[0].as_object().is_some_and(|o| o.len() == 1))
                    .filter(|_| parts[1].get("$ref").is_none())
                    .cloned(),
                _ => None,
            };
            if let Some(reference) = lone_ref {
                map.remove("allOf");
                map.insert("$ref".into(), reference);
            }
            map.values_mut().for_each(tidy);
        }
        Value::Array(items) => items.iter_mut().for_each(tidy),
        _ => {}
    }
}

/// The schema named `name` under `components.schemas`, to refine in place.
pub fn schema_mut<'a>(doc: &'a mut Value, name: &str) -> Option<&'a mut Map<String, Value>> {
    doc.pointer_mut(&format!("/components/schemas/{name}"))?
        .as_object_mut()
}

/// The property `name` of the object schema `schema`, to refine in place.
pub fn property_mut<'a>(
    schema: &'a mut Map<String, Value>,
    name: &str,
) -> Option<&'a mut Map<String, Value>> {
    schema.get_mut("properties")?.get_mut(name)?.as_object_mut()
}

/// Sets the schema of an operation's parameter `name`, to say what the derive cannot (its
/// bounds, for one).
pub fn parameter_schema(operation: &mut Map<String, Value>, name: &str, schema: Value) {
    if let Some(Value::Array(params)) = operation.get_mut("parameters") {
        for param in params.iter_mut().filter(|p| p["name"] == name) {
            param["schema"] = schema.clone();
        }
    }
}

/// The operation at `path` and `method` (lower case), to refine in place.
pub fn operation_mut<'a>(
    doc: &'a mut Value,
    path: &str,
    method: &str,
) -> Option<&'a mut Map<String, Value>> {
    doc.get_mut("paths")?
        .get_mut(path)?
        .get_mut(method)?
        .as_object_mut()
}

/// Keeps only `statuses` among an operation's documented responses: the shared error type
/// documents every status the service can give, and each operation gives fewer.
pub fn keep_responses(operation: &mut Map<String, Value>, statuses: &[&str]) {
    if let Some(Value::Object(responses)) = operation.get_mut("responses") {
        responses.retain(|status, _| statuses.contains(&status.as_str()));
    }
}

/// Sets the example of an operation's answer with `status`, where the body type's own
/// example (shared with other operations or statuses) says something else.
pub fn response_example(operation: &mut Map<String, Value>, status: &str, example: &Value) {
    let content = operation
        .get_mut("responses")
        .and_then(|responses| responses.get_mut(status))
        .and_then(|response| response.get_mut("content"));
    if let Some(Value::Object(content)) = content {
        for media in content.values_mut() {
            media["example"] = example.clone();
        }
    }
}

/// Named examples (`name`, summary, value) for an operation's JSON request body, in the
/// order given: the docs page offers them in a list and fills the first in.
pub fn request_examples(operation: &mut Map<String, Value>, examples: &[(&str, &str, Value)]) {
    let Some(Value::Object(content)) = operation
        .get_mut("requestBody")
        .and_then(|body| body.get_mut("content"))
    else {
        return;
    };
    let named: Map<String, Value> = examples
        .iter()
        .map(|(name, summary, value)| {
            (
                (*name).to_owned(),
                json!({"summary": summary, "value": value}),
            )
        })
        .collect();
    for media in content.values_mut() {
        if let Value::Object(media) = media {
            media.insert("examples".into(), Value::Object(named.clone()));
        }
    }
}

/// One path template of the document, split into segments; `None` matches any one segment.
type Template = Vec<Option<String>>;

/// Adds `Allow` to every 405 answer (RFC 9110 15.5.6), listing the methods the document (and
/// the plain routes beside it) gives the request's path.
#[derive(Clone)]
pub struct AllowHeader {
    routes: Arc<Vec<(Template, HeaderValue)>>,
}

impl AllowHeader {
    /// The methods of every path in `doc`, plus `GET` (and so `HEAD`) on each of `get_paths`.
    pub fn new(doc: &Value, get_paths: &[&str]) -> Self {
        let mut routes = Vec::new();
        if let Some(Value::Object(paths)) = doc.get("paths") {
            for (path, item) in paths {
                let mut methods: Vec<String> = item
                    .as_object()
                    .into_iter()
                    .flat_map(|ops| ops.keys())
                    .filter_map(|m| Method::from_bytes(m.to_ascii_uppercase().as_bytes()).ok())
                    .map(|m| m.to_string())
                    .collect();
                if methods.iter().any(|m| m == "GET") {
                    methods.push("HEAD".into());
                }
                routes.push((template(path), methods.join(", ")));
            }
        }
        for path in get_paths {
            routes.push((template(path), "GET, HEAD".into()));
        }
        let routes = routes
            .into_iter()
            .filter_map(|(t, allow)| Some((t, HeaderValue::from_str(&allow).ok()?)))
            .collect();
        Self {
            routes: Arc::new(routes),
        }
    }

    fn allow(&self, path: &str) -> Option<&HeaderValue> {
        self.routes
            .iter()
            .find_map(|(t, allow)| fits(t, path).then_some(allow))
    }
}

fn template(path: &str) -> Template {
    path.trim_end_matches('/')
        .split('/')
        .map(|s| (!(s.starts_with('{') && s.ends_with('}'))).then(|| s.to_owned()))
        .collect()
}

impl<E: Endpoint> Middleware<E> for AllowHeader {
    type Output = AllowHeaderEndpoint<E>;

    fn transform(&self, inner: E) -> Self::Output {
        AllowHeaderEndpoint {
            inner,
            allow: self.clone(),
        }
    }
}

/// The endpoint [`AllowHeader`] wraps.
pub struct AllowHeaderEndpoint<E> {
    inner: E,
    allow: AllowHeader,
}

impl<E: Endpoint> Endpoint for AllowHeaderEndpoint<E> {
    type Output = Response;

    async fn call(&self, req: Request) -> poem::Result<Response> {
        // Only a 405 needs the path: keep the URI (reference-counted, no copy) until then.
        let uri = req.uri().clone();
        let mut response = match self.inner.call(req).await {
            Ok(output) => output.into_response(),
            Err(e) if e.status() == StatusCode::METHOD_NOT_ALLOWED => e.into_response(),
            Err(e) => return Err(e),
        };
        if response.status() == StatusCode::METHOD_NOT_ALLOWED
            && let Some(allow) = self.allow.allow(uri.path())
        {
            response.headers_mut().insert(header::ALLOW, allow.clone());
        }
        Ok(response)
    }
}

/// An operation on its way out (README, "Versioning and change policy"): deprecated at
/// `deprecated_at`, answering until `sunset_at`, replaced by the operation at `successor`.
/// Times are RFC 3339.
#[derive(Debug, Clone, Copy)]
pub struct Deprecation {
    /// The operation's method, upper case.
    pub method: &'static str,
    /// Its path, as the document writes it (`/cases/{reference}`).
    pub path: &'static str,
    /// When it was deprecated.
    pub deprecated_at: &'static str,
    /// When it stops answering.
    pub sunset_at: &'static str,
    /// The path of the operation that replaces it.
    pub successor: &'static str,
}

/// A [`Deprecation`] whose method is no HTTP method or whose times do not read as RFC 3339.
#[derive(Debug, thiserror::Error)]
#[error("deprecation of {method} {path}: {value:?} is not {expected}")]
pub struct BadDeprecation {
    method: &'static str,
    path: &'static str,
    value: &'static str,
    expected: &'static str,
}

impl Deprecation {
    fn refused(&self, value: &'static str, expected: &'static str) -> BadDeprecation {
        BadDeprecation {
            method: self.method,
            path: self.path,
            value,
            expected,
        }
    }

    /// Its answers' `Deprecation` (RFC 9745: `@` and Unix seconds), `Sunset` (RFC 8594: an
    /// HTTP date) and `Link` (`rel="successor-version"`) headers.
    fn headers(&self) -> Result<DeprecationHeaderValues, BadDeprecation> {
        let time = |time: &'static str| {
            chrono::DateTime::parse_from_rfc3339(time)
                .map_err(|_| self.refused(time, "an RFC 3339 time"))
        };
        let since = time(self.deprecated_at)?.timestamp();
        let sunset = time(self.sunset_at)?.with_timezone(&chrono::Utc);
        let value = |v: String| HeaderValue::from_str(&v).expect("dates and paths are ASCII");
        Ok([
            (
                header::HeaderName::from_static("deprecation"),
                value(format!("@{since}")),
            ),
            (
                header::HeaderName::from_static("sunset"),
                value(sunset.format("%a, %d %b %Y %H:%M:%S GMT").to_string()),
            ),
            (
                header::LINK,
                value(format!("<{}>; rel=\"successor-version\"", self.successor)),
            ),
        ])
    }
}

/// The three headers a deprecated operation answers with.
type DeprecationHeaderValues = [(header::HeaderName, HeaderValue); 3];

/// Marks each of `deprecations` in `doc`: `deprecated: true`, and its sunset and successor
/// at the end of its description.
pub fn mark_deprecated(doc: &mut Value, deprecations: &[Deprecation]) {
    for d in deprecations {
        let method = d.method.to_ascii_lowercase();
        if let Some(op) = operation_mut(doc, d.path, &method) {
            op.insert("deprecated".into(), json!(true));
            let described = op
                .get("description")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let note = format!(
                "Deprecated: answers until {}, then 410; use `{}` instead.",
                d.sunset_at, d.successor
            );
            op.insert(
                "description".into(),
                json!(format!("{described}\n\n{note}").trim_start()),
            );
        }
    }
}

/// Middleware: the answers of deprecated operations carry their [`Deprecation`]'s headers.
#[derive(Clone)]
pub struct DeprecationHeaders {
    routes: Arc<Vec<(Method, Template, DeprecationHeaderValues)>>,
}

impl DeprecationHeaders {
    /// The headers of `deprecations`; fails on a method or a time that does not read.
    pub fn new(deprecations: &[Deprecation]) -> Result<Self, BadDeprecation> {
        let routes = deprecations
            .iter()
            .map(|d| {
                let method = Method::from_bytes(d.method.as_bytes())
                    .map_err(|_| d.refused(d.method, "an HTTP method"))?;
                Ok((method, template(d.path), d.headers()?))
            })
            .collect::<Result<_, _>>()?;
        Ok(Self {
            routes: Arc::new(routes),
        })
    }

    fn of(&self, method: &Method, path: &str) -> Option<&DeprecationHeaderValues> {
        self.routes
            .iter()
            .find_map(|(m, t, headers)| (m == method && fits(t, path)).then_some(headers))
    }
}

/// Whether `path` is one of `template`'s.
fn fits(template: &Template, path: &str) -> bool {
    let segments: Vec<&str> = path.trim_end_matches('/').split('/').collect();
    template.len() == segments.len()
        && template
            .iter()
            .zip(&segments)
            .all(|(want, got)| match want {
                Some(want) => want == got,
                None => !got.is_empty(),
            })
}

impl<E: Endpoint> Middleware<E> for DeprecationHeaders {
    type Output = DeprecationHeadersEndpoint<E>;

    fn transform(&self, inner: E) -> Self::Output {
        DeprecationHeadersEndpoint {
            inner,
            deprecations: self.clone(),
        }
    }
}

/// The endpoint [`DeprecationHeaders`] wraps.
pub struct DeprecationHeadersEndpoint<E> {
    inner: E,
    deprecations: DeprecationHeaders,
}

impl<E: Endpoint> Endpoint for DeprecationHeadersEndpoint<E> {
    type Output = Response;

    async fn call(&self, req: Request) -> poem::Result<Response> {
        if self.deprecations.routes.is_empty() {
            return self.inner.call(req).await.map(IntoResponse::into_response);
        }
        let headers = self
            .deprecations
            .of(req.method(), req.uri().path())
            .cloned();
        let mut response = self.inner.call(req).await?.into_response();
        for (name, value) in headers.into_iter().flatten() {
            response.headers_mut().insert(name, value);
        }
        Ok(response)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OLD: Deprecation = Deprecation {
        method: "POST",
        path: "/partners/external/cases/{reference}",
        deprecated_at: "2027-01-04T00:00:00Z",
        sunset_at: "2027-07-05T09:30:00Z",
        successor: "/partners/external/v2/cases/{reference}",
    };

    #[tokio::test]
    async fn a_deprecated_operation_answers_with_its_deprecation_sunset_and_successor() {
        use poem::{EndpointExt, Route, handler, post};
        #[handler]
        fn ok() -> &'static str {
            "ok"
        }
        let app = Route::new()
            .at("/partners/external/cases/:reference", post(ok).get(ok))
            .with(DeprecationHeaders::new(&[OLD]).expect("valid times"));
        let call = |method: Method, path: &str| {
            let req = Request::builder().method(method).uri_str(path).finish();
            app.call(req)
        };
        let old = call(Method::POST, "/partners/external/cases/123")
            .await
            .expect("answered");
        let header = |name: &str| {
            old.headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        assert_eq!(header("deprecation").as_deref(), Some("@1799020800"));
        assert_eq!(
            header("sunset").as_deref(),
            Some("Mon, 05 Jul 2027 09:30:00 GMT")
        );
        assert_eq!(
            header("link").as_deref(),
            Some("</partners/external/v2/cases/{reference}>; rel=\"successor-version\"")
        );
        // Another method of the same path is not deprecated.
        let other = call(Method::GET, "/partners/external/cases/123")
            .await
            .expect("answered");
        assert!(other.headers().get("deprecation").is_none());
    }

    #[test]
    fn a_deprecation_is_marked_in_the_document_and_bad_times_are_refused() {
        let mut doc = json!({"paths": {"/partners/external/cases/{reference}": {
            "post": {"description": "Reads a case."},
        }}});
        mark_deprecated(&mut doc, &[OLD]);
        let op = &doc["paths"]["/partners/external/cases/{reference}"]["post"];
        assert_eq!(op["deprecated"], true);
        assert!(
            op["description"]
                .as_str()
                .is_some_and(|d| d.starts_with("Reads a case.") && d.contains("2027-07-05")),
            "{op}"
        );
        let bad = Deprecation {
            sunset_at: "next summer",
            ..OLD
        };
        assert!(DeprecationHeaders::new(&[bad]).is_err());
        let bad = Deprecation {
            method: "RE TIRE",
            ..OLD
        };
        assert!(DeprecationHeaders::new(&[bad]).is_err());
    }

    #[test]
    fn a_described_reference_loses_its_all_of_and_keeps_its_description() {
        let mut doc = json!({"properties": {
            "stage": {"description": "D", "allOf": [{"$ref": "#/S"}, {"description": "D"}]},
            "both": {"allOf": [{"$ref": "#/A"}, {"$ref": "#/B"}]},
        }});
        tidy(&mut doc);
        assert_eq!(
            doc,
            json!({"properties": {
                "stage": {"description": "D", "$ref": "#/S"},
                "both": {"allOf": [{"$ref": "#/A"}, {"$ref": "#/B"}]},
            }})
        );
    }

    #[test]
    fn allow_lists_the_methods_of_the_matching_template() {
        let doc = json!({"paths": {
            "/cases/{reference}": {"get": {}},
            "/intake": {"post": {}},
        }});
        let allow = AllowHeader::new(&doc, &["/healthz"]);
        let got = |path| allow.allow(path).and_then(|v| v.to_str().ok());
        assert_eq!(got("/cases/123"), Some("GET, HEAD"));
        assert_eq!(got("/intake"), Some("POST"));
        assert_eq!(got("/healthz"), Some("GET, HEAD"));
        assert_eq!(got("/cases/"), None);
        assert_eq!(got("/cases/1/2"), None);
        assert_eq!(got("/other"), None);
    }
}
