//! The webhook endpoint and delivery history operations through the client against the real
//! services, and deliveries the intake-api really sent checked with the client's
//! `WebhookVerifier`, through a secret rotation.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use partner_client::{
    Client, Credentials, DeliveryFilter, DeliveryStatus, EndpointStatus, Error, EventType,
    NewWebhookEndpoint, WEBHOOKS_SCOPE, WebhookEndpointChange, WebhookVerifier,
};
use poem::web::Data;
use poem::{EndpointExt, Request, Route, handler, post};
use test_support::on_both_backends;

use crate::helpers::{
    Backend, INTAKE, RelaySettings, Running, Stack, eventually, fresh_email, purchase,
};

/// A delivery as received: `webhook-id`, `webhook-timestamp`, `webhook-signature`, body.
type Delivery = (String, String, String, Vec<u8>);

#[handler]
fn receive(req: &Request, body: Vec<u8>, got: Data<&Arc<Mutex<Vec<Delivery>>>>) {
    let header = |name: &str| {
        req.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned()
    };
    got.lock().unwrap().push((
        header("webhook-id"),
        header("webhook-timestamp"),
        header("webhook-signature"),
        body,
    ));
}

async fn arrived(got: &Arc<Mutex<Vec<Delivery>>>, n: usize) -> Vec<Delivery> {
    eventually(Duration::from_secs(20), || async {
        let got = got.lock().unwrap().clone();
        (got.len() >= n).then_some(got)
    })
    .await
    .unwrap_or_else(|| panic!("{n} deliveries never arrived"))
}

async fn endpoints_are_managed_and_deliveries_verified_through_the_client(backend: Backend) {
    let stack = Stack::start_with(backend, RelaySettings::default(), |c| {
        c.webhooks.insecure.allow = true;
        c.webhooks.poll = Duration::from_millis(50);
        c.webhooks.endpoints_per_partner = 2;
    })
    .await;
    let scopes = format!("{INTAKE} {WEBHOOKS_SCOPE}");
    let (id, secret) = stack.auth.create_client(&scopes).await;
    let client = Client::builder(
        Credentials::new(&id, &secret),
        stack.relay.url.clone(),
        stack.intake.base_url(),
    )
    .scope(scopes)
    .build()
    .expect("the client builds");
    let got = Arc::new(Mutex::new(Vec::new()));
    let receiver =
        Running::serve_locally(Route::new().at("/hook", post(receive)).data(got.clone())).await;

    let catalogue = client.webhook_event_types().await.expect("the catalogue");
    assert!(
        catalogue
            .data
            .iter()
            .any(|e| e.event_type == EventType::CaseCreated)
    );
    let made = client
        .create_webhook_endpoint(&NewWebhookEndpoint {
            url: format!("http://127.0.0.1:{}/hook", receiver.port),
            event_types: Some(vec![EventType::CaseCreated, EventType::CaseUpdated]),
            rate_limit: None,
        })
        .await
        .expect("made");
    let endpoint = made.endpoint.id.clone();
    assert!(made.secret.starts_with("whsec_"));
    assert_eq!(
        client.webhook_endpoints().await.unwrap(),
        std::slice::from_ref(&made.endpoint)
    );
    assert_eq!(
        client.webhook_endpoint(&endpoint).await.unwrap(),
        made.endpoint
    );
    let paused = client
        .update_webhook_endpoint(
            &endpoint,
            &WebhookEndpointChange {
                enabled: Some(false),
                ..WebhookEndpointChange::default()
            },
        )
        .await
        .expect("changed");
    assert_eq!(paused.status, EndpointStatus::Disabled);
    let resumed = client
        .update_webhook_endpoint(
            &endpoint,
            &WebhookEndpointChange {
                enabled: Some(true),
                ..WebhookEndpointChange::default()
            },
        )
        .await
        .expect("changed");
    assert_eq!(resumed.status, EndpointStatus::Enabled);

    // A real delivery verifies with the secret the API showed, and not with another.
    let email = fresh_email();
    client
        .submit(&purchase("brand_a", &email), None)
        .await
        .expect("submitted");
    let (msg, ts, signature, body) = arrived(&got, 1).await.remove(0);
    let event = WebhookVerifier::new(&[&made.secret])
        .unwrap()
        .verify(&msg, &ts, &signature, &body)
        .expect("verified");
    assert_eq!(event.event_type, EventType::CaseCreated);
    let stranger = WebhookVerifier::new(&["whsec_c2VjcmV0LW9mLXNvbWVvbmUtZWxzZQ=="]).unwrap();
    assert!(stranger.verify(&msg, &ts, &signature, &body).is_err());

    // Rotated: during the grace, a verifier with either secret passes.
    let rotated = client
        .rotate_webhook_secret(&endpoint, Some(Duration::from_secs(600)))
        .await
        .expect("rotated");
    assert_ne!(rotated.secret, made.secret);
    assert!(rotated.endpoint.previous_secret_expires_at.is_some());
    client
        .submit(&purchase("brand_a", &email), None)
        .await
        .expect("submitted");
    let (msg, ts, signature, body) = arrived(&got, 2).await.remove(1);
    for secrets in [[made.secret.as_str()], [rotated.secret.as_str()]] {
        let event = WebhookVerifier::new(&secrets)
            .unwrap()
            .verify(&msg, &ts, &signature, &body)
            .expect("verified during the grace");
        assert_eq!(event.event_type, EventType::CaseUpdated);
    }

    // The history: both events delivered, each with its try; one sent again on request.
    let history = eventually(Duration::from_secs(10), || async {
        let page = client
            .webhook_deliveries(&DeliveryFilter {
                status: Some(DeliveryStatus::Delivered),
                ..DeliveryFilter::default()
            })
            .await
            .expect("the history");
        (page.data.len() == 2).then_some(page)
    })
    .await
    .expect("both events in the history as delivered");
    assert_eq!(history.data[0].id, msg, "newest first");
    assert_eq!(history.data[0].event_type, EventType::CaseUpdated);
    let first = client
        .webhook_deliveries(&DeliveryFilter {
            limit: Some(1),
            event_type: Some(EventType::CaseUpdated),
            endpoint_id: Some(endpoint.clone()),
            since: Some(chrono::Utc::now() - chrono::Duration::hours(1)),
            ..DeliveryFilter::default()
        })
        .await
        .expect("a page");
    assert_eq!(first.data.len(), 1);
    assert_eq!(first.next_cursor, None);
    let detail = client
        .webhook_delivery(&endpoint, &msg)
        .await
        .expect("the event with its tries");
    assert_eq!(detail.attempts.len(), 1);
    assert_eq!(detail.attempts[0].status, Some(200));
    let again = client
        .redeliver_webhook(&endpoint, &msg)
        .await
        .expect("sent again");
    assert_eq!(again.id, msg);
    assert_eq!(arrived(&got, 3).await[2].0, msg, "the same webhook-id");
    let recovered = client
        .recover_webhook_deliveries(
            &endpoint,
            chrono::Utc::now() - chrono::Duration::hours(1),
            None,
        )
        .await
        .expect("recovered");
    assert_eq!(
        (recovered.queued, recovered.more),
        (0, false),
        "nothing failed"
    );
    let tested = client
        .test_webhook_endpoint(&endpoint, Some(EventType::CaseActivated))
        .await
        .expect("a test event");
    assert!(tested.delivered, "{tested:?}");
    let (msg_test, ts, signature, body) = arrived(&got, 4).await.remove(3);
    assert_eq!(msg_test, tested.id);
    let event = WebhookVerifier::new(&[rotated.secret.as_str()])
        .unwrap()
        .verify(&msg_test, &ts, &signature, &body)
        .expect("a test event verifies");
    assert_eq!(event.event_type, EventType::CaseActivated);
    let missing = client
        .webhook_delivery(&endpoint, "msg_0192f3c4d5e67a8b9c0d1e2f3a4b5c6d")
        .await
        .expect_err("no such event");
    assert!(
        matches!(missing, Error::DeliveryNotFound { .. }),
        "{missing:?}"
    );

    // The limit, and an endpoint gone, as the errors say.
    let second = NewWebhookEndpoint {
        url: "http://127.0.0.1:9/second".into(),
        event_types: None,
        rate_limit: None,
    };
    client
        .create_webhook_endpoint(&second)
        .await
        .expect("a second");
    let over = client
        .create_webhook_endpoint(&second)
        .await
        .expect_err("over the limit");
    assert!(matches!(over, Error::EndpointLimit { .. }), "{over:?}");
    client
        .delete_webhook_endpoint(&endpoint)
        .await
        .expect("removed");
    for gone in [
        client.webhook_endpoint(&endpoint).await.map(|_| ()),
        client.delete_webhook_endpoint(&endpoint).await,
        client.webhook_endpoint("../event-types").await.map(|_| ()),
    ] {
        assert!(
            matches!(gone, Err(Error::EndpointNotFound { .. })),
            "{gone:?}"
        );
    }
}

on_both_backends!(endpoints_are_managed_and_deliveries_verified_through_the_client);
