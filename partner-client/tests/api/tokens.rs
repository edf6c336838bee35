//! Tokens as spec 5.4 advises: reused until 30 s before they expire, renewed once however
//! many calls need a new one, and replaced once when the API refuses one.

use std::time::Duration;

use auth_server::commands::KeyCommand;
use partner_client::{AttachRequest, AuthMethod, Error, TokenError};
use test_support::{on_both_backends, on_sqlite};
use tokio::task::JoinSet;

use crate::helpers::{
    Backend, RelaySettings, Stack, eventually, fresh_email, kid_of, product, purchase, until,
};

async fn two_calls_make_one_token_request(backend: Backend) {
    let stack = Stack::start(backend).await;
    let client = stack.client();
    let email = fresh_email();
    let case = client
        .submit(&purchase("brand_a", &email), None)
        .await
        .expect("submitted");
    assert!(case.created());
    let attach = AttachRequest {
        email,
        product_uuid: product(),
    };
    client.attach(&attach, None).await.expect("attached");
    assert_eq!(stack.relay.requests(), 1);
    assert_eq!(stack.tokens_issued().await, 1.0);
}

/// The relay reports a 35-second lifetime, so the client's 30-second margin falls due 5 s
/// after the token request: every call before then reuses the token, the first after renews
/// it, and the calls after that reuse the new one.
async fn a_token_is_reused_until_thirty_seconds_before_it_expires_then_renewed_once(
    backend: Backend,
) {
    let settings = RelaySettings {
        expires_in: Some(35),
        ..Default::default()
    };
    let stack = Stack::start_with(backend, settings, |_| {}).await;
    let client = stack.client();
    let enquiry = purchase("brand_a", &fresh_email());
    let mut calls = 0;
    let renewed = eventually(Duration::from_secs(15), || {
        calls += 1;
        let (client, enquiry, relay) = (&client, &enquiry, &stack.relay);
        async move {
            client.submit(enquiry, None).await.expect("submitted");
            (relay.requests() == 2).then_some(())
        }
    })
    .await;
    assert!(renewed.is_some(), "never renewed");
    let seen = stack.relay.seen();
    let kept = seen[1].at - seen[0].at;
    // The client counts the lifetime from before its request, the relay from its arrival.
    assert!(
        kept > Duration::from_millis(4_500),
        "renewed after {kept:?}"
    );
    assert!(
        calls > 2,
        "only {calls} calls: the first token was never reused"
    );
    for _ in 0..3 {
        client.submit(&enquiry, None).await.expect("submitted");
    }
    assert_eq!(
        stack.relay.requests(),
        2,
        "the renewed token was not reused"
    );
}

/// Twenty calls at once on a client with no token make one token request (the relay answers
/// it slowly, so they surely overlap it); twenty more once it is due for renewal make one
/// more.
async fn a_burst_of_concurrent_calls_shares_one_token_request_and_then_one_renewal(
    backend: Backend,
) {
    let settings = RelaySettings {
        expires_in: Some(33),
        delay: Duration::from_millis(300),
    };
    let stack = Stack::start_with(backend, settings, |_| {}).await;
    let client = stack.client();
    let burst = || {
        let mut calls = JoinSet::new();
        for _ in 0..20 {
            let client = client.clone();
            calls.spawn(async move {
                client
                    .submit(&purchase("brand_a", &fresh_email()), None)
                    .await
                    .map(|a| a.status)
            });
        }
        calls.join_all()
    };
    for status in burst().await {
        assert_eq!(status.expect("submitted"), 201);
    }
    assert_eq!(stack.relay.requests(), 1);

    until(stack.relay.seen()[0].at + Duration::from_secs(3)).await;
    for status in burst().await {
        assert_eq!(status.expect("submitted"), 201);
    }
    assert_eq!(stack.relay.requests(), 2);
    assert_eq!(stack.tokens_issued().await, 2.0);
}

/// The signing key of the client's cached token is revoked: the intake-api refuses the token
/// within seconds, and a burst of calls then gets one new token (signed by the replacement
/// key) and succeeds, each after one 401.
async fn calls_refused_after_a_key_revoke_succeed_with_one_fresh_token(backend: Backend) {
    // A slow token endpoint, so the burst's 401s surely overlap the one renewal.
    let settings = RelaySettings {
        delay: Duration::from_millis(300),
        ..Default::default()
    };
    let stack = Stack::start_with(backend, settings, |_| {}).await;
    let client = stack.client();
    client
        .submit(&purchase("brand_a", &fresh_email()), None)
        .await
        .expect("submitted");
    let probe = stack.direct_token().await;
    let old_kid = kid_of(stack.relay.seen()[0].token.as_deref().expect("a token"));
    assert_eq!(kid_of(&probe), old_kid);
    let revoked = stack
        .auth
        .key_cmd(KeyCommand::Revoke {
            kid: old_kid.clone(),
        })
        .await
        .expect("key revoke");
    let refused = eventually(Duration::from_secs(5), || async {
        (stack.status_with_token(&probe).await == 401).then_some(())
    })
    .await;
    assert!(
        refused.is_some(),
        "the revoked key's token was still accepted"
    );

    let mut calls = JoinSet::new();
    for _ in 0..10 {
        let client = client.clone();
        calls.spawn(async move {
            client
                .submit(&purchase("brand_a", &fresh_email()), None)
                .await
        });
    }
    for answer in calls.join_all().await {
        assert_eq!(answer.expect("submitted after a retry").status, 201);
    }
    let seen = stack.relay.seen();
    assert_eq!(seen.len(), 2, "one renewal for the whole burst");
    let replacement = revoked["replacement_kid"].as_str().expect("replacement");
    assert_eq!(
        kid_of(seen[1].token.as_deref().expect("a token")),
        replacement
    );
}

/// An intake-api that expects another audience refuses every token: the call is retried
/// once with a fresh token and then fails, naming the reason the service gave.
async fn a_call_refused_with_a_fresh_token_too_is_unauthenticated_after_one_retry(
    backend: Backend,
) {
    let stack = Stack::start_with(backend, RelaySettings::default(), |c| {
        c.audience = "another-audience".into();
    })
    .await;
    let err = stack
        .client()
        .submit(&purchase("brand_a", &fresh_email()), None)
        .await
        .expect_err("refused");
    let Error::Unauthenticated { message, challenge } = &err else {
        panic!("not unauthenticated: {err:?}");
    };
    assert_eq!(message, "Unauthenticated.");
    assert!(
        challenge
            .as_deref()
            .is_some_and(|c| c.contains("invalid_token")),
        "{challenge:?}"
    );
    assert_eq!(stack.relay.requests(), 2, "retried other than once");
}

async fn client_secret_basic_sends_the_secret_in_the_header_only(backend: Backend) {
    let stack = Stack::start(backend).await;
    let client = stack
        .builder()
        .auth_method(AuthMethod::Basic)
        .build()
        .expect("builds");
    client
        .submit(&purchase("brand_a", &fresh_email()), None)
        .await
        .expect("submitted");
    let seen = stack.relay.seen();
    assert_eq!(seen.len(), 1);
    assert!(seen[0].basic && !seen[0].secret_in_body, "{:?}", seen[0]);
    assert!(seen[0].token.is_some());
}

async fn a_wrong_secret_is_a_token_error_naming_invalid_client(backend: Backend) {
    let stack = Stack::start(backend).await;
    let client = stack
        .builder_with_secret("not-the-secret")
        .build()
        .expect("builds");
    let err = client
        .submit(&purchase("brand_a", &fresh_email()), None)
        .await
        .expect_err("refused");
    let Error::Token(TokenError::Refused { status, body, .. }) = &err else {
        panic!("not a refused token request: {err:?}");
    };
    assert_eq!(*status, 401);
    assert_eq!(body.error, "invalid_client");
}

/// Ten calls at once while the one token request they wait on fails all get its failure:
/// an outage or a bad secret costs one token request, not one per call.
async fn concurrent_calls_share_the_failure_of_the_token_request_they_waited_on(backend: Backend) {
    let settings = RelaySettings {
        delay: Duration::from_millis(300),
        ..Default::default()
    };
    let stack = Stack::start_with(backend, settings, |_| {}).await;
    let client = stack
        .builder_with_secret("not-the-secret")
        .build()
        .expect("builds");
    let mut calls = JoinSet::new();
    for _ in 0..10 {
        let client = client.clone();
        calls.spawn(async move {
            client
                .submit(&purchase("brand_a", &fresh_email()), None)
                .await
        });
    }
    for answer in calls.join_all().await {
        assert!(
            matches!(
                answer,
                Err(Error::Token(TokenError::Refused { status: 401, .. }))
            ),
            "{answer:?}"
        );
    }
    assert_eq!(stack.relay.requests(), 1);
}

on_both_backends!(
    two_calls_make_one_token_request,
    a_token_is_reused_until_thirty_seconds_before_it_expires_then_renewed_once,
    a_burst_of_concurrent_calls_shares_one_token_request_and_then_one_renewal,
    calls_refused_after_a_key_revoke_succeed_with_one_fresh_token,
);

on_sqlite!(
    a_call_refused_with_a_fresh_token_too_is_unauthenticated_after_one_retry,
    client_secret_basic_sends_the_secret_in_the_header_only,
    a_wrong_secret_is_a_token_error_naming_invalid_client,
    concurrent_calls_share_the_failure_of_the_token_request_they_waited_on,
);
