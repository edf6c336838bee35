//! `GET /partners/external/cases/{reference}`: a partner reads back the cases it submitted,
//! through activation and attach, and nobody else's.

use std::time::Duration;

use serde_json::Value;

use crate::helpers::{
    Backend, ENQUIRY, INTAKE, TestApp, eventually, fresh_email, message, purchase_enquiry,
};
use test_support::on_both_backends;

const OTHER_PRODUCT: &str = "0b0f5d3e-3c1a-4c5e-9d7e-2f6a1b8c9d01";

async fn a_partner_reads_its_case_through_activation_and_attach(backend: Backend) {
    let app = TestApp::spawn_with(backend, |c| {
        c.activation_delay_secs = 1;
        c.activation_poll_ms = 100;
    })
    .await;
    let email = fresh_email();
    let enquiry = purchase_enquiry("brand_a", &email);
    let reference = app.submit(&enquiry).await;
    let bearer = app.bearer();

    let pending = app.case_status(&reference, Some(&bearer)).await;
    assert_eq!(pending.status, 200, "{:?}", pending.body);
    let keys: Vec<&String> = pending
        .body
        .as_object()
        .expect("an object")
        .keys()
        .collect();
    assert_eq!(
        keys,
        [
            "reference",
            "brand",
            "status",
            "created_at",
            "updated_at",
            "activates_at",
            "activated_at",
            "product_uuid"
        ]
    );
    assert_eq!(pending.body["reference"], reference.as_str());
    assert_eq!(pending.body["brand"], "brand_a");
    assert_eq!(pending.body["activated_at"], Value::Null);
    assert_eq!(pending.body["product_uuid"], enquiry["product_uuid"]);
    let shown = app.case_show(&reference).await;
    for field in ["created_at", "updated_at", "activates_at"] {
        let served: chrono::DateTime<chrono::Utc> = pending.body[field]
            .as_str()
            .expect(field)
            .parse()
            .expect(field);
        let stored: chrono::DateTime<chrono::Utc> =
            shown[field].as_str().expect(field).parse().expect(field);
        assert_eq!(served, stored, "{field}");
    }
    // It may already have activated on a slow machine; it must not go back.
    assert!(
        ["pending_activation", "active"].contains(&pending.body["status"].as_str().unwrap()),
        "{:?}",
        pending.body
    );

    let active = eventually(Duration::from_secs(10), || async {
        let reply = app.case_status(&reference, Some(&bearer)).await;
        (reply.body["status"] == "active").then_some(reply)
    })
    .await
    .expect("the case became active");
    assert!(active.body["activated_at"].is_string(), "{:?}", active.body);

    assert_ne!(enquiry["product_uuid"], OTHER_PRODUCT);
    let attached = app.attach(&email, OTHER_PRODUCT).await;
    assert_eq!(attached.status, 200, "{:?}", attached.body);
    let after = app.case_status(&reference, Some(&bearer)).await;
    assert_eq!(after.body["product_uuid"], OTHER_PRODUCT);
    assert_eq!(after.body["status"], "active");
}

async fn another_partners_case_and_an_unknown_reference_answer_404(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let email = fresh_email();
    let reference = app.submit(&purchase_enquiry("brand_a", &email)).await;
    let (b_id, b_secret) = app.auth.create_client(INTAKE).await;
    let b = format!("Bearer {}", app.auth.token(&b_id, &b_secret, INTAKE).await);

    for (who, reference) in [
        (b.as_str(), reference.as_str()),
        (app.bearer().as_str(), "100000000000"),
        (app.bearer().as_str(), "not-a-reference"),
    ] {
        let reply = app.case_status(reference, Some(who)).await;
        assert_eq!(reply.status, 404, "{reference}: {:?}", reply.body);
        assert_eq!(reply.body, message("Case not found"));
    }

    // Once B has sent an enquiry for the customer's case, B reads it too.
    let reply = app
        .post(ENQUIRY, Some(&b), &purchase_enquiry("brand_a", &email))
        .await;
    assert_eq!(reply.status, 200, "{:?}", reply.body);
    let reply = app.case_status(&reference, Some(&b)).await;
    assert_eq!(reply.status, 200, "{:?}", reply.body);

    let reply = app.case_status(&reference, None).await;
    assert_eq!(reply.status, 401, "{:?}", reply.body);
}

on_both_backends!(
    a_partner_reads_its_case_through_activation_and_attach,
    another_partners_case_and_an_unknown_reference_answer_404,
);
