//! A state change wins over work in flight: once a partner's disable, removal or new URL
//! of an endpoint is acknowledged, nothing more is sent by what came before, from any
//! replica; the same once a partner is disabled at the auth-server or a customer is
//! erased. And what partners ask to be sent again goes at once, even to an endpoint whose
//! failures the worker was waiting out.

use std::collections::HashSet;
use std::time::Duration;

use auth_server::commands::ClientCommand;
use intake_api::cli::WebhookCommand;
use intake_api::config::Config;
use reqwest::Method;
use serde_json::{Value, json};

use crate::cli::intake_api;
use crate::helpers::{
    Backend, ENQUIRY, IntakeServer, TestApp, eventually, fresh_email, post_raw, purchase_enquiry,
    store_of,
};
use crate::webhook_endpoints::{Partner, id_of};
use crate::webhooks::{Receiver, expected_signature, webhook_settings};
use intake_api::domain::parse_enquiry;
use intake_api::sandbox::World;
use test_support::on_both_backends;

/// The replica that sends: it looks for due events often. The other (the app's own) looks
/// once an hour and is woken only by its own writes, so the changes made there are obeyed
/// by a replica that did not make them.
fn sender(c: &mut Config) {
    webhook_settings(c);
}

fn bystander(c: &mut Config) {
    webhook_settings(c);
    c.webhooks.poll = Duration::from_millis(3_600_000);
}

/// Events queued at `replica` for `partner`, one a new case each; their e-mails.
async fn queue(app: &TestApp, replica: &IntakeServer, partner: &Partner, n: usize) -> Vec<String> {
    let mut emails = Vec::new();
    for _ in 0..n {
        let email = fresh_email();
        let body = purchase_enquiry("brand_a", &email).to_string().into_bytes();
        let url = format!("{}{ENQUIRY}", replica.base_url());
        let reply = post_raw(&app.http, &url, Some(&partner.bearer), body).await;
        assert_eq!(reply.status, 201, "{}", reply.body);
        emails.push(email);
    }
    emails
}

/// Requests that reached `receiver`, answered or not.
fn arrived(receiver: &Receiver) -> usize {
    receiver.arrived()
}

/// Waits until `n` requests reached `receiver`.
async fn until_arrived(receiver: &Receiver, n: usize) {
    eventually(Duration::from_secs(30), || async {
        (arrived(receiver) >= n).then_some(())
    })
    .await
    .unwrap_or_else(|| panic!("{n} requests never arrived; {}", arrived(receiver)));
}

/// Rows of the intake database `sql` counts.
async fn count(app: &TestApp, sql: &str) -> usize {
    app.intake_column(
        &format!("SELECT CAST(COUNT(*) AS TEXT) AS n FROM {sql}"),
        "n",
    )
    .await[0]
        .parse()
        .expect("a count")
}

/// Events of `client_id` still to be sent, and how many of them are out on a claim, in one
/// read (two could see an event settled between them).
async fn unsent(app: &TestApp, client_id: &str) -> (usize, usize) {
    let sql = format!(
        "SELECT CAST(COUNT(*) AS TEXT) || ' ' || CAST(COALESCE(SUM(CASE WHEN locked_until IS \
         NOT NULL THEN 1 ELSE 0 END), 0) AS TEXT) AS n FROM webhook_deliveries WHERE client_id \
         = '{client_id}' AND delivered_at IS NULL AND failed_at IS NULL"
    );
    let both = app.intake_column(&sql, "n").await;
    let (pending, claimed) = both[0].split_once(' ').expect("two counts");
    (
        pending.parse().expect("a count"),
        claimed.parse().expect("a count"),
    )
}

/// Waits until no event of `client_id` is out on a claim: the round that held them ended
/// and gave back those it did not send.
async fn until_none_claimed(app: &TestApp, client_id: &str) -> usize {
    eventually(Duration::from_secs(30), || async {
        let (pending, claimed) = unsent(app, client_id).await;
        (claimed == 0).then_some(pending)
    })
    .await
    .expect("the worker never gave back the events it held")
}

/// A control partner's event, queued after a change and delivered: the worker has looked
/// for due events since, and passed over what the change stopped.
async fn worker_looked_again(app: &TestApp, replica: &IntakeServer) {
    let control = Partner::new(app).await;
    let receiver = Receiver::start().await;
    let made = control.create(app, json!({"url": receiver.url})).await;
    assert_eq!(made.status, 201, "{}", made.body);
    queue(app, replica, &control, 1).await;
    receiver.wait_for(1).await;
}

/// Two replicas, and a partner whose endpoint takes one event a second with eight queued;
/// returns once two arrived.
async fn paced(backend: Backend) -> (TestApp, IntakeServer, Partner, Receiver, String) {
    let app = TestApp::spawn_with(backend, bystander).await;
    let replica = app.second_intake(sender).await;
    let partner = Partner::new(&app).await;
    let receiver = Receiver::start().await;
    let made = partner
        .create(&app, json!({"url": receiver.url, "rate_limit": 1}))
        .await;
    assert_eq!(made.status, 201, "{}", made.body);
    let id = id_of(&made);
    queue(&app, &replica, &partner, 8).await;
    until_arrived(&receiver, 2).await;
    (app, replica, partner, receiver, id)
}

async fn nothing_more_is_sent_to_an_endpoint_once_its_disable_is_acknowledged(backend: Backend) {
    let (app, replica, partner, receiver, id) = paced(backend).await;
    let off = partner.change(&app, &id, json!({"enabled": false})).await;
    assert_eq!(off.status, 200, "{}", off.body);
    let at_ack = arrived(&receiver);
    assert!(at_ack < 8, "all sent before the change: {at_ack}");
    let left = until_none_claimed(&app, &partner.client_id).await;
    worker_looked_again(&app, &replica).await;
    assert_eq!(
        arrived(&receiver),
        at_ack,
        "sent after the disable was acknowledged"
    );
    // Nothing is lost: what was not sent waits, and goes once the endpoint is enabled.
    assert_eq!(left, 8 - at_ack);
    let on = partner.change(&app, &id, json!({"enabled": true})).await;
    assert_eq!(on.status, 200, "{}", on.body);
    let got = receiver.wait_for(8).await;
    let ids: HashSet<&str> = got.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids.len(), 8, "each event once: {got:?}");
}

async fn nothing_more_is_sent_to_a_removed_endpoint_once_its_removal_is_acknowledged(
    backend: Backend,
) {
    let (app, replica, partner, receiver, id) = paced(backend).await;
    let removed = partner.delete(&app, &id).await;
    assert_eq!(removed.status, 204, "{}", removed.body);
    let at_ack = arrived(&receiver);
    assert!(at_ack < 8, "all sent before the change: {at_ack}");
    assert_eq!(until_none_claimed(&app, &partner.client_id).await, 0);
    worker_looked_again(&app, &replica).await;
    assert_eq!(
        arrived(&receiver),
        at_ack,
        "sent after the removal was acknowledged"
    );
}

async fn a_new_url_gets_the_rest_and_the_old_one_nothing_more_once_the_change_is_acknowledged(
    backend: Backend,
) {
    let (app, _replica, partner, old, id) = paced(backend).await;
    let new = Receiver::start().await;
    let moved = partner.change(&app, &id, json!({"url": new.url})).await;
    assert_eq!(moved.status, 200, "{}", moved.body);
    let at_ack = arrived(&old);
    assert!(at_ack < 8, "all sent before the change: {at_ack}");
    let rest = new.wait_for(8 - at_ack).await;
    assert_eq!(
        arrived(&old),
        at_ack,
        "sent to the old URL after the change"
    );
    let mut ids: HashSet<String> = old.got().into_iter().map(|r| r.id).collect();
    ids.extend(rest.into_iter().map(|r| r.id));
    assert_eq!(ids.len(), 8, "each event once, at one URL or the other");
    // Each recorded as delivered (a try the receiver took but the worker did not hear
    // back from is tried again: at least once).
    eventually(Duration::from_secs(10), || async {
        (unsent(&app, &partner.client_id).await == (0, 0)).then_some(())
    })
    .await
    .expect("every event recorded as delivered");
}

async fn once_a_rotation_without_grace_is_answered_every_event_is_signed_with_the_new_secret_alone(
    backend: Backend,
) {
    let (app, _replica, partner, receiver, id) = paced(backend).await;
    let rotated = partner
        .rotate(&app, &id, json!({"grace_period_secs": 0}))
        .await;
    assert_eq!(rotated.status, 200, "{}", rotated.body);
    let secret = rotated.body["secret"]
        .as_str()
        .expect("a secret")
        .to_owned();
    let at_ack = arrived(&receiver);
    assert!(at_ack < 8, "all sent before the change: {at_ack}");
    let got = receiver.wait_for(8).await;
    for late in &got[at_ack..] {
        assert_eq!(
            late.signatures(),
            [expected_signature(&secret, late).as_str()],
            "an event after the rotation signed otherwise"
        );
    }
}

/// Without a rate limit, a round claims up to 64 events and sends 16 at once: with the
/// receiver holding its first 16 unanswered, the others wait in the round when the
/// operator disables the endpoint from the CLI.
async fn nothing_claimed_goes_out_once_an_operator_disables_the_endpoint(backend: Backend) {
    let app = TestApp::spawn_with(backend, bystander).await;
    let replica = app.second_intake(bystander).await;
    let partner = Partner::new(&app).await;
    let receiver = Receiver::start().await;
    let made = partner.create(&app, json!({"url": receiver.url})).await;
    assert_eq!(made.status, 201, "{}", made.body);
    receiver.hold(true);
    // Queued where no replica hears of it, then one more at the replica, which wakes it:
    // its round claims the whole backlog at once.
    let store = store_of(&app).await;
    let today = chrono::Utc::now().date_naive();
    for _ in 0..40 {
        let body = purchase_enquiry("brand_a", &fresh_email());
        let enquiry = parse_enquiry(&body, &["brand_a", "brand_b"], today).expect("valid");
        store
            .submit(&enquiry, "{}", &partner.client_id, World::Real, None)
            .await
            .expect("queued");
    }
    queue(&app, &replica, &partner, 1).await;
    until_arrived(&receiver, 16).await;
    let disabled = intake_api::cli::webhook(
        &app.intake.config,
        WebhookCommand::Disable {
            client_id: partner.client_id.clone(),
            endpoint: None,
            reason: "incident 42".into(),
        },
    )
    .await
    .expect("webhook disable");
    assert!(disabled["disabled_at"].is_string(), "{disabled}");
    let at_ack = arrived(&receiver);
    assert!(at_ack < 41, "all sent before the change: {at_ack}");
    receiver.hold(false);
    let left = until_none_claimed(&app, &partner.client_id).await;
    worker_looked_again(&app, &replica).await;
    assert_eq!(
        arrived(&receiver),
        at_ack,
        "sent after the disable returned"
    );
    // Nothing is lost: every event is delivered or waits (one whose held send timed out
    // is both received and waiting, to be sent again once enabled).
    let client = &partner.client_id;
    let all = count(
        &app,
        &format!("webhook_deliveries WHERE client_id = '{client}'"),
    )
    .await;
    let failed =
        format!("webhook_deliveries WHERE client_id = '{client}' AND failed_at IS NOT NULL");
    assert_eq!((all, count(&app, &failed).await), (41, 0));
    assert!(left >= 41 - at_ack, "{left} waiting");
}

async fn a_disabled_partner_is_sent_nothing_more_once_the_intake_api_knows(backend: Backend) {
    let (app, replica, partner, receiver, _id) = paced(backend).await;
    app.auth
        .client_cmd(ClientCommand::Disable {
            client_id: partner.client_id.clone(),
        })
        .await
        .expect("client disable");
    // Known at the sending replica once it refuses the partner's token.
    let url = format!(
        "{}/partners/external/webhooks/endpoints",
        replica.base_url()
    );
    eventually(Duration::from_secs(10), || async {
        let reply = app
            .http
            .get(&url)
            .header("authorization", &partner.bearer)
            .send()
            .await
            .expect("the intake-api answers");
        (reply.status() == 401).then_some(())
    })
    .await
    .expect("the disable never reached the intake-api");
    let known = arrived(&receiver);
    assert!(known < 8, "all sent before the change: {known}");
    let left = until_none_claimed(&app, &partner.client_id).await;
    worker_looked_again(&app, &replica).await;
    // The list reaches the worker and the partner's requests at the same moment, so a send
    // let through just before it may still be on its way when the refusal is seen: at one
    // a second, that is one request at most.
    let sent = arrived(&receiver);
    assert!(
        sent <= known + 1,
        "sent to a disabled partner: {sent} after {known}"
    );
    assert_eq!(
        left,
        8 - sent,
        "its events wait, should it be enabled again"
    );
}

async fn nothing_more_about_an_erased_customer_is_sent(backend: Backend) {
    let app = TestApp::spawn_with(backend, bystander).await;
    let replica = app.second_intake(sender).await;
    let partner = Partner::new(&app).await;
    let receiver = Receiver::start().await;
    let made = partner
        .create(&app, json!({"url": receiver.url, "rate_limit": 1}))
        .await;
    assert_eq!(made.status, 201, "{}", made.body);
    let emails = queue(&app, &replica, &partner, 5).await;
    until_arrived(&receiver, 1).await;
    let erased = emails.last().expect("five");
    let run = intake_api(&app.intake_db.url, &["case", "erase", "--email", erased]);
    let listed = run.json();
    let reference = listed[0]["reference"].as_str().expect("erased").to_owned();
    let rest = receiver.wait_for(4).await;
    let left = until_none_claimed(&app, &partner.client_id).await;
    assert_eq!(left, 0);
    worker_looked_again(&app, &replica).await;
    assert_eq!(arrived(&receiver), 4, "{:?}", receiver.got());
    assert!(
        rest.iter()
            .all(|r| r.event()["data"]["reference"] != Value::String(reference.clone())),
        "an event of the erased case was sent"
    );
}

/// Back-offs long enough that a send which waited for one could not pass for "at once".
fn slow_retries(c: &mut Config) {
    webhook_settings(c);
    c.webhooks.backoff = Duration::from_millis(30_000);
}

async fn redeliver_and_recover_send_at_once_while_the_endpoint_waits_out_its_failures(
    backend: Backend,
) {
    let app = TestApp::spawn_with(backend, slow_retries).await;
    let replica = app.second_intake(slow_retries).await;
    let partner = Partner::new(&app).await;
    let receiver = Receiver::start().await;
    let made = partner.create(&app, json!({"url": receiver.url})).await;
    assert_eq!(made.status, 201, "{}", made.body);
    let id = id_of(&made);
    receiver.answer(500);
    queue(&app, &replica, &partner, 1).await;
    until_arrived(&receiver, 1).await;
    eventually(Duration::from_secs(10), || async {
        (unsent(&app, &partner.client_id).await == (1, 0)).then_some(())
    })
    .await
    .expect("the failed try was recorded");
    receiver.answer(200);

    // Asked at the replica that failed and now waits: "at once" is well within the 24 s
    // the next try and the endpoint's wait are at least.
    let since = (chrono::Utc::now() - chrono::Duration::minutes(5)).to_rfc3339();
    let recover = format!(
        "{}/partners/external/webhooks/endpoints/{id}/recover",
        replica.base_url()
    );
    let reply = app
        .http
        .post(&recover)
        .header("authorization", &partner.bearer)
        .json(&json!({"since": since}))
        .send()
        .await
        .expect("recover");
    assert_eq!(reply.status(), 202);
    let body: Value = reply.json().await.expect("json");
    assert_eq!(body["queued"], 1, "{body}");
    within_seconds(&receiver, 1).await;

    // The same for a redelivery, asked from the CLI.
    receiver.answer(500);
    queue(&app, &replica, &partner, 1).await;
    until_arrived(&receiver, 3).await;
    let failing = eventually(Duration::from_secs(10), || async {
        let listed = partner
            .send(
                &app,
                Method::GET,
                "/partners/external/webhooks/deliveries?status=failing",
                None,
            )
            .await;
        listed.body["data"][0]["id"].as_str().map(str::to_owned)
    })
    .await
    .expect("the new event failing");
    receiver.answer(200);
    intake_api::cli::webhook(
        &app.intake.config,
        WebhookCommand::Redeliver {
            delivery_id: failing,
        },
    )
    .await
    .expect("webhook redeliver");
    within_seconds(&receiver, 2).await;
}

/// Waits, a few seconds at most, until `n` events were acknowledged.
async fn within_seconds(receiver: &Receiver, n: usize) {
    let got = eventually(Duration::from_secs(8), || async {
        let delivered = receiver.delivered().len();
        (delivered >= n).then_some(())
    })
    .await;
    assert!(got.is_some(), "not sent at once: {:?}", receiver.got());
}

on_both_backends!(
    nothing_more_is_sent_to_an_endpoint_once_its_disable_is_acknowledged,
    nothing_more_is_sent_to_a_removed_endpoint_once_its_removal_is_acknowledged,
    a_new_url_gets_the_rest_and_the_old_one_nothing_more_once_the_change_is_acknowledged,
    nothing_claimed_goes_out_once_an_operator_disables_the_endpoint,
    once_a_rotation_without_grace_is_answered_every_event_is_signed_with_the_new_secret_alone,
    a_disabled_partner_is_sent_nothing_more_once_the_intake_api_knows,
    nothing_more_about_an_erased_customer_is_sent,
    redeliver_and_recover_send_at_once_while_the_endpoint_waits_out_its_failures,
);
