//! Tests that walk a service's served OpenAPI document, so that what is checked of every
//! operation (its metric label, the scope it names) follows the routes as they are served
//! rather than a list kept beside them.

use serde_json::{Value, json};

/// A value for every path parameter: shaped like the intake-api's ids, so it reaches the
/// handler, and distinctive, so a test can see it never became a label.
pub const AN_ID: &str = "ep_5eed5eed5eed5eed5eed5eed5eed5eed";

/// One operation of a served document.
pub struct Operation {
    /// Its method.
    pub method: reqwest::Method,
    /// Its path as documented, parameters in braces.
    pub template: String,
    /// Its path with every parameter given [`AN_ID`].
    pub path: String,
    /// Its object in the document.
    pub spec: Value,
}

/// A service's document as served at `{base}/openapi.json`, and its operations.
pub struct Served {
    /// The whole document.
    pub doc: Value,
    /// Every operation of every path.
    pub operations: Vec<Operation>,
}

impl Served {
    /// Fetches and reads the document.
    pub async fn fetch(http: &reqwest::Client, base: &str) -> Self {
        let doc: Value = http
            .get(format!("{base}/openapi.json"))
            .send()
            .await
            .expect("openapi.json")
            .json()
            .await
            .expect("a JSON document");
        let mut operations = Vec::new();
        for (template, item) in doc["paths"].as_object().expect("paths") {
            let path = template
                .split('/')
                .map(|s| if s.starts_with('{') { AN_ID } else { s })
                .collect::<Vec<_>>()
                .join("/");
            for (method, spec) in item.as_object().expect("a path item") {
                operations.push(Operation {
                    method: reqwest::Method::from_bytes(method.to_ascii_uppercase().as_bytes())
                        .expect("a method"),
                    template: template.clone(),
                    path: path.clone(),
                    spec: spec.clone(),
                });
            }
        }
        Self { doc, operations }
    }

    /// The documented paths.
    pub fn templates(&self) -> impl Iterator<Item = &str> {
        self.doc["paths"]
            .as_object()
            .expect("paths")
            .keys()
            .map(String::as_str)
    }

    /// Sends every operation once (with `authorization` when given, and an empty JSON
    /// object as its body) and a GET to every operational path, however each is answered.
    pub async fn request_every_route(
        &self,
        http: &reqwest::Client,
        base: &str,
        authorization: Option<&str>,
    ) {
        for operation in &self.operations {
            let mut request = http
                .request(
                    operation.method.clone(),
                    format!("{base}{}", operation.path),
                )
                .json(&json!({}));
            if let Some(authorization) = authorization {
                request = request.header("authorization", authorization);
            }
            request.send().await.expect("answered");
        }
        for path in service_kit::http::OPERATIONAL_PATHS {
            http.get(format!("{base}{path}"))
                .send()
                .await
                .expect("answered");
        }
    }

    /// Asserts that a scrape counts every documented and operational path of `service` under
    /// a route label of its own, and that no path parameter became a label.
    pub fn assert_every_route_labelled(&self, scrape: &str, service: &str) {
        let labelled: Vec<&str> = scrape
            .lines()
            .filter(|l| l.starts_with("http_requests_total{"))
            .filter(|l| l.contains(&format!(r#"service="{service}""#)))
            .filter_map(|l| l.split(r#"route=""#).nth(1)?.split('"').next())
            .collect();
        let routes = self
            .templates()
            .chain(service_kit::http::OPERATIONAL_PATHS.iter().copied());
        for route in routes {
            assert!(
                labelled.contains(&route),
                "{route} has no label of its own: {labelled:?}"
            );
        }
        assert!(!scrape.contains(AN_ID), "an id became a label");
    }

    /// Asserts that `operation`, refused with `refusal` for a token lacking its scope, names
    /// in the document the scope its challenge asked for, under `scheme`, and that the
    /// scheme offers that scope. Returns the scheme's client-credentials flow.
    pub fn assert_names_enforced_scope(
        &self,
        operation: &Operation,
        refusal: &reqwest::Response,
        scheme: &str,
    ) -> &Value {
        let (method, template) = (&operation.method, &operation.template);
        assert_eq!(refusal.status(), 403, "{method} {template}");
        let challenge = refusal
            .headers()
            .get("www-authenticate")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        let enforced = challenge
            .split("scope=\"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .unwrap_or_else(|| panic!("{method} {template}: no scope in {challenge:?}"));
        assert_eq!(
            operation.spec["security"],
            json!([{ scheme: [enforced] }]),
            "{method} {template} enforces {enforced}"
        );
        let flow = &self.doc["components"]["securitySchemes"][scheme]["flows"]["clientCredentials"];
        assert!(
            flow["scopes"].get(enforced).is_some(),
            "{enforced} is not offered by {scheme}"
        );
        flow
    }
}
