//! The wire types against the committed OpenAPI documents and the service's own examples:
//! a property or enum value added, renamed or dropped there fails here.

use std::collections::BTreeSet;

use partner_client::wire::{SecretRotation, WebhookTestRequest, WebhookTestResult};
use partner_client::{
    Address, AttachRequest, CaseState, CaseStatusBody, DeliveryStatus, EndpointStatus, Enquiry,
    EventType, NewWebhookEndpoint, OAuthErrorBody, Purchase, PurchaseType, Purpose, RecoverResult,
    Remortgage, RemortgageReason, WebhookAttempt, WebhookDelivery, WebhookDeliveryDetail,
    WebhookDeliveryList, WebhookEndpoint, WebhookEndpointChange, WebhookEndpointWithSecret,
};
use serde::Serialize;
use serde_json::{Value, json};

use crate::helpers::{fresh_email, product, purchase};

fn document(name: &str) -> Value {
    let path = format!("{}/../openapi/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).expect("the committed document");
    serde_yaml::from_str(&text).expect("YAML")
}

/// Every property a schema names, through `$ref`, `allOf`, `oneOf` and `anyOf`.
fn properties(doc: &Value, schema: &Value, out: &mut BTreeSet<String>, depth: usize) {
    assert!(depth < 16, "schema nesting too deep");
    if let Some(name) = schema["$ref"].as_str().and_then(|r| r.rsplit('/').next()) {
        return properties(doc, &doc["components"]["schemas"][name], out, depth + 1);
    }
    if let Some(props) = schema["properties"].as_object() {
        out.extend(props.keys().cloned());
    }
    for combinator in ["allOf", "oneOf", "anyOf"] {
        for part in schema[combinator].as_array().into_iter().flatten() {
            properties(doc, part, out, depth + 1);
        }
    }
}

fn schema_properties(doc: &Value, name: &str) -> BTreeSet<String> {
    let schema = &doc["components"]["schemas"][name];
    assert!(!schema.is_null(), "no schema {name}");
    let mut out = BTreeSet::new();
    properties(doc, schema, &mut out, 0);
    out
}

/// The keys `values` serialise with, all together.
fn keys_of<T: Serialize>(values: &[T]) -> BTreeSet<String> {
    values
        .iter()
        .flat_map(|v| {
            let json = serde_json::to_value(v).expect("serialises");
            json.as_object()
                .expect("an object")
                .keys()
                .cloned()
                .collect::<Vec<_>>()
        })
        .collect()
}

/// A purchase and a remortgage with every optional field set.
fn every_field() -> [Enquiry; 2] {
    let mut buy = purchase("brand_a", &fresh_email());
    buy.product_uuid = Some(product());
    let mut remortgage = buy.clone();
    remortgage.purpose = Purpose::Remortgage(Remortgage {
        remortgage_reason: RemortgageReason::BorrowMoreMoney,
        current_property_value: 300_000.0,
        outstanding_mortgage_amount: 100_000.0,
        additional_borrowing_amount: Some(20_000.0),
        release_borrowing_amount: Some(1.0),
    });
    [buy, remortgage]
}

fn full_address() -> Address {
    let mut a = every_field()[0].addresses.clone().expect("addresses")[0].clone();
    a.line_2 = Some("Flat 2".into());
    a.line_3 = Some("Old Mill".into());
    a.county = Some("West Yorkshire".into());
    a.date_moved_out = Some("2020-01-01".parse().expect("a date"));
    a
}

/// The request bodies and the case read back each name every property the document gives
/// them. The auth-server's other error bodies have the keys of the one the client reads them
/// as.
#[test]
fn the_wire_types_name_every_property_of_the_documents() {
    let intake = document("intake-api.yaml");
    let cases = [
        ("EnquiryRequest", keys_of(&every_field())),
        ("AddressRequest", keys_of(&[full_address()])),
        (
            "AttachRequest",
            keys_of(&[AttachRequest {
                email: fresh_email(),
                product_uuid: product(),
            }]),
        ),
    ];
    let now = partner_client::chrono::Utc::now();
    let case = CaseStatusBody {
        reference: "418290357116".into(),
        brand: "brand_a".into(),
        status: CaseState::Active,
        created_at: now,
        updated_at: now,
        activates_at: Some(now),
        activated_at: Some(now),
        product_uuid: Some(product()),
    };
    let endpoint = WebhookEndpoint {
        id: "ep_0192f3c4d5e67a8b9c0d1e2f3a4b5c6d".into(),
        url: "https://partner.example/hooks".into(),
        event_types: Some(vec![EventType::CaseCreated]),
        status: EndpointStatus::Disabled,
        disabled_reason: Some("disabled by the partner".into()),
        disabled_at: Some(now),
        failing_since: Some(now),
        previous_secret_expires_at: Some(now),
        rate_limit: Some(5),
        created_at: now,
        updated_at: now,
    };
    let with_secret = WebhookEndpointWithSecret {
        endpoint: endpoint.clone(),
        secret: "whsec_c2VjcmV0".into(),
    };
    let new = NewWebhookEndpoint {
        url: endpoint.url.clone(),
        event_types: Some(vec![EventType::CaseCreated]),
        rate_limit: Some(5),
    };
    let change = WebhookEndpointChange {
        url: Some(endpoint.url.clone()),
        event_types: Some(vec![EventType::CaseCreated]),
        enabled: Some(true),
        rate_limit: Some(5),
    };
    let rotation = SecretRotation {
        grace_period_secs: Some(60),
    };
    let delivery = WebhookDelivery {
        id: "msg_0192f3c4d5e67a8b9c0d1e2f3a4b5c6d".into(),
        endpoint_id: "ep_0192f3c4d5e67a8b9c0d1e2f3a4b5c6d".into(),
        event_type: EventType::CaseCreated,
        reference: "418290357116".into(),
        created_at: now,
        status: DeliveryStatus::Failing,
        attempt_count: 2,
        next_attempt_at: Some(now),
        delivered_at: Some(now),
        last_status: Some(503),
        last_error: Some("the endpoint answered 503".into()),
    };
    let attempt = WebhookAttempt {
        attempt: 1,
        attempted_at: now,
        status: Some(503),
        error: Some("the endpoint answered 503".into()),
        duration_ms: 12,
        next_attempt_at: Some(now),
    };
    let detail = WebhookDeliveryDetail {
        delivery: delivery.clone(),
        attempts: vec![attempt.clone()],
    };
    let list = WebhookDeliveryList {
        data: vec![delivery.clone()],
        next_cursor: Some("c".into()),
    };
    let recovered = RecoverResult {
        queued: 1,
        more: false,
    };
    let test = WebhookTestRequest {
        event_type: Some(EventType::CaseActivated),
    };
    let tested = WebhookTestResult {
        id: "msg_0192f3c4d5e67a8b9c0d1e2f3a4b5c6d".into(),
        delivered: false,
        status: Some(503),
        error: Some("the endpoint answered 503".into()),
        duration_ms: 12,
    };
    let cases = cases.into_iter().chain([
        ("WebhookTestRequest", keys_of(&[test])),
        ("WebhookTestResult", keys_of(&[tested])),
        ("WebhookDelivery", keys_of(&[delivery])),
        ("WebhookAttempt", keys_of(&[attempt])),
        ("WebhookDeliveryDetail", keys_of(&[detail])),
        ("WebhookDeliveryList", keys_of(&[list])),
        ("RecoverResult", keys_of(&[recovered])),
    ]);
    let cases = cases.into_iter().chain([
        ("CaseStatusBody", keys_of(&[case])),
        ("WebhookEndpoint", keys_of(&[endpoint])),
        ("WebhookEndpointWithSecret", keys_of(&[with_secret])),
        ("NewWebhookEndpoint", keys_of(&[new])),
        ("WebhookEndpointChange", keys_of(&[change])),
        ("SecretRotation", keys_of(&[rotation])),
    ]);
    for (schema, ours) in cases {
        assert_eq!(schema_properties(&intake, schema), ours, "{schema}");
    }
    let auth = document("auth-server.yaml");
    let oauth = keys_of(&[OAuthErrorBody {
        error: "invalid_client".into(),
        error_description: "d".into(),
        hint: Some("h".into()),
        message: "d".into(),
    }]);
    for schema in ["BadRequestBody", "InvalidClientBody", "TooManyRequestsBody"] {
        assert_eq!(schema_properties(&auth, schema), oauth, "{schema}");
    }
}

/// The purposes are the tag of the client's `Purpose`, not an enum of their own.
#[test]
fn the_purposes_are_the_documents_mortgage_purposes() {
    let doc = document("intake-api.yaml");
    let purposes: Vec<Value> = every_field()
        .iter()
        .map(|e| serde_json::to_value(e).expect("writes")["mortgage_purpose"].clone())
        .collect();
    let listed = doc["components"]["schemas"]["MortgagePurpose"]["enum"].clone();
    assert_eq!(Value::from(purposes), listed);
}

/// Numbers as `f64`, since `250000` and `250000.0` are the same amount on the wire.
fn numbers_as_floats(v: Value) -> Value {
    match v {
        Value::Number(n) => json!(n.as_f64().expect("a number")),
        Value::Array(a) => a.into_iter().map(numbers_as_floats).collect(),
        Value::Object(o) => o
            .into_iter()
            .map(|(k, v)| (k, numbers_as_floats(v)))
            .collect(),
        other => other,
    }
}

#[test]
fn the_services_example_enquiries_read_into_the_wire_types_and_write_back_the_same() {
    use intake_api::examples::{purchase_enquiry, remortgage_enquiry};
    for example in [
        purchase_enquiry("brand_a", "jane@example.com"),
        remortgage_enquiry("brand_b", "john@example.com"),
    ] {
        let read: Enquiry = serde_json::from_value(example.clone()).expect("reads");
        let written = serde_json::to_value(&read).expect("writes");
        assert_eq!(numbers_as_floats(written), numbers_as_floats(example));
    }
    let p = Purchase {
        purchase_type: PurchaseType::HomeMover,
        mortgage_scheme: None,
        new_property_value: 1.0,
        deposit_amount: 1.0,
    };
    let written = serde_json::to_value(Purpose::Purchase(p)).expect("writes");
    assert!(
        written.get("mortgage_scheme").is_none(),
        "an absent field was written as null"
    );
}
