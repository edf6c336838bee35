//! The typed calls against the real services: their answers, replays and errors.

use std::time::Duration;

use partner_client::{AttachRequest, CaseState, Error, IdempotencyKey, ReferralRequest};
use test_support::{on_both_backends, on_sqlite};

use crate::helpers::{Backend, REFERRAL, RelaySettings, Stack, fresh_email, product, purchase};

async fn submit_creates_a_case_then_updates_it_and_attach_answers_with_a_link(backend: Backend) {
    let stack = Stack::start(backend).await;
    let client = stack.client();
    let email = fresh_email();
    let enquiry = purchase("brand_a", &email);
    let created = client.submit(&enquiry, None).await.expect("submitted");
    assert!(created.created() && !created.replayed, "{created:?}");
    assert_eq!(created.body.message, "Case created");
    let updated = client.submit(&enquiry, None).await.expect("submitted");
    assert!(!updated.created(), "{updated:?}");
    assert_eq!(updated.body.message, "Case updated");
    assert_eq!(updated.body.reference, created.body.reference);

    let case = client.case(&created.body.reference).await.expect("read");
    assert_eq!(
        (case.brand.as_str(), case.status, case.product_uuid),
        ("brand_a", CaseState::PendingActivation, None),
        "{case:?}"
    );
    assert!(case.activates_at > Some(case.created_at), "{case:?}");

    let attach = AttachRequest {
        email,
        product_uuid: product(),
    };
    let link = client.attach(&attach, None).await.expect("attached");
    assert_eq!(link.status, 200);
    assert!(
        link.body
            .redirect
            .starts_with("https://portal.brand-a.example/continue?token="),
        "{link:?}"
    );
    let case = client.case(&created.body.reference).await.expect("read");
    assert_eq!(case.product_uuid, Some(attach.product_uuid), "{case:?}");
}

async fn reading_a_case_it_did_not_submit_is_case_not_found(backend: Backend) {
    let stack = Stack::start(backend).await;
    let client = stack.client();
    let err = client.case("000000000000").await.expect_err("no such case");
    assert!(
        matches!(&err, Error::CaseNotFound { message } if message == "Case not found"),
        "{err:?}"
    );
    // Whatever a reference holds stays one path segment.
    let err = client.case("../intake").await.expect_err("no such case");
    assert!(matches!(&err, Error::CaseNotFound { .. }), "{err:?}");
}

async fn a_repeated_idempotency_key_replays_the_first_answer(backend: Backend) {
    let stack = Stack::start(backend).await;
    let client = stack.client();
    let email = fresh_email();
    let enquiry = purchase("brand_a", &email);
    let key = IdempotencyKey::random();
    let first = client
        .submit(&enquiry, Some(&key))
        .await
        .expect("submitted");
    let again = client.submit(&enquiry, Some(&key)).await.expect("replayed");
    assert!(!first.replayed && again.replayed, "{first:?} {again:?}");
    assert_eq!((again.status, again.body), (201, first.body));

    let attach = AttachRequest {
        email,
        product_uuid: product(),
    };
    let key = IdempotencyKey::new("attach-1").expect("a valid key");
    let link = client.attach(&attach, Some(&key)).await.expect("attached");
    let again = client.attach(&attach, Some(&key)).await.expect("replayed");
    assert!(again.replayed);
    assert_eq!(again.body, link.body, "a second link was made");

    let other = AttachRequest {
        product_uuid: product(),
        ..attach
    };
    let err = client.attach(&other, Some(&key)).await.expect_err("reused");
    let Error::KeyReused { message } = &err else {
        panic!("not a reused key: {err:?}");
    };
    assert_eq!(message, "Idempotency-Key reused with a different request.");
}

async fn an_invalid_enquiry_is_an_invalid_error_with_a_message_per_field(backend: Backend) {
    let stack = Stack::start(backend).await;
    let mut enquiry = purchase("brand_a", "not-an-address");
    enquiry.mobile_number = "12".into();
    let err = stack
        .client()
        .submit(&enquiry, None)
        .await
        .expect_err("refused");
    let Error::Invalid(body) = &err else {
        panic!("not invalid: {err:?}");
    };
    assert_eq!(body.message, "The given data was invalid.");
    let fields: Vec<&str> = body.errors.keys().map(String::as_str).collect();
    assert_eq!(fields, ["email", "mobile_number"], "{body:?}");
    assert!(
        body.errors
            .values()
            .all(|m| !m.is_empty() && !m[0].is_empty())
    );
}

async fn attach_for_an_address_with_no_case_is_case_not_found(backend: Backend) {
    let stack = Stack::start(backend).await;
    let attach = AttachRequest {
        email: fresh_email(),
        product_uuid: product(),
    };
    let err = stack
        .client()
        .attach(&attach, None)
        .await
        .expect_err("refused");
    assert!(
        matches!(&err, Error::CaseNotFound { message } if message == "Case not found"),
        "{err:?}"
    );
}

async fn over_the_rate_limit_a_call_is_rate_limited_with_retry_after(backend: Backend) {
    let stack = Stack::start_with(backend, RelaySettings::default(), |c| {
        c.rate_limit = 1;
    })
    .await;
    let client = stack.client();
    client
        .submit(&purchase("brand_a", &fresh_email()), None)
        .await
        .expect("the first is allowed");
    let err = client
        .submit(&purchase("brand_a", &fresh_email()), None)
        .await
        .expect_err("limited");
    assert!(matches!(err, Error::RateLimited { .. }), "{err:?}");
    let wait = err.retry_after().expect("Retry-After");
    assert!(
        wait > Duration::ZERO && wait <= Duration::from_secs(60),
        "{wait:?}"
    );
}

async fn a_token_without_the_intake_scope_is_forbidden_naming_the_scope(backend: Backend) {
    let stack = Stack::start(backend).await;
    let client = stack.builder().scope(REFERRAL).build().expect("builds");
    let err = client
        .submit(&purchase("brand_a", &fresh_email()), None)
        .await
        .expect_err("forbidden");
    let Error::Forbidden { challenge, .. } = &err else {
        panic!("not forbidden: {err:?}");
    };
    assert!(
        challenge
            .as_deref()
            .is_some_and(|c| c.contains("enquiry:case:intake:create")),
        "{challenge:?}"
    );
    assert_eq!(stack.relay.requests(), 1, "a 403 is not retried");
}

async fn the_clients_debug_shows_neither_its_secret_nor_its_token(backend: Backend) {
    let stack = Stack::start(backend).await;
    let client = stack.client();
    client
        .submit(&purchase("brand_a", &fresh_email()), None)
        .await
        .expect("submitted");
    let token = stack.relay.seen()[0].token.clone().expect("a token");
    let shown = format!("{client:?}");
    assert!(shown.contains(&stack.client_id), "{shown}");
    assert!(!shown.contains(&stack.client_secret), "{shown}");
    assert!(!shown.contains(&token), "{shown}");
    // Nor the token's signature alone, nor any part of it.
    for part in token.split('.') {
        assert!(!shown.contains(part), "{shown}");
    }
}

async fn refer_makes_a_referred_case_that_an_enquiry_completes(backend: Backend) {
    let stack = Stack::start(backend).await;
    let scopes = format!("{} {REFERRAL}", partner_client::INTAKE_SCOPE);
    let client = stack.builder().scope(scopes).build().expect("builds");
    let email = fresh_email();
    let referral = ReferralRequest {
        brand: "brand_a".into(),
        first_name: "Jane".into(),
        last_name: "Doe".into(),
        email: email.clone(),
        mobile_number: "07700 900123".into(),
        contact_consent: true,
        partner_reference: None,
        note: Some("Call after 6pm.".into()),
    };
    let key = IdempotencyKey::random();
    let referred = client.refer(&referral, Some(&key)).await.expect("referred");
    assert_eq!((referred.status, referred.replayed), (201, false));
    assert_eq!(referred.body.message, "Referral created");
    assert!(
        referred
            .body
            .redirect
            .starts_with("https://portal.brand-a.example/continue?token="),
        "{referred:?}"
    );
    let again = client.refer(&referral, Some(&key)).await.expect("replayed");
    assert!(again.replayed && again.body == referred.body, "{again:?}");
    // A referral grants nothing: the case opens to the partner with its own enquiry.
    let unread = client.case(&referred.body.reference).await;
    assert!(
        matches!(unread, Err(Error::CaseNotFound { .. })),
        "{unread:?}"
    );
    let completed = client
        .submit(&purchase("brand_a", &email), None)
        .await
        .expect("submitted");
    assert!(!completed.created(), "{completed:?}");
    assert_eq!(completed.body.reference, referred.body.reference);
    let case = client.case(&referred.body.reference).await.expect("read");
    assert_eq!(case.status, CaseState::PendingActivation);

    let refused = ReferralRequest {
        contact_consent: false,
        ..referral
    };
    let err = client.refer(&refused, None).await.expect_err("invalid");
    let Error::Invalid(body) = &err else {
        panic!("not invalid: {err:?}");
    };
    assert!(body.errors.contains_key("contact_consent"), "{body:?}");
}

on_both_backends!(
    refer_makes_a_referred_case_that_an_enquiry_completes,
    submit_creates_a_case_then_updates_it_and_attach_answers_with_a_link,
    a_repeated_idempotency_key_replays_the_first_answer,
);

on_sqlite!(
    an_invalid_enquiry_is_an_invalid_error_with_a_message_per_field,
    attach_for_an_address_with_no_case_is_case_not_found,
    over_the_rate_limit_a_call_is_rate_limited_with_retry_after,
    a_token_without_the_intake_scope_is_forbidden_naming_the_scope,
    the_clients_debug_shows_neither_its_secret_nor_its_token,
    reading_a_case_it_did_not_submit_is_case_not_found,
);
