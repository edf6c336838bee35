//! The intake-api's OpenAPI document made as exact as the validation: what the derived
//! document cannot say (the configured brands, the conditional requirements, the date
//! formats, each operation's own statuses, named examples) is written into it here, once, at
//! start-up.
//!
//! The enquiry is documented as one of two objects, chosen by `mortgage_purpose`, each
//! listing the fields its purpose requires, with the remaining conditions (credit issues
//! when there are any, the scheme of a first-time buyer, the amount to borrow or release) as
//! `anyOf` alternatives: an enquiry the schema accepts is one the service accepts.

use serde_json::{Map, Value, json};
use service_kit::openapi::{
    keep_responses, operation_mut, parameter_schema, property_mut, request_examples,
    response_example, schema_mut,
};
use shared::intake::webhook_deliveries::DeliveryStatus;
use shared::intake::webhooks::{EventType, EventTypeList};

use super::idempotency::{self, MAX_KEY_CHARS};
use super::intake::MAX_REFERENCE_CHARS;
use super::partner::SECURITY_SCHEME;
use crate::domain::{
    DEFAULT_HISTORY_PAGE, MAX_EMAIL, MAX_HISTORY_PAGE, MAX_ITEMS, MAX_MOBILE_CHARS, MAX_URL_CHARS,
    MOBILE_PATTERN, OLDEST_BIRTH_YEAR, PURCHASE_FIELDS, REMORTGAGE_FIELDS,
};

/// A calendar date as `YYYY-MM-DD`, with months and days in range (the format rules out
/// the rest, such as 31 April).
const DATE_PATTERN: &str = r"^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])$";

/// A date of birth: [`DATE_PATTERN`] with years from [`OLDEST_BIRTH_YEAR`] (1900) to 2025, so
/// every date it admits is before today whenever the document is read.
const BIRTH_DATE_PATTERN: &str =
    r"^(19\d\d|20[01]\d|202[0-5])-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])$";

/// Refines the derived document for a deployment with `brands` and its token endpoint at
/// `token_url`.
pub fn refine(doc: &mut Value, brands: &[&str], token_url: &str) {
    service_kit::openapi::set_token_url(doc, SECURITY_SCHEME, token_url);
    if let Some(schemas) = doc
        .pointer_mut("/components/schemas")
        .and_then(Value::as_object_mut)
    {
        schemas.insert(
            "Brand".into(),
            json!({
                "type": "string",
                "title": "Brand",
                "description": "The brand the enquiry is for: one of this deployment's brand identifiers.",
                "enum": brands,
            }),
        );
    }
    refine_contacts(doc);
    refine_address(doc);
    refine_referral(doc);
    refine_enquiry(doc);
    refine_operations(doc, brands.first().copied().unwrap_or("brand_a"));
    refine_text(doc);
}

/// Describes the security scheme as a FAPI 2.0 deployment takes it: DPoP-bound tokens
/// only, proofs signed with the profile's algorithms, and, with `nonces`, the server nonce
/// each proof must carry. OpenAPI has no DPoP scheme, so the OAuth 2.0 scheme says it in
/// words and in an `x-dpop` extension tools can read.
pub fn refine_profile(doc: &mut Value, profile: shared::profile::Profile, nonces: bool) {
    let Some(scheme) = doc
        .pointer_mut(&format!("/components/securitySchemes/{SECURITY_SCHEME}"))
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    if profile.allows_secrets_and_bearer() && !nonces {
        return;
    }
    let algorithms = profile.algorithms().join(", ");
    let mut text = if profile.is_fapi2() {
        format!(
            "OAuth 2.0 client credentials under the FAPI 2.0 Security Profile: the client \
             authenticates with private_key_jwt (a client assertion signed {algorithms}), every \
             token is DPoP-bound (RFC 9449) and is sent as `Authorization: DPoP <token>` with a \
             new `DPoP` proof header for every request, signed {algorithms}. `Bearer` is refused."
        )
    } else {
        scheme
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    if nonces {
        text.push_str(
            " Every answer carries a `DPoP-Nonce` header: each proof carries the latest one in \
             its `nonce` claim; one without it is refused with 401 and `WWW-Authenticate: DPoP \
             error=\"use_dpop_nonce\"`, and the answer's nonce is the one to send again with.",
        );
    }
    scheme.insert("description".into(), json!(text));
    scheme.insert(
        "x-dpop".into(),
        json!({
            "required": profile.is_fapi2(),
            "signingAlgorithms": profile.algorithms(),
            "nonce": nonces,
        }),
    );
}

/// No control character (C0, DEL, C1): what every text field of a request refuses.
const NO_CONTROLS: &str = r"^[^\u0000-\u001f\u007f-\u009f]*$";
/// The same for free text, which may also hold tabs and line breaks.
const NO_CONTROLS_BUT_LINES: &str = r"^[^\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f]*$";
/// Something that is not a space, and no control character: a required text field.
const NOT_BLANK_NO_CONTROLS: &str = r"^[^\u0000-\u001f\u007f-\u009f]*[^\s\u0000-\u001f\u007f-\u009f][^\u0000-\u001f\u007f-\u009f]*$";

/// Says in the document what the parser refuses in every text field of a request (control
/// characters, `domain::parse::fields::string`), so partners' validators refuse it too.
fn refine_text(doc: &mut Value) {
    let Some(schemas) = doc
        .pointer_mut("/components/schemas")
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    for (name, schema) in schemas.iter_mut() {
        if !(name.ends_with("Request") || name.ends_with("Enquiry")) {
            continue;
        }
        let Some(properties) = schema.get_mut("properties").and_then(Value::as_object_mut) else {
            continue;
        };
        for (field, property) in properties.iter_mut() {
            let Some(property) = property.as_object_mut() else {
                continue;
            };
            let text = property.get("type") == Some(&json!("string"))
                && !property.contains_key("format")
                && !property.contains_key("enum");
            if !text {
                continue;
            }
            let pattern = match property.get("pattern").and_then(Value::as_str) {
                None if field == "note" => NO_CONTROLS_BUT_LINES,
                None => NO_CONTROLS,
                Some(r"\S") => NOT_BLANK_NO_CONTROLS,
                // A pattern of its own (the mobile number's) admits no control character.
                Some(_) => continue,
            };
            property.insert("pattern".into(), json!(pattern));
        }
    }
}

fn refine_address(doc: &mut Value) {
    let Some(address) = schema_mut(doc, "AddressRequest") else {
        return;
    };
    for field in ["date_moved_in", "date_moved_out"] {
        if let Some(date) = property_mut(address, field) {
            date.insert("format".into(), json!("date"));
            date.insert("pattern".into(), json!(DATE_PATTERN));
        }
    }
    for field in ["line_1", "postcode"] {
        if let Some(text) = property_mut(address, field) {
            // Blank counts as not sent: a required line needs something that is not a space.
            text.insert("pattern".into(), json!(r"\S"));
        }
    }
    nullable_optionals(address);
}

/// Optional fields may be sent as `null` (partners' forms do, for fields left empty): it
/// counts as not sent.
fn nullable_optionals(schema: &mut Map<String, Value>) {
    let required: Vec<String> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| {
            r.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    if let Some(Value::Object(properties)) = schema.get_mut("properties") {
        for (name, property) in properties.iter_mut() {
            if !required.contains(name)
                && let Some(property) = property.as_object_mut()
            {
                property.insert("nullable".into(), json!(true));
            }
        }
    }
}

/// A request's `brand` as the deployment's brands, keeping its description.
fn brand_ref(schema: &mut Map<String, Value>) {
    if let Some(brand) = property_mut(schema, "brand") {
        let description = brand.remove("description").unwrap_or_default();
        *brand = Map::from_iter([
            ("$ref".into(), json!("#/components/schemas/Brand")),
            ("description".into(), description),
        ]);
    }
}

/// Every request's contact fields as the domain reads them: an e-mail address's format and
/// length, a mobile number's pattern and length.
fn refine_contacts(doc: &mut Value) {
    for name in ["EnquiryRequest", "ReferralRequest", "AttachRequest"] {
        let Some(schema) = schema_mut(doc, name) else {
            continue;
        };
        if let Some(email) = property_mut(schema, "email") {
            email.insert("format".into(), json!("email"));
            email.insert("maxLength".into(), json!(MAX_EMAIL));
        }
        if let Some(mobile) = property_mut(schema, "mobile_number") {
            mobile.insert("pattern".into(), json!(MOBILE_PATTERN));
            mobile.insert("maxLength".into(), json!(MAX_MOBILE_CHARS));
        }
    }
}

fn refine_referral(doc: &mut Value) {
    let Some(referral) = schema_mut(doc, "ReferralRequest") else {
        return;
    };
    brand_ref(referral);
    if let Some(consent) = property_mut(referral, "contact_consent") {
        consent.insert("enum".into(), json!([true]));
    }
    for field in ["first_name", "last_name"] {
        if let Some(text) = property_mut(referral, field) {
            text.insert("pattern".into(), json!(r"\S"));
        }
    }
    nullable_optionals(referral);
}

fn refine_enquiry(doc: &mut Value) {
    let Some(schemas) = doc
        .pointer_mut("/components/schemas")
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    let Some(Value::Object(mut base)) = schemas.remove("EnquiryRequest") else {
        return;
    };
    brand_ref(&mut base);
    if let Some(terms) = property_mut(&mut base, "terms_agreement") {
        terms.insert("enum".into(), json!([true]));
    }
    if let Some(born) = property_mut(&mut base, "date_of_birth") {
        born.insert("format".into(), json!("date"));
        born.insert("pattern".into(), json!(BIRTH_DATE_PATTERN));
        born.insert(
            "description".into(),
            json!(format!(
                "Applicant date of birth, `YYYY-MM-DD`: from {OLDEST_BIRTH_YEAR}-01-01, and before today (the pattern admits years up to 2025)."
            )),
        );
    }
    for field in ["first_name", "last_name"] {
        if let Some(text) = property_mut(&mut base, field) {
            text.insert("pattern".into(), json!(r"\S"));
        }
    }
    if let Some(issues) = property_mut(&mut base, "credit_issues") {
        // At least one only when there are credit issues (the `anyOf` below).
        issues.remove("minItems");
    }
    base.insert(
        "description".into(),
        json!("The enquiry a partner submits (spec 2.2); `mortgage_purpose` decides which of the purpose's fields are required. A field of the other purpose is ignored."),
    );
    // A condition's field is nullable on its own (null counts as not sent), so each
    // requirement below also says the field is not null.
    let credit = json!({"anyOf": [
        {"properties": {"has_credit_issues": {"enum": [false]}}},
        {"required": ["credit_issues"], "properties": {"credit_issues": {"type": "array", "minItems": 1}}},
    ]});
    let purchase = variant(
        &base,
        "PurchaseEnquiry",
        "purchase",
        "An enquiry for a purchase.",
        &REMORTGAGE_FIELDS,
        &["purchase_type", "new_property_value", "deposit_amount"],
        vec![
            credit.clone(),
            json!({"anyOf": [
                {"properties": {"purchase_type": {"enum": ["home_mover", "additional_property"]}}},
                {"required": ["mortgage_scheme"], "properties": {"mortgage_scheme": {"type": "string"}}},
            ]}),
        ],
    );
    let remortgage = variant(
        &base,
        "RemortgageEnquiry",
        "remortgage",
        "An enquiry for a remortgage.",
        &PURCHASE_FIELDS,
        &[
            "remortgage_reason",
            "current_property_value",
            "outstanding_mortgage_amount",
        ],
        vec![
            credit,
            json!({"anyOf": [
                {"properties": {"remortgage_reason": {"enum": ["get_better_rate", "current_deal_ending", "other"]}}},
                {"properties": {"remortgage_reason": {"enum": ["borrow_more_money"]}, "additional_borrowing_amount": {"type": "number"}}, "required": ["additional_borrowing_amount"]},
                {"properties": {"remortgage_reason": {"enum": ["release_money"]}, "release_borrowing_amount": {"type": "number"}}, "required": ["release_borrowing_amount"]},
            ]}),
        ],
    );
    schemas.insert("PurchaseEnquiry".into(), purchase);
    schemas.insert("RemortgageEnquiry".into(), remortgage);
    schemas.insert(
        "EnquiryRequest".into(),
        json!({
            "title": "EnquiryRequest",
            "description": "The enquiry a partner submits (spec 2.2): a purchase or a remortgage, told apart by `mortgage_purpose`.",
            "oneOf": [
                {"$ref": "#/components/schemas/PurchaseEnquiry"},
                {"$ref": "#/components/schemas/RemortgageEnquiry"},
            ],
            "discriminator": {
                "propertyName": "mortgage_purpose",
                "mapping": {
                    "purchase": "#/components/schemas/PurchaseEnquiry",
                    "remortgage": "#/components/schemas/RemortgageEnquiry",
                },
            },
        }),
    );
}

/// The enquiry for one purpose: `base` without the other purpose's fields, with the
/// purpose's own required and its remaining conditions.
fn variant(
    base: &Map<String, Value>,
    title: &str,
    purpose: &str,
    description: &str,
    other_fields: &[&str],
    required: &[&str],
    conditions: Vec<Value>,
) -> Value {
    let mut schema = base.clone();
    schema.insert("title".into(), json!(title));
    schema.insert("description".into(), json!(description));
    if let Some(Value::Object(properties)) = schema.get_mut("properties") {
        for field in other_fields {
            properties.remove(*field);
        }
        properties.insert(
            "mortgage_purpose".into(),
            json!({"type": "string", "enum": [purpose], "description": "What the mortgage is for."}),
        );
    }
    if let Some(Value::Array(list)) = schema.get_mut("required") {
        list.extend(required.iter().map(|r| json!(r)));
    }
    nullable_optionals(&mut schema);
    schema.insert("allOf".into(), Value::Array(conditions));
    Value::Object(schema)
}

fn refine_operations(doc: &mut Value, brand: &str) {
    let keyed = |op: &mut Map<String, Value>| {
        let key = json!({"type": "string", "minLength": 1, "maxLength": MAX_KEY_CHARS});
        parameter_schema(op, idempotency::HEADER, key);
    };
    if let Some(submit) = operation_mut(doc, "/partners/external/intake", "post") {
        keyed(submit);
        keep_responses(
            submit,
            &[
                "200", "201", "400", "401", "403", "409", "413", "422", "429", "500", "503",
            ],
        );
        request_examples(submit, &enquiry_examples(brand));
        // The shared body type's example says "Case created"; an update says otherwise.
        let updated = json!({"message": "Case updated", "reference": "418290357116"});
        response_example(submit, "200", &updated);
    }
    if let Some(attach) = operation_mut(doc, "/partners/external/intake/attach", "post") {
        keyed(attach);
        keep_responses(
            attach,
            &[
                "200", "400", "401", "403", "404", "409", "413", "422", "429", "500", "503",
            ],
        );
        request_examples(
            attach,
            &[(
                "attach",
                "A product for the purchase example's applicant",
                json!({
                    "email": "jane.doe@example.com",
                    "product_uuid": "3f1c2a9e-5b7d-4e21-9c3a-8d4f6b2e1a07",
                }),
            )],
        );
    }
    if let Some(refer) = operation_mut(doc, "/partners/external/referrals", "post") {
        keyed(refer);
        keep_responses(
            refer,
            &[
                "200", "201", "400", "401", "403", "409", "413", "422", "429", "500", "503",
            ],
        );
        request_examples(
            refer,
            &[(
                "referral",
                "A customer referred before their enquiry",
                json!({
                    "brand": brand,
                    "first_name": "Jane",
                    "last_name": "Doe",
                    "email": "jane.doe@example.com",
                    "mobile_number": "+44 7700 900123",
                    "contact_consent": true,
                    "partner_reference": "CRM-20931",
                    "note": "Prefers a call after 6pm.",
                }),
            )],
        );
        // The shared body type's example says "Referral created"; an addition says otherwise.
        let added = json!({
            "message": "Referral added",
            "reference": "418290357116",
            "redirect": "https://portal.brand-a.example/continue?token=q0Vn3qN0m2wq6mCV6a5o0Ze4Jm0P1u4F6Yt1lW9fQkM",
        });
        response_example(refer, "200", &added);
    }
    if let Some(status) = operation_mut(doc, "/partners/external/cases/{reference}", "get") {
        keep_responses(status, &["200", "401", "403", "404", "429", "500", "503"]);
        let reference = json!({"type": "string", "minLength": 1, "maxLength": MAX_REFERENCE_CHARS});
        parameter_schema(status, "reference", reference);
    }
    if let Some(types) = operation_mut(doc, "/partners/external/webhooks/event-types", "get") {
        keep_responses(types, &["200", "401", "403", "429", "500", "503"]);
        let catalogue =
            serde_json::to_value(EventTypeList::catalogue()).expect("the catalogue is JSON");
        response_example(types, "200", &catalogue);
    }
    refine_webhook_endpoints(doc);
    refine_webhook_deliveries(doc);
    if let Some(redeem) = operation_mut(doc, "/portal/redirect-tokens/redeem", "post") {
        keep_responses(
            redeem,
            &[
                "200", "400", "401", "403", "410", "413", "422", "429", "500", "503",
            ],
        );
    }
}

/// Named request examples: name, summary, body.
type Examples = Vec<(&'static str, &'static str, Value)>;

/// The webhook endpoint operations' own statuses, id format, examples and the answers'
/// texts that differ from the case operations' ones.
fn refine_webhook_endpoints(doc: &mut Value) {
    const ENDPOINTS: &str = "/partners/external/webhooks/endpoints";
    let one = format!("{ENDPOINTS}/{{endpoint_id}}");
    let rotate = format!("{one}/rotate-secret");
    let id = json!({"type": "string", "pattern": "^ep_[0-9a-fA-F]{32}$"});
    let not_found = json!({"message": "Webhook endpoint not found"});
    let limit = json!({"message": "You have 10 webhook endpoints, the most a partner may have: remove one first."});
    for name in ["NewWebhookEndpoint", "WebhookEndpointChange"] {
        let Some(schema) = schema_mut(doc, name) else {
            continue;
        };
        if let Some(url) = property_mut(schema, "url") {
            url.insert("minLength".into(), json!(1));
            url.insert("maxLength".into(), json!(MAX_URL_CHARS));
            url.insert("pattern".into(), json!(NOT_BLANK_NO_CONTROLS));
        }
        if let Some(types) = property_mut(schema, "event_types") {
            types.insert("minItems".into(), json!(1));
            types.insert("maxItems".into(), json!(MAX_ITEMS));
        }
    }
    for name in [
        "NewWebhookEndpoint",
        "WebhookEndpointChange",
        "SecretRotation",
        "WebhookEndpoint",
        "WebhookEndpointWithSecret",
    ] {
        if let Some(schema) = schema_mut(doc, name) {
            nullable_optionals(schema);
            if !name.starts_with("WebhookEndpoint") || name == "WebhookEndpointChange" {
                // The service refuses a field these requests do not take.
                schema.insert("additionalProperties".into(), json!(false));
            }
        }
    }
    if let Some(create) = operation_mut(doc, ENDPOINTS, "post") {
        keep_responses(
            create,
            &[
                "201", "400", "401", "403", "409", "413", "422", "429", "500", "503",
            ],
        );
        response_example(create, "409", &limit);
        request_examples(
            create,
            &[
                (
                    "every",
                    "Every event type, those added later too",
                    json!({"url": "https://partner.example/webhooks/intake"}),
                ),
                (
                    "chosen",
                    "Only activations and attached products",
                    json!({
                        "url": "https://partner.example/webhooks/intake",
                        "event_types": ["case.activated", "product.attached"],
                    }),
                ),
            ],
        );
    }
    if let Some(list) = operation_mut(doc, ENDPOINTS, "get") {
        keep_responses(list, &["200", "401", "403", "429", "500", "503"]);
    }
    for method in ["get", "delete"] {
        if let Some(op) = operation_mut(doc, &one, method) {
            let ok = if method == "get" { "200" } else { "204" };
            keep_responses(op, &[ok, "401", "403", "404", "429", "500", "503"]);
            parameter_schema(op, "endpoint_id", id.clone());
            response_example(op, "404", &not_found);
        }
    }
    let changes: [(&str, &str, Examples); 2] = [
        (
            one.as_str(),
            "patch",
            vec![
                (
                    "disable",
                    "Stop deliveries for now",
                    json!({"enabled": false}),
                ),
                (
                    "move",
                    "A new address, every event type",
                    json!({"url": "https://partner.example/webhooks/v2", "event_types": null}),
                ),
            ],
        ),
        (
            rotate.as_str(),
            "post",
            vec![(
                "hour",
                "The previous secret signs for one more hour",
                json!({"grace_period_secs": 3600}),
            )],
        ),
    ];
    for (path, method, examples) in changes {
        if let Some(op) = operation_mut(doc, path, method) {
            keep_responses(
                op,
                &[
                    "200", "400", "401", "403", "404", "413", "422", "429", "500", "503",
                ],
            );
            parameter_schema(op, "endpoint_id", id.clone());
            response_example(op, "404", &not_found);
            request_examples(op, &examples);
        }
    }
}

/// The delivery history's operations: what their parameters take (the service reads them
/// itself, so every problem is answered in one 422), the answers each may give, and their
/// examples.
fn refine_webhook_deliveries(doc: &mut Value) {
    const ENDPOINTS: &str = "/partners/external/webhooks/endpoints";
    let one = format!("{ENDPOINTS}/{{endpoint_id}}/deliveries/{{delivery_id}}");
    let redeliver = format!("{one}/redeliver");
    let recover = format!("{ENDPOINTS}/{{endpoint_id}}/recover");
    let endpoint_id = json!({"type": "string", "pattern": "^ep_[0-9a-fA-F]{32}$"});
    let delivery_id = json!({"type": "string", "pattern": "^msg_[0-9a-fA-F]{32}$"});
    let not_found = json!({"message": "Webhook delivery not found"});
    if let Some(list) = operation_mut(doc, "/partners/external/webhooks/deliveries", "get") {
        keep_responses(list, &["200", "401", "403", "422", "429", "500", "503"]);
        let statuses: Vec<&str> = DeliveryStatus::ALL.iter().map(|s| s.name()).collect();
        let types: Vec<&str> = EventType::ALL.iter().map(|t| t.name()).collect();
        let time = json!({"type": "string", "format": "date-time"});
        for (name, schema) in [
            ("endpoint_id", endpoint_id.clone()),
            ("status", json!({"type": "string", "enum": statuses})),
            ("event_type", json!({"type": "string", "enum": types})),
            ("since", time.clone()),
            ("until", time),
            (
                "limit",
                json!({"type": "integer", "minimum": 1, "maximum": MAX_HISTORY_PAGE, "default": DEFAULT_HISTORY_PAGE}),
            ),
            (
                "cursor",
                json!({"type": "string", "pattern": "^[A-Za-z0-9_-]{43}$"}),
            ),
        ] {
            parameter_schema(list, name, schema);
        }
    }
    for (path, method, ok) in [
        (one.as_str(), "get", "200"),
        (redeliver.as_str(), "post", "202"),
    ] {
        if let Some(op) = operation_mut(doc, path, method) {
            keep_responses(op, &[ok, "401", "403", "404", "429", "500", "503"]);
            parameter_schema(op, "endpoint_id", endpoint_id.clone());
            parameter_schema(op, "delivery_id", delivery_id.clone());
            response_example(op, "404", &not_found);
        }
    }
    for name in [
        "WebhookDelivery",
        "WebhookDeliveryDetail",
        "WebhookAttempt",
        "WebhookDeliveryList",
        "WebhookTestResult",
    ] {
        if let Some(schema) = schema_mut(doc, name) {
            nullable_optionals(schema);
        }
    }
    for name in ["RecoverRequest", "WebhookTestRequest"] {
        if let Some(schema) = schema_mut(doc, name) {
            nullable_optionals(schema);
            // The service refuses a field the request does not take.
            schema.insert("additionalProperties".into(), json!(false));
        }
    }
    if let Some(event_type) =
        schema_mut(doc, "WebhookTestRequest").and_then(|s| property_mut(s, "event_type"))
    {
        // Only the types sent have an example to send.
        let sent: Vec<&str> = EventType::SENT.iter().map(|t| t.name()).collect();
        event_type.clear();
        event_type.insert("type".into(), json!("string"));
        event_type.insert("enum".into(), json!(sent));
        event_type.insert(
            "description".into(),
            json!("Which type's example to send; `case.created` when left out."),
        );
        event_type.insert("nullable".into(), json!(true));
    }
    if let Some(op) = operation_mut(doc, &format!("{ENDPOINTS}/{{endpoint_id}}/test"), "post") {
        keep_responses(
            op,
            &[
                "200", "400", "401", "403", "404", "413", "422", "429", "500", "503",
            ],
        );
        parameter_schema(op, "endpoint_id", endpoint_id.clone());
        response_example(op, "404", &json!({"message": "Webhook endpoint not found"}));
        request_examples(
            op,
            &[(
                "activated",
                "The example of a case.activated event",
                json!({"event_type": "case.activated"}),
            )],
        );
    }
    if let Some(op) = operation_mut(doc, &recover, "post") {
        keep_responses(
            op,
            &[
                "202", "400", "401", "403", "404", "413", "422", "429", "500", "503",
            ],
        );
        parameter_schema(op, "endpoint_id", endpoint_id);
        response_example(op, "404", &json!({"message": "Webhook endpoint not found"}));
        request_examples(
            op,
            &[
                (
                    "since",
                    "Every event not delivered since an outage began",
                    json!({"since": "2026-12-01T09:00:00Z"}),
                ),
                (
                    "window",
                    "The events of one morning not delivered",
                    json!({"since": "2026-12-01T06:00:00Z", "until": "2026-12-01T12:00:00Z"}),
                ),
            ],
        );
    }
}

/// The named examples of `submitEnquiry`, each one an enquiry the service accepts.
fn enquiry_examples(brand: &str) -> Vec<(&'static str, &'static str, Value)> {
    let applicant = |first: &str, last: &str, email: &str, born: &str| {
        json!({
            "brand": brand,
            "first_name": first,
            "last_name": last,
            "email": email,
            "mobile_number": "+44 7700 900123",
            "date_of_birth": born,
            "terms_agreement": true,
            "credit_check_consent": true,
        })
    };
    let with = |mut base: Value, more: Value| {
        if let (Some(base), Value::Object(more)) = (base.as_object_mut(), more) {
            base.extend(more);
        }
        base
    };
    vec![
        (
            "purchase",
            "A home mover buying their next home",
            with(
                applicant("Jane", "Doe", "jane.doe@example.com", "1986-04-12"),
                json!({
                    "stage": "offer_accepted",
                    "application_type": "multi_applicant",
                    "employment_status": "employed",
                    "total_annual_income": 84000,
                    "mortgage_purpose": "purchase",
                    "purchase_type": "home_mover",
                    "new_property_value": 425000,
                    "deposit_amount": 110000,
                    "has_credit_issues": false,
                    "product_uuid": "3f1c2a9e-5b7d-4e21-9c3a-8d4f6b2e1a07",
                }),
            ),
        ),
        (
            "first_time_buyer",
            "A first-time buyer using a shared-ownership scheme",
            with(
                applicant("Amir", "Khan", "amir.khan@example.com", "1998-09-30"),
                json!({
                    "stage": "viewing_properties",
                    "application_type": "single",
                    "employment_status": "self_employed",
                    "total_annual_income": 38500,
                    "mortgage_purpose": "purchase",
                    "purchase_type": "first_time_buyer",
                    "mortgage_scheme": "shared_ownership",
                    "new_property_value": 180000,
                    "deposit_amount": 9000,
                    "has_credit_issues": false,
                }),
            ),
        ),
        (
            "remortgage_borrow_more",
            "A remortgage to borrow more, with credit issues and addresses",
            with(
                applicant(
                    "Siobhan",
                    "O'Neill",
                    "siobhan.oneill@example.com",
                    "1979-01-22",
                ),
                json!({
                    "stage": "researching",
                    "application_type": "single",
                    "employment_status": "company_director",
                    "total_annual_income": 61000,
                    "mortgage_purpose": "remortgage",
                    "remortgage_reason": "borrow_more_money",
                    "current_property_value": 310000,
                    "outstanding_mortgage_amount": 142000,
                    "additional_borrowing_amount": 25000,
                    "has_credit_issues": true,
                    "credit_issues": ["late_payments_non_mortgage", "default"],
                    "addresses": [
                        {
                            "line_1": "14 Orchard Way",
                            "town_city": "Leeds",
                            "county": "West Yorkshire",
                            "country": "United Kingdom",
                            "postcode": "LS6 2QT",
                            "date_moved_in": "2019-06-01",
                        },
                        {
                            "line_1": "Flat 3",
                            "line_2": "27 Mill Street",
                            "town_city": "Bradford",
                            "postcode": "BD1 4AB",
                            "date_moved_in": "2012-03-15",
                            "date_moved_out": "2019-05-31",
                        },
                    ],
                }),
            ),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use poem_openapi::types::Type;
    use poem_openapi::validation::{Pattern, Validator};
    use shared::intake::{
        AddressRequest, AttachRequest, EnquiryRequest, ReferralRequest, schema_of as schema,
    };

    use super::*;
    use crate::domain::{ADDRESS_FIELDS, ENQUIRY_FIELDS, MobileNumber};

    fn documented<T: Type>() -> BTreeSet<&'static str> {
        schema::<T>()
            .properties
            .iter()
            .map(|(name, _)| *name)
            .collect()
    }

    #[test]
    fn the_document_names_the_fields_the_parser_reads_and_requires_those_always_required() {
        assert_eq!(
            documented::<EnquiryRequest>(),
            BTreeSet::from(ENQUIRY_FIELDS)
        );
        assert_eq!(
            documented::<AddressRequest>(),
            BTreeSet::from(ADDRESS_FIELDS)
        );
        // The parser's list starts with them, up to the first that depends on another.
        let always: Vec<&str> = ENQUIRY_FIELDS
            .into_iter()
            .take_while(|field| *field != "credit_issues")
            .collect();
        assert_eq!(always.len(), 13);
        assert_eq!(schema::<EnquiryRequest>().required, always);
        assert_eq!(schema::<AddressRequest>().required, ["line_1", "postcode"]);
        assert_eq!(
            schema::<AttachRequest>().required,
            ["email", "product_uuid"]
        );
    }

    #[test]
    fn every_requests_contact_fields_are_documented_as_the_parser_reads_them() {
        let mut doc = json!({"components": {"schemas": {
            "EnquiryRequest": schema::<EnquiryRequest>(),
            "ReferralRequest": schema::<ReferralRequest>(),
            "AttachRequest": schema::<AttachRequest>(),
        }}});
        refine_contacts(&mut doc);
        for name in ["EnquiryRequest", "ReferralRequest", "AttachRequest"] {
            let email = &doc["components"]["schemas"][name]["properties"]["email"];
            assert_eq!(email["format"], "email", "{name}");
            assert_eq!(email["maxLength"], MAX_EMAIL, "{name}");
        }
        for name in ["EnquiryRequest", "ReferralRequest"] {
            let mobile = &doc["components"]["schemas"][name]["properties"]["mobile_number"];
            assert_eq!(mobile["pattern"], MOBILE_PATTERN, "{name}");
            assert_eq!(mobile["maxLength"], MAX_MOBILE_CHARS, "{name}");
        }

        let pattern = Pattern::new(MOBILE_PATTERN);
        for sample in [
            "+44 (0)7700-900123",
            "1234567",
            "123456",
            "+1234567890123456",
            "44+7700900",
            "07700 900123",
        ] {
            assert_eq!(
                pattern.check(&sample.to_owned()),
                MobileNumber::parse(sample).is_ok(),
                "pattern and parser disagree on {sample:?}"
            );
        }
    }
}
