//! Webhooks to a real local receiver: signed as Standard Webhooks has it, queued with the
//! change they report, retried while the receiver is down and delivered in order per case,
//! a 410 disabling the endpoint, a slow partner holding up no other, replicas sending each
//! event once, secret rotation signing with both secrets, and secrets sealed at rest.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU16, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_lc_rs::hmac;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use intake_api::cli::WebhookCommand;
use intake_api::config::Config;
use poem::web::Data;
use poem::{EndpointExt, Request, Route, handler, post};
use serde_json::{Value, json};

use crate::helpers::{
    ATTACH, Backend, INTAKE, PRODUCT, Running, TestApp, TestDb, eventually, fresh_email, post_raw,
    purchase_enquiry, with,
};
use test_support::on_both_backends;

/// One request the receiver got.
#[derive(Debug, Clone)]
pub(crate) struct Received {
    /// Its `webhook-id`.
    pub(crate) id: String,
    timestamp: String,
    signature: String,
    body: String,
    /// The status it was answered with.
    status: u16,
    /// When it arrived.
    pub(crate) at: std::time::Instant,
}

impl Received {
    pub(crate) fn event(&self) -> Value {
        serde_json::from_str(&self.body).expect("a JSON body")
    }

    /// Its `webhook-signature` header: one signature per secret, space-separated.
    pub(crate) fn signatures(&self) -> Vec<&str> {
        self.signature.split(' ').collect()
    }
}

struct ReceiverState {
    got: Mutex<Vec<Received>>,
    status: AtomicU16,
    /// Requests that came in, answered or not yet.
    arrived: AtomicUsize,
    /// When not 0, every this many-th request is answered 503 whatever `status` says.
    fail_every: AtomicUsize,
    /// While false, requests wait before they are recorded and answered (a slow partner).
    open: tokio::sync::watch::Sender<bool>,
    /// When not 0, the `Retry-After` seconds sent with every answer.
    retry_after: AtomicU16,
}

#[handler]
async fn receive(req: &Request, body: String, state: Data<&Arc<ReceiverState>>) -> poem::Response {
    let n = state.arrived.fetch_add(1, Ordering::SeqCst) + 1;
    let mut open = state.open.subscribe();
    let _ = open.wait_for(|open| *open).await;
    let header = |name: &str| {
        req.headers()
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default()
    };
    let every = state.fail_every.load(Ordering::SeqCst);
    let status = if every > 0 && n.is_multiple_of(every) {
        503
    } else {
        state.status.load(Ordering::SeqCst)
    };
    // Read with the status, before the request is seen as received: a test that changes
    // the answer once it sees a request changes the next answer, never half of this one.
    let wait = state.retry_after.load(Ordering::SeqCst);
    state.got.lock().unwrap().push(Received {
        id: header("webhook-id"),
        timestamp: header("webhook-timestamp"),
        signature: header("webhook-signature"),
        body,
        status,
        at: std::time::Instant::now(),
    });
    let mut answer =
        poem::Response::builder().status(poem::http::StatusCode::from_u16(status).unwrap());
    if wait > 0 {
        answer = answer.header("retry-after", wait.to_string());
    }
    answer.finish()
}

/// A partner's webhook receiver on a free local port.
pub(crate) struct Receiver {
    /// Its URL, http on the loopback.
    pub(crate) url: String,
    state: Arc<ReceiverState>,
    _server: Running,
}

impl Receiver {
    pub(crate) async fn start() -> Self {
        let state = Arc::new(ReceiverState {
            got: Mutex::default(),
            status: AtomicU16::new(200),
            arrived: AtomicUsize::new(0),
            fail_every: AtomicUsize::new(0),
            open: tokio::sync::watch::channel(true).0,
            retry_after: AtomicU16::new(0),
        });
        let app = Route::new().at("/hook", post(receive)).data(state.clone());
        let server = Running::serve_locally(app).await;
        let port = server.port;
        Self {
            url: format!("http://127.0.0.1:{port}/hook"),
            state,
            _server: server,
        }
    }

    /// Requests that came in, answered or not yet.
    pub(crate) fn arrived(&self) -> usize {
        self.state.arrived.load(Ordering::SeqCst)
    }

    /// While `held`, requests wait unanswered, as at a slow partner.
    pub(crate) fn hold(&self, held: bool) {
        self.state.open.send_replace(!held);
    }

    pub(crate) fn answer(&self, status: u16) {
        self.state.status.store(status, Ordering::SeqCst);
    }

    /// Answers with `Retry-After: secs` from now on (0: without).
    pub(crate) fn ask_to_wait(&self, secs: u16) {
        self.state.retry_after.store(secs, Ordering::SeqCst);
    }

    pub(crate) fn got(&self) -> Vec<Received> {
        self.state.got.lock().unwrap().clone()
    }

    /// The event types acknowledged (2xx), in the order they arrived.
    pub(crate) fn delivered(&self) -> Vec<String> {
        self.got()
            .iter()
            .filter(|r| (200..300).contains(&r.status))
            .map(|r| r.event()["type"].as_str().unwrap().to_owned())
            .collect()
    }

    /// Waits until `n` events were acknowledged; the acknowledged ones.
    pub(crate) async fn wait_for(&self, n: usize) -> Vec<Received> {
        self.wait_longer_for(n, Duration::from_secs(20)).await
    }

    /// Waits up to `timeout` until `n` events were acknowledged; the acknowledged ones.
    async fn wait_longer_for(&self, n: usize, timeout: Duration) -> Vec<Received> {
        eventually(timeout, || async {
            let got: Vec<Received> = self
                .got()
                .into_iter()
                .filter(|r| (200..300).contains(&r.status))
                .collect();
            (got.len() >= n).then_some(got)
        })
        .await
        .unwrap_or_else(|| panic!("{n} deliveries never arrived; got {:?}", self.got()))
    }
}

/// Both services, with webhooks allowed to local http receivers and quick retries.
async fn spawn(backend: Backend) -> TestApp {
    TestApp::spawn_with(backend, webhook_settings).await
}

pub(crate) fn webhook_settings(c: &mut Config) {
    c.webhooks.insecure.allow = true;
    c.webhooks.poll = Duration::from_millis(50);
    c.webhooks.backoff = Duration::from_millis(100);
}

async fn webhook(app: &TestApp, command: WebhookCommand) -> Value {
    intake_api::cli::webhook(&app.intake.config, command)
        .await
        .expect("webhook command")
}

/// The app's partner's last ten events as `webhook deliveries` lists them (failed ones only
/// if `failed`).
async fn deliveries(app: &TestApp, failed: bool) -> Value {
    webhook(
        app,
        WebhookCommand::Deliveries {
            client_id: app.client_id.clone(),
            failed,
            limit: 10,
        },
    )
    .await
}

/// Sets `client_id`'s endpoint to `receiver`; its secret.
async fn set(app: &TestApp, client_id: &str, receiver: &Receiver) -> String {
    let out = webhook(
        app,
        WebhookCommand::Set {
            client_id: client_id.to_owned(),
            url: receiver.url.clone(),
            show_secret: false,
        },
    )
    .await;
    out["secret"].as_str().expect("a secret").to_owned()
}

/// Gives the app's partner a new secret, the old one signing beside it for `grace_secs`;
/// what `webhook rotate-secret` prints.
async fn rotate(app: &TestApp, grace_secs: u64) -> Value {
    webhook(
        app,
        WebhookCommand::RotateSecret {
            client_id: app.client_id.clone(),
            endpoint: None,
            grace_secs,
            show_secret: false,
        },
    )
    .await
}

/// The signatures Standard Webhooks expects of `received` with `secret`, computed here.
pub(crate) fn expected_signature(secret: &str, received: &Received) -> String {
    let key = STANDARD
        .decode(secret.strip_prefix("whsec_").expect("whsec_ prefix"))
        .expect("base64 secret");
    let key = hmac::Key::new(hmac::HMAC_SHA256, &key);
    let signed = format!("{}.{}.{}", received.id, received.timestamp, received.body);
    format!(
        "v1,{}",
        STANDARD.encode(hmac::sign(&key, signed.as_bytes()).as_ref())
    )
}

async fn events_arrive_signed_with_thin_payloads(backend: Backend) {
    let app = spawn(backend).await;
    let receiver = Receiver::start().await;
    let secret = set(&app, &app.client_id, &receiver).await;
    assert!(secret.starts_with("whsec_"), "{secret}");

    let email = fresh_email();
    let reference = app.submit(&purchase_enquiry("brand_a", &email)).await;
    assert_eq!(app.attach(&email, PRODUCT).await.status, 200);
    let got = receiver.wait_for(2).await;
    assert_eq!(receiver.delivered(), ["case.created", "product.attached"]);

    let created = got[0].event();
    assert_eq!(created["type"], "case.created");
    assert_eq!(created["data"]["reference"], reference.as_str());
    assert_eq!(created["data"]["brand"], "brand_a");
    assert!(
        ["pending_activation", "active"].contains(&created["data"]["status"].as_str().unwrap())
    );
    chrono::DateTime::parse_from_rfc3339(created["timestamp"].as_str().unwrap())
        .expect("an RFC 3339 timestamp");
    assert_eq!(got[1].event()["data"]["product_uuid"], PRODUCT);
    for received in &got {
        assert!(received.id.starts_with("msg_"), "{}", received.id);
        let sent_at: i64 = received.timestamp.parse().expect("seconds");
        assert!((chrono::Utc::now().timestamp() - sent_at).abs() < 300);
        assert_eq!(received.signature, expected_signature(&secret, received));
    }
    assert_ne!(got[0].id, got[1].id);

    // The operator sees both delivered.
    let deliveries = deliveries(&app, false).await;
    let states: Vec<&str> = deliveries
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["state"].as_str().unwrap())
        .collect();
    assert_eq!(states, ["delivered", "delivered"]);

    // Sent again on request, under the same webhook-id, so the partner can tell.
    let again = webhook(
        &app,
        WebhookCommand::Redeliver {
            delivery_id: got[0].id.clone(),
        },
    )
    .await;
    assert_eq!(again["queued"], 1);
    let all = receiver.wait_for(3).await;
    assert_eq!(all[2].id, got[0].id);
    assert_eq!(all[2].body, got[0].body);
    let unknown = intake_api::cli::webhook(
        &app.intake.config,
        WebhookCommand::Redeliver {
            delivery_id: "msg_00000000000070008000000000000000".into(),
        },
    )
    .await;
    assert!(unknown.is_err());
}

async fn a_receiver_down_gets_every_event_later_in_order(backend: Backend) {
    let app = spawn(backend).await;
    let receiver = Receiver::start().await;
    set(&app, &app.client_id, &receiver).await;
    receiver.answer(503);

    let email = fresh_email();
    let enquiry = purchase_enquiry("brand_a", &email);
    app.submit(&enquiry).await;
    app.submit(&enquiry).await;
    assert_eq!(app.attach(&email, PRODUCT).await.status, 200);
    // Tried, refused, and tried again while down.
    eventually(Duration::from_secs(20), || async {
        (receiver.got().iter().filter(|r| r.status == 503).count() >= 3).then_some(())
    })
    .await
    .expect("retries while the receiver is down");

    receiver.answer(200);
    receiver.wait_for(3).await;
    assert_eq!(
        receiver.delivered(),
        ["case.created", "case.updated", "product.attached"]
    );
    // While down, never a later event of the case before an earlier one was delivered.
    let first_types: Vec<String> = receiver
        .got()
        .iter()
        .map(|r| r.event()["type"].as_str().unwrap().to_owned())
        .collect();
    let first_update = first_types.iter().position(|t| t == "case.updated");
    let created_delivered = receiver.got().iter().position(|r| r.status == 200).unwrap();
    assert!(
        first_update.is_none_or(|u| u > created_delivered),
        "{first_types:?}"
    );
}

async fn a_410_disables_the_endpoint(backend: Backend) {
    let app = spawn(backend).await;
    let receiver = Receiver::start().await;
    set(&app, &app.client_id, &receiver).await;
    receiver.answer(410);
    let enquiry = purchase_enquiry("brand_a", &fresh_email());
    app.submit(&enquiry).await;
    let list = eventually(Duration::from_secs(20), || async {
        let list = webhook(&app, WebhookCommand::List { client_id: None }).await;
        (!list[0]["disabled_at"].is_null()).then_some(list)
    })
    .await
    .expect("the endpoint was disabled");
    assert_eq!(list[0]["client_id"], app.client_id.as_str());
    assert_eq!(list[0]["disabled_reason"], "the endpoint answered 410 Gone");
    let failed = deliveries(&app, true).await;
    assert_eq!(failed[0]["last_status"], 410);

    // A disabled endpoint is sent nothing, and its partner's events are not kept for it:
    // it said it is gone. Setting the endpoint again re-enables it for what comes next.
    app.submit(&enquiry).await;
    receiver.answer(200);
    let again = webhook(
        &app,
        WebhookCommand::Set {
            client_id: app.client_id.clone(),
            url: receiver.url.clone(),
            show_secret: true,
        },
    )
    .await;
    assert!(again.get("secret").is_none(), "{again}");
    assert_eq!(
        app.submit(&with(enquiry.clone(), json!({"first_name": "Again"})))
            .await
            .len(),
        12
    );
    receiver.wait_for(1).await;
    assert_eq!(receiver.delivered(), ["case.updated"]);
    assert_eq!(receiver.got().len(), 2, "{:?}", receiver.got());
}

async fn a_slow_partner_delays_no_other(backend: Backend) {
    let app = spawn(backend).await;
    let slow = Receiver::start().await;
    let fast = Receiver::start().await;
    let (other_id, other_secret) = app.auth.create_client(INTAKE).await;
    let other = format!(
        "Bearer {}",
        app.auth.token(&other_id, &other_secret, INTAKE).await
    );
    set(&app, &app.client_id, &slow).await;
    set(&app, &other_id, &fast).await;
    // The slow partner's receiver takes its requests but does not answer yet.
    slow.state.open.send_replace(false);

    app.submit(&purchase_enquiry("brand_a", &fresh_email()))
        .await;
    let theirs = app
        .post(
            crate::helpers::ENQUIRY,
            Some(&other),
            &purchase_enquiry("brand_b", &fresh_email()),
        )
        .await;
    assert_eq!(theirs.status, 201, "{:?}", theirs.body);
    fast.wait_for(1).await;
    assert!(slow.got().is_empty(), "the slow partner answered");
    slow.state.open.send_replace(true);
    slow.wait_for(1).await;
}

/// Two replicas drain one partner's backlog together, once its endpoint is back: every event
/// acknowledged once, each case's in order.
async fn two_replicas_share_a_backlog_each_event_once_in_order(backend: Backend) {
    let app = spawn(backend).await;
    let replica = app.second_intake(webhook_settings).await;
    let receiver = Receiver::start().await;
    set(&app, &app.client_id, &receiver).await;
    receiver.answer(503);
    // Half the cases on each replica, three events each: a backlog both replicas are woken
    // for and claim from.
    const CASES: usize = 30;
    let mut references = Vec::new();
    for n in 0..CASES {
        let body = purchase_enquiry("brand_a", &fresh_email());
        let on = if n % 2 == 0 { &app.intake } else { &replica };
        let mut reference = String::new();
        for name in ["First", "Second", "Third"] {
            let reply = app
                .enquiry_on(on, &with(body.clone(), json!({"first_name": name})))
                .await;
            assert!([200, 201].contains(&reply.status), "{:?}", reply.body);
            reference = reply.body["reference"].as_str().unwrap().to_owned();
        }
        references.push(reference);
    }
    eventually(Duration::from_secs(20), || async {
        (receiver.state.arrived.load(Ordering::SeqCst) > 0).then_some(())
    })
    .await
    .expect("tries while the endpoint is down");
    receiver.answer(200);
    let delivered = receiver
        .wait_longer_for(CASES * 3, Duration::from_secs(90))
        .await;
    let mut ids = HashSet::new();
    for r in &delivered {
        assert!(ids.insert(r.id.as_str()), "{} acknowledged twice", r.id);
    }
    for reference in references {
        let types: Vec<String> = delivered
            .iter()
            .map(Received::event)
            .filter(|e| e["data"]["reference"] == reference.as_str())
            .map(|e| e["type"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(
            types,
            ["case.created", "case.updated", "case.updated"],
            "{reference}"
        );
    }
}

async fn a_rotated_secret_signs_beside_the_old_one(backend: Backend) {
    let app = spawn(backend).await;
    let receiver = Receiver::start().await;
    let old = set(&app, &app.client_id, &receiver).await;
    let rotated = rotate(&app, 3600).await;
    let new = rotated["secret"].as_str().unwrap().to_owned();
    assert_ne!(new, old);
    assert!(rotated["previous_secret_until"].is_string(), "{rotated}");

    app.submit(&purchase_enquiry("brand_a", &fresh_email()))
        .await;
    let got = receiver.wait_for(1).await;
    let signatures: Vec<&str> = got[0].signature.split(' ').collect();
    assert_eq!(
        signatures,
        [
            expected_signature(&new, &got[0]),
            expected_signature(&old, &got[0])
        ]
    );

    // Without a grace period the old secret stops at once.
    let rotated = rotate(&app, 0).await;
    let newest = rotated["secret"].as_str().unwrap().to_owned();
    app.submit(&purchase_enquiry("brand_a", &fresh_email()))
        .await;
    let got = receiver.wait_for(2).await;
    assert_eq!(got[1].signature, expected_signature(&newest, &got[1]));
}

async fn only_partners_on_the_case_hear_of_it(backend: Backend) {
    let app = spawn(backend).await;
    let mine = Receiver::start().await;
    let theirs = Receiver::start().await;
    let (other_id, _) = app.auth.create_client(INTAKE).await;
    set(&app, &app.client_id, &mine).await;
    set(&app, &other_id, &theirs).await;
    app.submit(&purchase_enquiry("brand_a", &fresh_email()))
        .await;
    mine.wait_for(1).await;
    // The other partner's endpoint was asked nothing; one more event of ours proves the
    // worker has been round since.
    app.submit(&purchase_enquiry("brand_a", &fresh_email()))
        .await;
    mine.wait_for(2).await;
    assert!(theirs.got().is_empty(), "{:?}", theirs.got());
}

async fn each_case_is_heard_of_in_order_under_concurrency(backend: Backend) {
    let app = spawn(backend).await;
    let receiver = Receiver::start().await;
    set(&app, &app.client_id, &receiver).await;
    // Every third request fails, so retries interleave with first tries.
    receiver.state.fail_every.store(3, Ordering::SeqCst);
    const CASES: usize = 12;
    let mut writers = tokio::task::JoinSet::new();
    for _ in 0..CASES {
        let (http, bearer) = (app.http.clone(), app.bearer());
        let (enquiry_url, attach_url) = (app.url(crate::helpers::ENQUIRY), app.url(ATTACH));
        writers.spawn(async move {
            let email = fresh_email();
            let body = purchase_enquiry("brand_a", &email);
            let mut reference = String::new();
            for name in ["First", "Second", "Third"] {
                let body = with(body.clone(), json!({"first_name": name}));
                let reply =
                    post_raw(&http, &enquiry_url, Some(&bearer), body.to_string().into()).await;
                assert!([200, 201].contains(&reply.status), "{reply:?}");
                reference = reply.body["reference"].as_str().unwrap().to_owned();
            }
            let attach = json!({"email": email, "product_uuid": PRODUCT});
            let reply =
                post_raw(&http, &attach_url, Some(&bearer), attach.to_string().into()).await;
            assert_eq!(reply.status, 200, "{reply:?}");
            reference
        });
    }
    let references = writers.join_all().await;
    receiver
        .wait_longer_for(CASES * 4, Duration::from_secs(60))
        .await;
    for reference in references {
        let tries: Vec<Received> = receiver
            .got()
            .into_iter()
            .filter(|r| r.event()["data"]["reference"] == reference.as_str())
            .collect();
        let delivered: Vec<String> = tries
            .iter()
            .filter(|r| r.status == 200)
            .map(|r| r.event()["type"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(
            delivered,
            [
                "case.created",
                "case.updated",
                "case.updated",
                "product.attached"
            ],
            "{reference}"
        );
        // No event of the case was tried before the one before it was delivered.
        let mut acknowledged = HashSet::new();
        let mut order: Vec<&str> = Vec::new();
        for r in &tries {
            if !order.contains(&r.id.as_str()) {
                if let Some(previous) = order.last() {
                    assert!(acknowledged.contains(previous), "{reference}: {tries:?}");
                }
                order.push(&r.id);
            }
            if r.status == 200 {
                acknowledged.insert(r.id.as_str());
            }
        }
    }
}

async fn an_event_made_while_idle_leaves_without_waiting_for_the_poll(backend: Backend) {
    // The worker looks for due events once an hour: only the wake-up of the change that
    // queued the event can send it within the wait below.
    let app = TestApp::spawn_with(backend, |c| {
        webhook_settings(c);
        c.webhooks.poll = Duration::from_millis(3_600_000);
    })
    .await;
    let receiver = Receiver::start().await;
    set(&app, &app.client_id, &receiver).await;
    for n in 1..=3 {
        let email = fresh_email();
        app.submit(&purchase_enquiry("brand_a", &email)).await;
        receiver.wait_for(2 * n - 1).await;
        assert_eq!(app.attach(&email, PRODUCT).await.status, 200);
        receiver.wait_for(2 * n).await;
    }
}

async fn a_replica_that_stopped_mid_send_leaves_its_events_to_another(backend: Backend) {
    let lease = |c: &mut Config| {
        webhook_settings(c);
        c.webhooks.lease = Duration::from_secs(11);
    };
    // The replica that keeps running looks every 2 s; the stopping one, woken by its own
    // writes, claims their events first.
    let app = TestApp::spawn_with(backend, |c| {
        lease(c);
        c.webhooks.poll = Duration::from_millis(2_000);
    })
    .await;
    let stopping = app.second_intake(lease).await;
    let receiver = Receiver::start().await;
    set(&app, &app.client_id, &receiver).await;
    // The stopping replica's sends reach the receiver, which holds them unanswered.
    receiver.state.open.send_replace(false);
    for _ in 0..3 {
        let reply = app
            .enquiry_on(&stopping, &purchase_enquiry("brand_a", &fresh_email()))
            .await;
        assert_eq!(reply.status, 201, "{:?}", reply.body);
    }
    eventually(Duration::from_secs(20), || async {
        (receiver.state.arrived.load(Ordering::SeqCst) >= 3).then_some(())
    })
    .await
    .expect("the stopping replica sent its events");
    stopping.server.stop().await;
    receiver.state.open.send_replace(true);
    // Once its lease has run out, the replica still running sends them.
    receiver.wait_longer_for(3, Duration::from_secs(60)).await;
    let deliveries = eventually(Duration::from_secs(20), || async {
        let list = deliveries(&app, false).await;
        let all_delivered = list
            .as_array()
            .unwrap()
            .iter()
            .all(|d| d["state"] == "delivered");
        all_delivered.then_some(list)
    })
    .await
    .expect("every event recorded as delivered");
    assert_eq!(deliveries.as_array().unwrap().len(), 3, "{deliveries}");
    let ids: HashSet<String> = receiver.got().into_iter().map(|r| r.id).collect();
    assert_eq!(ids.len(), 3, "{:?}", receiver.got());
}

/// `client_id`'s endpoint secrets as the database holds them: current, then previous.
async fn stored_secrets(app: &TestApp, client_id: &str) -> (String, Option<String>) {
    use sea_orm::{ConnectionTrait, Database, Statement};
    let conn = Database::connect(app.intake_db.url.as_str())
        .await
        .expect("database");
    let row = conn
        .query_one_raw(Statement::from_string(
            conn.get_database_backend(),
            format!(
                "SELECT secret, previous_secret FROM webhook_endpoints WHERE client_id = \
                 '{client_id}'"
            ),
        ))
        .await
        .expect("query")
        .expect("an endpoint");
    let stored = (
        row.try_get("", "secret").expect("secret"),
        row.try_get("", "previous_secret").expect("previous_secret"),
    );
    let _ = conn.close().await;
    stored
}

async fn secrets_are_sealed_at_rest_and_clear_ones_at_start(backend: Backend) {
    let app = spawn(backend).await;
    let receiver = Receiver::start().await;
    let old = set(&app, &app.client_id, &receiver).await;
    let in_the_clear = |stored: &str, secret: &str| {
        stored.contains(secret.strip_prefix("whsec_").expect("whsec_ prefix"))
    };
    let (secret, previous) = stored_secrets(&app, &app.client_id).await;
    assert!(secret.starts_with("sealed1:"), "{secret}");
    assert!(!in_the_clear(&secret, &old) && previous.is_none());
    let rotated = rotate(&app, 3600).await;
    let new = rotated["secret"].as_str().unwrap().to_owned();
    let (secret, previous) = stored_secrets(&app, &app.client_id).await;
    let previous = previous.expect("the previous secret, still signing");
    assert!(secret.starts_with("sealed1:") && previous.starts_with("sealed1:"));
    assert!(!in_the_clear(&secret, &new) && !in_the_clear(&previous, &old));

    // A secret in clear, as the first builds of 0.2.0 kept one, is sealed when a server
    // starts, and signs as before.
    let clear = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    {
        use sea_orm::{ConnectionTrait, Database};
        let conn = Database::connect(app.intake_db.url.as_str())
            .await
            .expect("database");
        conn.execute_unprepared(&format!(
            "UPDATE webhook_endpoints SET secret = '{clear}', previous_secret = NULL, \
             previous_secret_until = NULL"
        ))
        .await
        .expect("stored in clear");
        let _ = conn.close().await;
    }
    let _replica = app.second_intake(webhook_settings).await;
    let (secret, previous) = stored_secrets(&app, &app.client_id).await;
    assert!(secret.starts_with("sealed1:"), "{secret}");
    assert!(!in_the_clear(&secret, clear) && previous.is_none());
    app.submit(&purchase_enquiry("brand_a", &fresh_email()))
        .await;
    let got = receiver.wait_for(1).await;
    assert_eq!(got[0].signature, expected_signature(clear, &got[0]));
}

on_both_backends!(
    events_arrive_signed_with_thin_payloads,
    a_receiver_down_gets_every_event_later_in_order,
    a_410_disables_the_endpoint,
    a_slow_partner_delays_no_other,
    two_replicas_share_a_backlog_each_event_once_in_order,
    a_rotated_secret_signs_beside_the_old_one,
    only_partners_on_the_case_hear_of_it,
    each_case_is_heard_of_in_order_under_concurrency,
    an_event_made_while_idle_leaves_without_waiting_for_the_poll,
    a_replica_that_stopped_mid_send_leaves_its_events_to_another,
    secrets_are_sealed_at_rest_and_clear_ones_at_start,
);

#[tokio::test]
async fn endpoints_must_be_public_https_unless_allowed() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    for url in ["http://example.com/hook", "https://127.0.0.1/hook"] {
        let refused = intake_api::cli::webhook(
            &app.intake.config,
            WebhookCommand::Set {
                client_id: app.client_id.clone(),
                url: url.into(),
                show_secret: false,
            },
        )
        .await;
        assert!(refused.is_err(), "{url} accepted");
    }
}

/// A claim reads what it returns, not the backlog: against a million pending events of one
/// partner (some cases with an event waiting for its retry and a later one held back, some
/// events out on a lease), the plan of a claim of 64 touches a few hundred rows and pages.
#[tokio::test]
async fn a_claim_reads_only_what_it_returns_at_a_million_pending() {
    use sea_orm::{ConnectionTrait, Database};
    const BULK: uuid::Uuid = uuid::uuid!("0192f3c4-d5e6-7a8b-9c0d-1e2f3a4b5c6d");

    let db = TestDb::intake(Backend::Postgres).await;
    let conn = Database::connect(db.url.as_str()).await.expect("database");
    for sql in [
        // The backlog: one event per case, oldest first.
        "INSERT INTO webhook_deliveries (id, client_id, endpoint_id, case_id, event_type, \
         created_at, next_attempt_at, attempts) SELECT gen_random_uuid(), 'bulk', \
         '0192f3c4-d5e6-7a8b-9c0d-1e2f3a4b5c6d', gen_random_uuid(), \
         'case.created', t, t, 0 FROM (SELECT now() - interval '2 hours' + n * interval '1 ms' \
         AS t FROM generate_series(1, 1000000) AS n) AS times",
        // Cases whose first event waits for a retry, their next event held back with it.
        "WITH waiting AS (SELECT gen_random_uuid() AS case_id, now() - interval '3 hours' AS t \
         FROM generate_series(1, 1000)) INSERT INTO webhook_deliveries (id, client_id, \
         endpoint_id, case_id, event_type, created_at, next_attempt_at, attempts) SELECT \
         gen_random_uuid(), 'bulk', '0192f3c4-d5e6-7a8b-9c0d-1e2f3a4b5c6d', case_id, kind, t + step, now() + interval '1 hour', tries FROM waiting, (VALUES \
         ('case.created', interval '0 s', 3), ('case.updated', interval '1 s', 0)) AS e(kind, \
         step, tries)",
        // Events out on another replica's lease.
        "INSERT INTO webhook_deliveries (id, client_id, endpoint_id, case_id, event_type, \
         created_at, next_attempt_at, locked_until, attempts) SELECT gen_random_uuid(), 'bulk', \
         '0192f3c4-d5e6-7a8b-9c0d-1e2f3a4b5c6d', gen_random_uuid(), 'case.created', now() - interval '4 hours', now() + interval '1 \
         minute', now() + interval '1 minute', 1 FROM generate_series(1, 64)",
        "ANALYZE webhook_deliveries",
    ] {
        conn.execute_unprepared(sql).await.expect(sql);
    }
    let store = intake_api::store::CaseStore::new(
        conn,
        4,
        intake_api::store::Timing {
            activation_delay: Duration::from_secs(900),
            redirect_ttl: Duration::from_secs(900),
            sandbox_activation_delay: Duration::from_secs(900),
        },
    );
    let plan = store
        .claim_plan(BULK, 64)
        .await
        .expect("explained")
        .expect("a PostgreSQL plan");
    let top = &plan[0]["Plan"];
    assert_eq!(top["Actual Rows"], 64, "{plan:#}");
    let pages =
        top["Shared Hit Blocks"].as_u64().unwrap() + top["Shared Read Blocks"].as_u64().unwrap();
    assert!(pages < 3_000, "{pages} pages read: {plan:#}");
    // No step of the plan reads more than a few hundred rows.
    let mut nodes = vec![top];
    while let Some(node) = nodes.pop() {
        let rows =
            node["Actual Rows"].as_u64().unwrap_or(0) * node["Actual Loops"].as_u64().unwrap_or(1);
        let removed = node["Rows Removed by Filter"].as_u64().unwrap_or(0);
        assert!(
            rows + removed < 2_000,
            "{} read {rows} rows and passed over {removed}: {plan:#}",
            node["Node Type"]
        );
        nodes.extend(node["Plans"].as_array().into_iter().flatten());
    }
    // The claim itself takes the oldest due events, none of them held back or leased.
    let claimed = store
        .claim_deliveries(BULK, 64, Duration::from_secs(60))
        .await
        .expect("claimed");
    assert_eq!(claimed.len(), 64);
    assert!(
        claimed
            .iter()
            .all(|e| e.attempts == 1 && e.event_type == "case.created")
    );
    store.close().await;
}
