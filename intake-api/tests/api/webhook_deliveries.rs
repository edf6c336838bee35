//! Partners' delivery history through the API: each event for each endpoint with every try
//! (status or error, duration, next try), filtered and paged; one event sent again, and an
//! endpoint's failed events recovered since a time, keeping their `webhook-id`s. Another
//! partner can neither read, resend nor recover them, nor tell them from ids that name
//! nothing; bad parameters and bodies get a 422 naming them.

use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};

use crate::helpers::{Backend, INTAKE, Reply, TestApp, eventually, fresh_email};
use crate::webhook_endpoints::{Partner, id_of};
use crate::webhooks::{Receiver, webhook_settings};
use test_support::on_both_backends;

const DELIVERIES: &str = "/partners/external/webhooks/deliveries";
const ENDPOINTS: &str = "/partners/external/webhooks/endpoints";

on_both_backends!(
    a_partner_reads_its_history_and_sends_events_again,
    another_partner_finds_nothing_of_it,
    bad_parameters_and_bodies_are_refused_with_what_is_wrong,
    a_cursor_is_good_only_for_the_partner_it_was_given_to,
);

/// A page of `partner`'s history for `query` (`?status=...`, or empty).
async fn history(app: &TestApp, partner: &Partner, query: &str) -> Value {
    let reply = partner
        .send(app, Method::GET, &format!("{DELIVERIES}{query}"), None)
        .await;
    assert_eq!(reply.status, 200, "{query}: {}", reply.body);
    reply.body
}

fn ids(page: &Value) -> Vec<String> {
    page["data"]
        .as_array()
        .expect("a list")
        .iter()
        .map(|d| d["id"].as_str().unwrap().to_owned())
        .collect()
}

/// `partner`'s answers to reading the delivery at `path`, then to sending it again.
async fn read_and_resend(app: &TestApp, partner: &Partner, path: &str) -> (Reply, Reply) {
    let read = partner.send(app, Method::GET, path, None).await;
    let resent = partner
        .send(app, Method::POST, &format!("{path}/redeliver"), None)
        .await;
    (read, resent)
}

/// A time `secs` seconds from now, as RFC 3339 writes it (negative: ago).
fn at(secs: i64) -> String {
    (chrono::Utc::now() + chrono::Duration::seconds(secs))
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

async fn a_partner_reads_its_history_and_sends_events_again(backend: Backend) {
    let app = TestApp::spawn_with(backend, |c| {
        webhook_settings(c);
        c.webhooks.retry = Duration::from_secs(2);
    })
    .await;
    let partner = Partner::new(&app).await;
    let receiver = Receiver::start().await;
    receiver.answer(500);
    let made = partner.create(&app, json!({"url": receiver.url})).await;
    assert_eq!(made.status, 201, "{}", made.body);
    let endpoint = id_of(&made);

    // Every try fails until the retry window passes: the event is given up on, and the
    // history shows each try.
    partner.enquire(&app, &fresh_email()).await;
    let failed = eventually(Duration::from_secs(20), || async {
        let page = history(&app, &partner, "?status=failed").await;
        (!ids(&page).is_empty()).then_some(page)
    })
    .await
    .expect("the event was given up on");
    let event = &failed["data"][0];
    let id = event["id"].as_str().unwrap().to_owned();
    assert!(id.starts_with("msg_") && id.len() == 36, "{event}");
    assert_eq!(event["endpoint_id"], endpoint.as_str());
    assert_eq!(event["event_type"], "case.created");
    assert_eq!(event["last_status"], 500);
    assert_eq!(event["next_attempt_at"], Value::Null);
    let tries = event["attempt_count"].as_u64().unwrap();
    assert!(tries >= 2, "{event}");
    let one = format!("{ENDPOINTS}/{endpoint}/deliveries/{id}");
    let detail = partner.send(&app, Method::GET, &one, None).await;
    assert_eq!(detail.status, 200, "{}", detail.body);
    let attempts = detail.body["attempts"].as_array().expect("its tries");
    assert_eq!(attempts.len() as u64, tries, "{}", detail.body);
    for (n, attempt) in attempts.iter().enumerate() {
        assert_eq!(attempt["attempt"], n as u64 + 1);
        assert_eq!(attempt["status"], 500);
        assert_eq!(attempt["error"], "the endpoint answered 500");
        assert!(attempt["duration_ms"].is_u64(), "{attempt}");
        assert!(attempt["attempted_at"].is_string(), "{attempt}");
    }
    assert!(
        attempts[0]["next_attempt_at"].is_string(),
        "a retry was set"
    );
    assert_eq!(attempts.last().unwrap()["next_attempt_at"], Value::Null);
    assert_eq!(receiver.got().len() as u64, tries);
    for received in receiver.got() {
        assert_eq!(received.id, id, "every try carries the event's id");
    }

    // Recovered once the endpoint answers: sent again with the same id, once.
    receiver.answer(200);
    let recover = format!("{ENDPOINTS}/{endpoint}/recover");
    let recovered = partner
        .send(
            &app,
            Method::POST,
            &recover,
            Some(json!({"since": at(-3600)})),
        )
        .await;
    assert_eq!(recovered.status, 202, "{}", recovered.body);
    assert_eq!(recovered.body, json!({"queued": 1, "more": false}));
    let got = receiver.wait_for(1).await;
    assert_eq!(got[0].id, id);
    let again = partner
        .send(
            &app,
            Method::POST,
            &recover,
            Some(json!({"since": at(-3600)})),
        )
        .await;
    assert_eq!(
        again.body,
        json!({"queued": 0, "more": false}),
        "nothing failed is left"
    );
    let delivered = eventually(Duration::from_secs(10), || async {
        let page = history(&app, &partner, "?status=delivered").await;
        (!ids(&page).is_empty()).then_some(page)
    })
    .await
    .expect("the recovered event is delivered");
    assert_eq!(ids(&delivered), std::slice::from_ref(&id));
    assert_eq!(delivered["data"][0]["last_status"], 200);
    assert!(delivered["data"][0]["delivered_at"].is_string());
    let detail = partner.send(&app, Method::GET, &one, None).await;
    let attempts = detail.body["attempts"].as_array().unwrap();
    assert_eq!(attempts.len() as u64, tries + 1);
    assert_eq!(attempts.last().unwrap()["status"], 200);
    assert_eq!(attempts.last().unwrap()["error"], Value::Null);

    // One event sent again on request, delivered or not.
    let redeliver = format!("{one}/redeliver");
    let queued = partner.send(&app, Method::POST, &redeliver, None).await;
    assert_eq!(queued.status, 202, "{}", queued.body);
    assert_eq!(queued.body["id"], id.as_str());
    let got = receiver.wait_for(2).await;
    assert_eq!(got[1].id, id);

    // Filters and pages: newest first, each event once.
    partner.enquire(&app, &fresh_email()).await;
    receiver.wait_for(3).await;
    let all = eventually(Duration::from_secs(10), || async {
        let page = history(&app, &partner, "").await;
        (ids(&page).len() == 2 && page["data"][0]["status"] == "delivered").then_some(page)
    })
    .await
    .expect("both events delivered");
    let newest = ids(&all)[0].clone();
    assert_ne!(newest, id);
    assert_eq!(all["next_cursor"], Value::Null);
    let first = history(&app, &partner, "?limit=1").await;
    assert_eq!(ids(&first), std::slice::from_ref(&newest));
    let cursor = first["next_cursor"]
        .as_str()
        .expect("a next page")
        .to_owned();
    let second = history(&app, &partner, &format!("?limit=1&cursor={cursor}")).await;
    assert_eq!(ids(&second), std::slice::from_ref(&id));
    assert_eq!(second["next_cursor"], Value::Null);
    for (query, expected) in [
        (format!("?endpoint_id={endpoint}"), 2),
        ("?event_type=case.created".to_owned(), 2),
        ("?event_type=case.activated".to_owned(), 0),
        ("?status=failed".to_owned(), 0),
        (format!("?since={}", at(-3600)), 2),
        (format!("?since={}", at(3600)), 0),
        (format!("?until={}", at(-3600)), 0),
    ] {
        let page = history(&app, &partner, &query).await;
        assert_eq!(ids(&page).len(), expected, "{query}: {page}");
    }

    // The endpoint removed: its events stay in the history, and are not sent again.
    let removed = partner
        .send(
            &app,
            Method::DELETE,
            &format!("{ENDPOINTS}/{endpoint}"),
            None,
        )
        .await;
    assert_eq!(removed.status, 204, "{}", removed.body);
    assert_eq!(ids(&history(&app, &partner, "").await).len(), 2);
    let read = partner.send(&app, Method::GET, &one, None).await;
    assert_eq!(read.status, 200, "{}", read.body);
    let refused = partner.send(&app, Method::POST, &redeliver, None).await;
    assert_eq!(refused.status, 404, "{}", refused.body);
}

async fn another_partner_finds_nothing_of_it(backend: Backend) {
    let app = TestApp::spawn_with(backend, webhook_settings).await;
    let (owner, other) = (Partner::new(&app).await, Partner::new(&app).await);
    let (receiver, theirs) = (Receiver::start().await, Receiver::start().await);
    let endpoint = id_of(&owner.create(&app, json!({"url": receiver.url})).await);
    let their_endpoint = id_of(&other.create(&app, json!({"url": theirs.url})).await);
    owner.enquire(&app, &fresh_email()).await;
    let id = receiver.wait_for(1).await[0].id.clone();

    let nobody = "msg_0192f3c4d5e67a8b9c0d1e2f3a4b5c6d";
    let not_found = |path: String| {
        let (app, other) = (&app, &other);
        async move {
            let (read, resent) = read_and_resend(app, other, &path).await;
            (read.status, read.body, resent.status, resent.body)
        }
    };
    let theirs_answer = not_found(format!("{ENDPOINTS}/{endpoint}/deliveries/{id}")).await;
    let none_answer = not_found(format!("{ENDPOINTS}/{endpoint}/deliveries/{nobody}")).await;
    let own_endpoint = not_found(format!("{ENDPOINTS}/{their_endpoint}/deliveries/{id}")).await;
    assert_eq!(theirs_answer.0, 404, "{:?}", theirs_answer);
    assert_eq!(theirs_answer, none_answer, "no oracle");
    assert_eq!(theirs_answer, own_endpoint, "no oracle");
    let recover = other
        .send(
            &app,
            Method::POST,
            &format!("{ENDPOINTS}/{endpoint}/recover"),
            Some(json!({"since": at(-3600)})),
        )
        .await;
    assert_eq!(recover.status, 404, "{}", recover.body);
    for query in ["".to_owned(), format!("?endpoint_id={endpoint}")] {
        assert!(
            ids(&history(&app, &other, &query).await).is_empty(),
            "{query}"
        );
    }
    assert_eq!(receiver.got().len(), 1, "nothing was sent again");
    assert!(theirs.got().is_empty());

    // Without the scope, nothing at all.
    let enquirer = Partner::with_scopes(&app, INTAKE, false).await;
    let refused = enquirer.send(&app, Method::GET, DELIVERIES, None).await;
    assert_eq!(refused.status, 403, "{}", refused.body);
}

async fn bad_parameters_and_bodies_are_refused_with_what_is_wrong(backend: Backend) {
    let app = TestApp::spawn_with(backend, webhook_settings).await;
    let partner = Partner::new(&app).await;
    let receiver = Receiver::start().await;
    let endpoint = id_of(&partner.create(&app, json!({"url": receiver.url})).await);
    for (query, parameter) in [
        ("?status=lost", "status"),
        ("?status=%00", "status"),
        ("?event_type=case.deleted", "event_type"),
        ("?event_type=case.created%00", "event_type"),
        ("?since=yesterday", "since"),
        ("?since=2026-13-01T00:00:00Z", "since"),
        ("?until=%1b[31m", "until"),
        (
            "?since=2026-12-02T00:00:00Z&until=2026-12-01T00:00:00Z",
            "since",
        ),
        ("?limit=0", "limit"),
        ("?limit=101", "limit"),
        ("?limit=-1", "limit"),
        ("?limit=99999999999999999999999", "limit"),
        ("?limit=ten", "limit"),
        ("?cursor=not-a-cursor", "cursor"),
        ("?cursor=%00", "cursor"),
        ("?endpoint_id=ep_nothex", "endpoint_id"),
    ] {
        let reply = partner
            .send(&app, Method::GET, &format!("{DELIVERIES}{query}"), None)
            .await;
        assert_eq!(reply.status, 422, "{query}: {}", reply.body);
        assert!(
            reply.body["errors"].get(parameter).is_some(),
            "{query}: {}",
            reply.body
        );
    }
    let recover = format!("{ENDPOINTS}/{endpoint}/recover");
    for (body, field) in [
        (json!({}), "since"),
        (json!({"since": "last week"}), "since"),
        (json!({"since": "2026-12-01T00:00:00Z\u{0}"}), "since"),
        (json!({"since": 1_700_000_000}), "since"),
        (json!({"since": at(3600)}), "since"),
        (json!({"since": at(-60), "until": at(-120)}), "since"),
        (json!({"since": at(-60), "until": 1e308}), "until"),
        (json!({"since": at(-60), "until": ""}), "until"),
        (json!({"since": at(-60), "everything": true}), "everything"),
        (json!([at(-60)]), "body"),
    ] {
        let reply = partner
            .send(&app, Method::POST, &recover, Some(body.clone()))
            .await;
        assert_eq!(reply.status, 422, "{body}: {}", reply.body);
        assert!(
            reply.body["errors"].get(field).is_some(),
            "{body}: {}",
            reply.body
        );
    }
    // Ids that name nothing are not found, whatever bytes they hold.
    for path in [
        format!("{ENDPOINTS}/{endpoint}/deliveries/msg_xyz"),
        format!("{ENDPOINTS}/{endpoint}/deliveries/%00"),
        format!("{ENDPOINTS}/ep_123/deliveries/msg_0192f3c4d5e67a8b9c0d1e2f3a4b5c6d"),
    ] {
        let (read, resent) = read_and_resend(&app, &partner, &path).await;
        assert_eq!(read.status, 404, "{path}: {}", read.body);
        assert_eq!(resent.status, 404, "{path}: {}", resent.body);
    }
    let nowhere = partner
        .send(
            &app,
            Method::POST,
            &format!("{ENDPOINTS}/ep_00000000000000000000000000000000/recover"),
            Some(json!({"since": at(-60)})),
        )
        .await;
    assert_eq!(nowhere.status, 404, "{}", nowhere.body);
}

/// A history cursor is good only for the partner it was handed to: another partner's, one
/// altered or one made up in the right shape is refused with a 422 naming it, never read
/// as the end of the list.
async fn a_cursor_is_good_only_for_the_partner_it_was_given_to(backend: Backend) {
    let app = TestApp::spawn_with(backend, webhook_settings).await;
    let (partner, other) = (Partner::new(&app).await, Partner::new(&app).await);
    let receiver = Receiver::start().await;
    partner.create(&app, json!({"url": receiver.url})).await;
    partner.enquire(&app, &fresh_email()).await;
    partner.enquire(&app, &fresh_email()).await;
    receiver.wait_for(2).await;
    let first = history(&app, &partner, "?limit=1").await;
    let cursor = first["next_cursor"]
        .as_str()
        .expect("a next page")
        .to_owned();
    assert_eq!(
        ids(&history(&app, &partner, &format!("?limit=1&cursor={cursor}")).await).len(),
        1
    );

    let mut altered = cursor.clone().into_bytes();
    altered[5] = if altered[5] == b'A' { b'B' } else { b'A' };
    let altered = String::from_utf8(altered).unwrap();
    let made_up = "A".repeat(cursor.len());
    for (who, query) in [
        (&other, format!("?cursor={cursor}")),
        (&partner, format!("?cursor={altered}")),
        (&partner, format!("?cursor={made_up}")),
    ] {
        let reply = who
            .send(&app, Method::GET, &format!("{DELIVERIES}{query}"), None)
            .await;
        assert_eq!(reply.status, 422, "{query}: {}", reply.body);
        assert!(
            reply.body["errors"].get("cursor").is_some(),
            "{}",
            reply.body
        );
    }
}
