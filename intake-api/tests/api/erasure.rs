//! Erasing a customer on request (`intake-api case erase`), and the retention of
//! submissions as sent (`INTAKE_SUBMISSION_RETENTION_DAYS`).

use std::time::Duration;

use chrono::Utc;
use intake_api::entity::{
    case, case_event, idempotency_key, redirect_token, submission, webhook_delivery,
    webhook_endpoint,
};
use sea_orm::{ActiveModelTrait, ColumnTrait, Database, EntityTrait, Iterable, QueryFilter, Set};
use serde_json::{Value, json};
use test_support::on_both_backends;

use crate::cli::intake_api;
use crate::helpers::{
    ATTACH, Backend, ENQUIRY, PRODUCT, Reply, TestApp, eventually, fresh_email, message,
    purchase_enquiry, query_column, with,
};

on_both_backends!(
    erasing_a_customer_leaves_no_trace_of_them_and_keeps_the_case,
    after_erasure_a_replayed_keyed_request_reveals_neither_reference_nor_link,
    retention_empties_old_submissions_and_keeps_the_rest,
);

/// Every value of every column of `E`'s table, as text.
pub(crate) async fn table_values<E: EntityTrait>(url: &str, backend: Backend) -> Vec<String> {
    let table = E::default().table_name().to_owned();
    let mut values = Vec::new();
    for column in E::Column::iter() {
        let column = sea_orm::IdenStatic::as_str(&column);
        // SQLite keeps UUIDs as blobs, which are not text: those as hex.
        let sql = match backend {
            Backend::Postgres => {
                format!(r#"SELECT COALESCE(CAST("{column}" AS TEXT), '') AS v FROM "{table}""#)
            }
            Backend::Sqlite => format!(
                r#"SELECT COALESCE(CASE typeof("{column}") WHEN 'blob' THEN hex("{column}") ELSE CAST("{column}" AS TEXT) END, '') AS v FROM "{table}""#
            ),
        };
        values.extend(query_column(url, &sql, "v").await);
    }
    values
}

/// Every value of every column of every intake table, as text.
async fn every_value(url: &str, backend: Backend) -> Vec<String> {
    let mut values = table_values::<case::Entity>(url, backend).await;
    values.extend(table_values::<submission::Entity>(url, backend).await);
    values.extend(table_values::<case_event::Entity>(url, backend).await);
    values.extend(table_values::<redirect_token::Entity>(url, backend).await);
    values.extend(table_values::<idempotency_key::Entity>(url, backend).await);
    values.extend(table_values::<webhook_endpoint::Entity>(url, backend).await);
    values.extend(table_values::<webhook_delivery::Entity>(url, backend).await);
    values
}

async fn erasing_a_customer_leaves_no_trace_of_them_and_keeps_the_case(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let email = fresh_email();
    let person = json!({
        "first_name": "Erasmus",
        "last_name": "Forgetmenot",
        "mobile_number": "+44 7700 900999",
    });
    let enquiry = with(purchase_enquiry("brand_a", &email), person.clone());
    let first = app.submit(&enquiry).await;
    let second = app
        .submit(&with(purchase_enquiry("brand_b", &email), person.clone()))
        .await;
    let link = app.attach(&email, PRODUCT).await;
    assert_eq!(link.status, 200, "{}", link.body);
    let redirect =
        reqwest::Url::parse(link.body["redirect"].as_str().expect("redirect")).expect("a URL");
    let token = redirect
        .query_pairs()
        .find(|(k, _)| k == "token")
        .map(|(_, v)| v.into_owned())
        .expect("a token");
    let someone_else = fresh_email();
    app.submit(&purchase_enquiry("brand_a", &someone_else))
        .await;

    let run = intake_api(
        &app.intake_db.url,
        &[
            "case",
            "erase",
            "--email",
            &format!(" {} ", email.to_uppercase()),
            "--actor",
            "DPO ticket 4711",
        ],
    );
    let mut erased: Vec<Value> = run.json().as_array().expect("a list").clone();
    erased.sort_by_key(|c| c["reference"].as_str().map(str::to_owned));
    let mut expected = vec![
        json!({"reference": first, "brand": "brand_a", "requested_by": "DPO ticket 4711"}),
        json!({"reference": second, "brand": "brand_b", "requested_by": "DPO ticket 4711"}),
    ];
    expected.sort_by_key(|c| c["reference"].as_str().map(str::to_owned));
    assert_eq!(erased, expected);

    // Partners no longer see the case, and the customer's link no longer works.
    assert_eq!(
        app.case_status(&first, Some(&app.bearer())).await.status,
        404
    );
    assert_eq!(app.attach(&email, PRODUCT).await.status, 404);
    // Bound to both brands: the 410 must come from the erasure, not from the link's brand.
    let portal = app.portal_bearer_of("brand_a,brand_b").await;
    assert_eq!(app.redeem(&portal, &token).await.status, 410);

    // Nothing in the database names the customer any more.
    let values = every_value(&app.intake_db.url, backend).await;
    for trace in [
        email.as_str(),
        "Erasmus",
        "Forgetmenot",
        "900999",
        "7700900999",
    ] {
        let found: Vec<&String> = values.iter().filter(|v| v.contains(trace)).collect();
        assert!(found.is_empty(), "{trace} is still stored: {found:?}");
    }
    assert!(values.iter().any(|v| v.contains(&someone_else)));

    // The reference still resolves, for the business, to the erased case and who asked.
    let shown = intake_api(&app.intake_db.url, &["case", "show", &first, "-o", "json"]).json();
    assert_eq!(shown["reference"], first.as_str());
    assert_eq!(shown["brand"], "brand_a");
    assert_eq!(shown["erased"], true);
    assert_eq!(shown["submissions"], 0);
    let events = shown["events"].as_array().expect("events");
    let last = events.last().expect("an event");
    assert_eq!(last["kind"], "erased");
    assert!(last.to_string().contains("DPO ticket 4711"), "{last}");

    // Erasing again finds nothing, and says so without failing.
    let again = intake_api(&app.intake_db.url, &["case", "erase", "--email", &email]);
    assert_eq!(again.json(), json!([]));

    // A later enquiry for the address is a new customer's.
    let reply = app.enquiry(&enquiry).await;
    assert_eq!(reply.status, 201, "{}", reply.body);
    assert_ne!(reply.body["reference"], first.as_str());
}

async fn after_erasure_a_replayed_keyed_request_reveals_neither_reference_nor_link(
    backend: Backend,
) {
    let app = TestApp::spawn(backend).await;
    let email = fresh_email();
    let enquiry = purchase_enquiry("brand_a", &email);
    let attach = json!({"email": email, "product_uuid": PRODUCT});
    let (submit_key, attach_key) = (fresh_key(), fresh_key());
    let submitted = keyed(&app, ENQUIRY, &submit_key, &enquiry).await;
    assert_eq!(submitted.status, 201, "{}", submitted.body);
    let reference = submitted.body["reference"]
        .as_str()
        .expect("reference")
        .to_owned();
    let attached = keyed(&app, ATTACH, &attach_key, &attach).await;
    assert_eq!(attached.status, 200, "{}", attached.body);
    let link = attached.body["redirect"]
        .as_str()
        .expect("redirect")
        .to_owned();
    // Another customer's keyed answer is not theirs to lose.
    let other = purchase_enquiry("brand_a", &fresh_email());
    let other_key = fresh_key();
    let kept = keyed(&app, ENQUIRY, &other_key, &other).await;
    assert_eq!(kept.status, 201, "{}", kept.body);

    intake_api(&app.intake_db.url, &["case", "erase", "--email", &email]).json();

    // The keys stay spent, so a late retry cannot make the case again, and say why.
    let erased = message(
        "The answer to this Idempotency-Key was erased with the customer's data; send a new \
         request with a new key.",
    );
    for (path, key, body) in [
        (ENQUIRY, &submit_key, &enquiry),
        (ATTACH, &attach_key, &attach),
    ] {
        let replayed = keyed(&app, path, key, body).await;
        assert_eq!((replayed.status, &replayed.body), (409, &erased), "{path}");
        assert!(!replayed.body.to_string().contains(&reference));
    }
    let stored = table_values::<idempotency_key::Entity>(&app.intake_db.url, backend).await;
    for gone in [&reference, &link] {
        let found: Vec<&String> = stored
            .iter()
            .filter(|v| v.contains(gone.as_str()))
            .collect();
        assert!(found.is_empty(), "{gone} is still stored: {found:?}");
    }
    let again = keyed(&app, ENQUIRY, &other_key, &other).await;
    assert_eq!((again.status, &again.body), (201, &kept.body));

    // A new key is a new request: a new customer's case.
    let fresh = keyed(&app, ENQUIRY, &fresh_key(), &enquiry).await;
    assert_eq!(fresh.status, 201, "{}", fresh.body);
    assert_ne!(fresh.body["reference"], reference.as_str());
}

/// POSTs `body` to `path` with the app's partner token and `key`.
async fn keyed(app: &TestApp, path: &str, key: &str, body: &Value) -> Reply {
    let resp = app
        .http
        .post(format!("{}{path}", app.intake.base_url()))
        .header("authorization", app.bearer())
        .header("idempotency-key", key)
        .json(body)
        .send()
        .await
        .expect("request sent");
    Reply::read(resp).await
}

fn fresh_key() -> String {
    uuid::Uuid::new_v4().to_string()
}

async fn retention_empties_old_submissions_and_keeps_the_rest(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let email = fresh_email();
    let reference = app.submit(&purchase_enquiry("brand_a", &email)).await;

    // A submission received three days ago on the same case, as an earlier run would have
    // left it: its id is time-ordered, so it is made for that time.
    let db = Database::connect(app.intake_db.url.as_str())
        .await
        .expect("database");
    let case = case::Entity::find()
        .filter(case::Column::Reference.eq(reference.as_str()))
        .one(&db)
        .await
        .expect("query")
        .expect("the case");
    let then = Utc::now() - chrono::Duration::days(3);
    let old_id = uuid::Uuid::new_v7(uuid::Timestamp::from_unix(
        uuid::NoContext,
        u64::try_from(then.timestamp()).expect("after 1970"),
        0,
    ));
    submission::ActiveModel {
        id: Set(old_id),
        case_id: Set(case.id),
        client_id: Set(app.client_id.clone()),
        received_at: Set(then),
        payload: Set(r#"{"first_name":"Oldbody"}"#.into()),
        kind: Set(submission::KIND_ENQUIRY.into()),
    }
    .insert(&db)
    .await
    .expect("old submission");

    // A replica with a two-day retention empties it, and only it.
    let replica = app
        .second_intake(|c| c.submission_retention_days = Some(2))
        .await;
    let emptied = eventually(Duration::from_secs(20), || async {
        let row = submission::Entity::find_by_id(old_id)
            .one(&db)
            .await
            .ok()
            .flatten()?;
        row.payload.is_empty().then_some(row)
    })
    .await;
    assert!(emptied.is_some(), "the old submission was not emptied");
    let kept = submission::Entity::find()
        .filter(submission::Column::CaseId.eq(case.id))
        .filter(submission::Column::Id.ne(old_id))
        .all(&db)
        .await
        .expect("query");
    assert_eq!(kept.len(), 1);
    assert!(kept[0].payload.contains(&email), "{}", kept[0].payload);
    let events = case_event::Entity::find()
        .filter(case_event::Column::CaseId.eq(case.id))
        .filter(case_event::Column::Kind.eq("submissions_purged"))
        .all(&db)
        .await
        .expect("query");
    assert_eq!(events.len(), 1, "{events:?}");
    // The partner still sees its case.
    assert_eq!(
        app.case_status(&reference, Some(&app.bearer()))
            .await
            .status,
        200
    );
    drop(replica);
    let _ = db.close().await;
}
