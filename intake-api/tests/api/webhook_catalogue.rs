//! The webhook event catalogue (`GET /partners/external/webhooks/event-types`): every type
//! the sender sends, each with an example the OpenAPI document's schema describes, for a
//! partner holding `webhooks:manage`, real or sandbox; refused without the scope or a token.
//! It reads no database, so it runs on one.

use serde_json::Value;
use shared::claims::scopes::WEBHOOKS_MANAGE;
use shared::intake::webhooks::{EventType, EventTypeList};
use test_support::document::Served;

use crate::helpers::{Backend, Reply, TestApp};

const EVENT_TYPES: &str = "/partners/external/webhooks/event-types";

async fn get(app: &TestApp, authorization: Option<&str>) -> Reply {
    let mut request = app.http.get(app.url(EVENT_TYPES));
    if let Some(authorization) = authorization {
        request = request.header("Authorization", authorization);
    }
    Reply::read(request.send().await.expect("the intake-api answers")).await
}

async fn bearer_of(app: &TestApp, sandbox: bool) -> String {
    let (id, secret) = if sandbox {
        app.auth.create_sandbox_client(WEBHOOKS_MANAGE).await
    } else {
        app.auth.create_client(WEBHOOKS_MANAGE).await
    };
    format!(
        "Bearer {}",
        app.auth.token(&id, &secret, WEBHOOKS_MANAGE).await
    )
}

#[tokio::test]
async fn a_webhook_manager_reads_every_event_type_with_an_example() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    for sandbox in [false, true] {
        let reply = get(&app, Some(&bearer_of(&app, sandbox).await)).await;
        assert_eq!(reply.status, 200, "{}", reply.body);
        let list: EventTypeList = serde_json::from_value(reply.body.clone()).expect("the list");
        let types: Vec<EventType> = list.data.iter().map(|e| e.event_type).collect();
        assert_eq!(types, EventType::SENT, "sandbox {sandbox}");
        for entry in &reply.body["data"].as_array().unwrap()[..] {
            assert_eq!(entry["type"], entry["example"]["type"]);
            assert!(!entry["description"].as_str().unwrap().is_empty());
        }
    }

    // The document names every type in the event's schema, for generated clients: those
    // sent, then `case.referred`, which receivers built against it may still know.
    let doc = Served::fetch(&app.http, &app.intake.base_url()).await.doc;
    let schemas = &doc["components"]["schemas"];
    let event_type = &schemas["WebhookEvent"]["properties"]["type"];
    let named = match event_type.get("$ref").and_then(Value::as_str) {
        Some(r) => &schemas[r.trim_start_matches("#/components/schemas/")],
        None => event_type,
    };
    let names: Vec<&str> = named["enum"]
        .as_array()
        .unwrap_or_else(|| panic!("an enum: {named}"))
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let expected: Vec<&str> = EventType::ALL.iter().map(|t| t.name()).collect();
    assert_eq!(names, expected);
    let operation = &doc["paths"][EVENT_TYPES]["get"];
    assert_eq!(operation["operationId"], "listWebhookEventTypes");
}

#[tokio::test]
async fn the_catalogue_needs_the_webhooks_scope_and_a_token() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    // A partner's usual token, for enquiries, does not manage webhooks.
    let reply = get(&app, Some(&app.bearer())).await;
    assert_eq!(reply.status, 403, "{}", reply.body);
    assert_eq!(reply.body["message"], "Invalid scope(s) provided.");
    let reply = get(&app, None).await;
    assert_eq!(reply.status, 401, "{}", reply.body);
    let reply = get(&app, Some("Bearer not-a-token")).await;
    assert_eq!(reply.status, 401, "{}", reply.body);
}
