//! Everything the intake-api reads from and writes to its database. Each change and the
//! event describing it are written in one transaction.

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, Utc};
use sea_orm::RuntimeErr;
use sea_orm::sea_query::Expr;
use sea_orm::sea_query::OnConflict;
use sea_orm::sea_query::{LockBehavior, LockType, Order, Query};
use sea_orm::sqlx::{self, Row};
use sea_orm::{
    ActiveValue::Set, ColumnTrait, ConnectionTrait, DatabaseConnection, DbBackend, DbErr,
    EntityTrait, PaginatorTrait, QueryFilter, QueryOrder, QuerySelect, SqlErr, TransactionTrait,
};
use serde::Serialize;
use std::sync::Arc;
use uuid::Uuid;

use crate::domain::enquiry::{Email, Enquiry};
use crate::entity::{case, case_event, redirect_token, submission};
use crate::kept::KeptConnections;
use crate::turns::Turns;

/// The longest one unit of database work may take: past it the request answers 503
/// instead of hanging on a database that stopped answering.
pub const DB_TIMEOUT: Duration = Duration::from_secs(8);

async fn bounded<T>(work: impl std::future::Future<Output = Result<T, DbErr>>) -> Result<T, DbErr> {
    tokio::time::timeout(DB_TIMEOUT, work)
        .await
        .unwrap_or_else(|_| Err(DbErr::Custom("database operation timed out".into())))
}

/// Whether a submission made a new case or updated one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// A new case.
    Created,
    /// An existing case, updated.
    Updated,
}

/// The result of an accepted enquiry.
#[derive(Debug, Clone)]
pub struct Submitted {
    /// Created or updated.
    pub outcome: Outcome,
    /// The case reference.
    pub reference: String,
}

/// A new case reference: 12 random digits, so references reveal nothing about volume.
fn new_reference() -> String {
    let mut bytes = [0u8; 8];
    // Falling back to a UUID's randomness keeps this infallible.
    if aws_lc_rs::rand::fill(&mut bytes).is_err() {
        bytes.copy_from_slice(&Uuid::new_v4().as_bytes()[..8]);
    }
    let n = u64::from_le_bytes(bytes) % 900_000_000_000 + 100_000_000_000;
    n.to_string()
}

/// A new row's primary key: time-ordered (UUIDv7), so inserts land at the right-hand edge
/// of the key's index instead of on random pages. With random keys, every page an insert
/// touches after a checkpoint is written to the WAL whole, and the index's working set is
/// all of it; the difference grows with the tables. Ids never leave the service, so the
/// creation time they carry tells partners nothing.
fn new_row_id() -> Uuid {
    Uuid::now_v7()
}

fn enquiry_encoding(e: serde_json::Error) -> DbErr {
    DbErr::Custom(format!("enquiry encoding: {e}"))
}

fn event(
    case_id: Uuid,
    kind: &str,
    client_id: Option<&str>,
    detail: Option<serde_json::Value>,
    at: DateTime<Utc>,
) -> case_event::ActiveModel {
    case_event::ActiveModel {
        id: Set(new_row_id()),
        case_id: Set(case_id),
        kind: Set(kind.to_owned()),
        client_id: Set(client_id.map(str::to_owned)),
        detail: Set(detail),
        created_at: Set(at),
    }
}

/// Creates the case for the enquiry's brand and e-mail, or applies the enquiry to the
/// existing one; the submission is stored as sent either way. Submissions for one case run
/// one at a time, waiting for their turn before they take a connection ([`Turns`]).
pub async fn submit_enquiry(
    db: &DatabaseConnection,
    kept: Option<&KeptConnections>,
    turns: &Turns,
    enquiry: &Enquiry,
    raw_body: &str,
    client_id: &str,
    activation_delay: Duration,
) -> Result<Submitted, DbErr> {
    let key = turn_key(enquiry.brand.as_str(), enquiry.email.as_str());
    // A reference collision (a chance of the number of cases in 9 x 10^11) fails the
    // insert on its unique key: try anew with another reference.
    let mut attempts = 0;
    loop {
        attempts += 1;
        // The wait for the case's turn counts against the same bound as the work.
        let attempt = async {
            let _turn = turns.wait(&key).await;
            try_submit(db, kept, enquiry, raw_body, client_id, activation_delay).await
        };
        match bounded(attempt).await {
            Err(e)
                if attempts < 3
                    && matches!(e.sql_err(), Some(SqlErr::UniqueConstraintViolation(ref m)) if m.contains("reference")) =>
            {
                continue;
            }
            other => return other,
        }
    }
}

/// What one accepted enquiry writes on PostgreSQL, as one statement and so one round trip
/// and one implicit transaction: the case upserted on its unique (brand, email) key (two
/// first submissions racing each other make one case, not two), the submission as sent and
/// the event. A case keeps its id on update, so `id = $1` tells a creation. An enquiry
/// without a product leaves an attached one in place. `bench/intake.sql` runs this same
/// statement in pgbench.
const SUBMIT_POSTGRES: &str = r#"WITH upserted AS (
    INSERT INTO "cases" ("id", "reference", "brand", "email", "status", "enquiry", "product_uuid",
        "created_at", "updated_at", "activates_at", "activated_at")
    VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7, $8, $8, $9, NULL)
    ON CONFLICT ("brand", "email") DO UPDATE SET
        "enquiry" = excluded."enquiry",
        "updated_at" = excluded."updated_at",
        "product_uuid" = COALESCE(excluded."product_uuid", "cases"."product_uuid")
    RETURNING "id", "reference"
), submitted AS (
    INSERT INTO "submissions" ("id", "case_id", "client_id", "received_at", "payload")
    SELECT $10, "id", $11, $8, $12 FROM upserted
), logged AS (
    INSERT INTO "case_events" ("id", "case_id", "kind", "client_id", "detail", "created_at")
    SELECT $13, "id", CASE WHEN "id" = $1 THEN 'created' ELSE 'updated' END, $11, NULL, $8
    FROM upserted
)
SELECT "id", "reference" FROM upserted"#;

/// One submission's values, as both ways of writing it need them.
struct NewSubmission<'a> {
    case_id: Uuid,
    reference: String,
    enquiry: &'a Enquiry,
    raw_body: &'a str,
    client_id: &'a str,
    now: DateTime<Utc>,
    activates_at: DateTime<Utc>,
}

async fn try_submit(
    db: &DatabaseConnection,
    kept: Option<&KeptConnections>,
    enquiry: &Enquiry,
    raw_body: &str,
    client_id: &str,
    activation_delay: Duration,
) -> Result<Submitted, DbErr> {
    let now = Utc::now();
    let new = NewSubmission {
        case_id: new_row_id(),
        reference: new_reference(),
        enquiry,
        raw_body,
        client_id,
        now,
        activates_at: now
            + chrono::Duration::from_std(activation_delay)
                .map_err(|e| DbErr::Custom(format!("activation delay: {e}")))?,
    };
    let (case_id, reference) = match kept {
        Some(kept) => upsert_in_one_statement(kept, &new).await?,
        // Boxed: the ORM's futures take tens of kilobytes, which every layer of the request's
        // future above this one would otherwise hold and copy, on PostgreSQL too.
        None => Box::pin(upsert_in_transaction(db, &new)).await?,
    };
    let outcome = if case_id == new.case_id {
        Outcome::Created
    } else {
        Outcome::Updated
    };
    Ok(Submitted { outcome, reference })
}

async fn upsert_in_one_statement(
    kept: &KeptConnections,
    new: &NewSubmission<'_>,
) -> Result<(Uuid, String), DbErr> {
    // The enquiry goes as JSON text that PostgreSQL parses into `jsonb` itself, which spares
    // building, cloning and encoding a `serde_json::Value` per request.
    let enquiry_json = serde_json::to_string(new.enquiry).map_err(enquiry_encoding)?;
    let row = kept
        .run(async |conn| {
            sqlx::query(SUBMIT_POSTGRES)
                .bind(new.case_id)
                .bind(new.reference.as_str())
                .bind(new.enquiry.brand.as_str())
                .bind(new.enquiry.email.as_str())
                .bind(case::STATUS_PENDING)
                .bind(enquiry_json)
                .bind(new.enquiry.product_uuid)
                .bind(new.now)
                .bind(new.activates_at)
                .bind(new_row_id())
                .bind(new.client_id)
                .bind(new.raw_body)
                .bind(new_row_id())
                .fetch_one(conn)
                .await
        })
        .await
        .map_err(sqlx_err)?;
    let id = row.try_get("id").map_err(sqlx_err)?;
    let reference = row.try_get("reference").map_err(sqlx_err)?;
    Ok((id, reference))
}

/// The same writes through the ORM, for SQLite (no data-modifying CTEs): the upsert, then
/// the submission and the event, in one transaction.
async fn upsert_in_transaction(
    db: &DatabaseConnection,
    new: &NewSubmission<'_>,
) -> Result<(Uuid, String), DbErr> {
    let enquiry_json = serde_json::to_value(new.enquiry).map_err(enquiry_encoding)?;
    let txn = db.begin().await?;
    let upserted = case::Entity::insert(case::ActiveModel {
        id: Set(new.case_id),
        reference: Set(new.reference.clone()),
        brand: Set(new.enquiry.brand.as_str().to_owned()),
        email: Set(new.enquiry.email.as_str().to_owned()),
        status: Set(case::STATUS_PENDING.to_owned()),
        enquiry: Set(enquiry_json),
        product_uuid: Set(new.enquiry.product_uuid),
        created_at: Set(new.now),
        updated_at: Set(new.now),
        activates_at: Set(new.activates_at),
        activated_at: Set(None),
    })
    .on_conflict(
        OnConflict::columns([case::Column::Brand, case::Column::Email])
            .update_columns([case::Column::Enquiry, case::Column::UpdatedAt])
            .value(
                case::Column::ProductUuid,
                Expr::cust(r#"COALESCE(excluded."product_uuid", "cases"."product_uuid")"#),
            )
            .to_owned(),
    )
    .exec_with_returning(&txn)
    .await?;
    submission::Entity::insert(submission::ActiveModel {
        id: Set(new_row_id()),
        case_id: Set(upserted.id),
        client_id: Set(new.client_id.to_owned()),
        received_at: Set(new.now),
        payload: Set(new.raw_body.to_owned()),
    })
    .exec_without_returning(&txn)
    .await?;
    let kind = if upserted.id == new.case_id {
        "created"
    } else {
        "updated"
    };
    case_event::Entity::insert(event(upserted.id, kind, Some(new.client_id), None, new.now))
        .exec_without_returning(&txn)
        .await?;
    txn.commit().await?;
    Ok((upserted.id, upserted.reference))
}

/// A case that has just become active.
#[derive(Debug, Clone)]
pub struct Activated {
    /// Its brand.
    pub brand: String,
    /// How late the activation was.
    pub lag: Duration,
}

/// Cases one activation pass takes at most. Every activated case is a row of the event
/// insert, with its own bind parameters, and a statement takes at most 65,535 of them on
/// PostgreSQL (32,766 on SQLite): a pass over a backlog of all due cases at once failed and
/// rolled back for ever. A full pass is followed at once by the next.
pub const ACTIVATION_BATCH: usize = 500;

/// Activates the cases that are due, the longest due first, at most [`ACTIVATION_BATCH`]
/// of them, in one statement. On PostgreSQL it claims the due rows with `FOR UPDATE SKIP
/// LOCKED`, so replicas running this at once share a backlog instead of queueing on each
/// other, and a case a submission is updating is left for the next pass. The events go in
/// the same transaction: a case is never activated twice, nor without its event.
pub async fn activate_due(db: &DatabaseConnection) -> Result<Vec<Activated>, DbErr> {
    bounded(activate_due_now(db)).await
}

async fn activate_due_now(db: &DatabaseConnection) -> Result<Vec<Activated>, DbErr> {
    let now = Utc::now();
    let backend = db.get_database_backend();
    let mut due = Query::select();
    due.column(case::Column::Id)
        .from(case::Entity)
        .and_where(case::Column::Status.eq(case::STATUS_PENDING))
        .and_where(case::Column::ActivatesAt.lte(now))
        .order_by(case::Column::ActivatesAt, Order::Asc)
        .limit(ACTIVATION_BATCH as u64);
    if backend == DbBackend::Postgres {
        // SQLite has no row locks; its one writer at a time claims the rows there.
        due.lock_with_behavior(LockType::Update, LockBehavior::SkipLocked);
    }
    let mut activate = Query::update();
    activate
        .table(case::Entity)
        .values([
            (case::Column::Status, case::STATUS_ACTIVE.into()),
            (case::Column::ActivatedAt, now.into()),
        ])
        .and_where(case::Column::Id.in_subquery(due))
        .returning(Query::returning().columns([
            case::Column::Id,
            case::Column::Brand,
            case::Column::ActivatesAt,
        ]));
    let txn = db.begin().await?;
    let activated = txn
        .query_all_raw(backend.build(&activate))
        .await?
        .iter()
        .map(|row| {
            Ok((
                row.try_get::<Uuid>("", "id")?,
                row.try_get::<String>("", "brand")?,
                row.try_get::<DateTime<Utc>>("", "activates_at")?,
            ))
        })
        .collect::<Result<Vec<_>, DbErr>>()?;
    if !activated.is_empty() {
        case_event::Entity::insert_many(
            activated
                .iter()
                .map(|(id, _, _)| event(*id, "activated", None, None, now)),
        )
        .exec_without_returning(&txn)
        .await?;
    }
    txn.commit().await?;
    Ok(activated
        .into_iter()
        .map(|(_, brand, activates_at)| Activated {
            lag: (now - activates_at).to_std().unwrap_or_default(),
            brand,
        })
        .collect())
}

/// The case attach applies to: the most recently updated one for the e-mail, any brand.
pub async fn latest_case_for_email(
    db: &DatabaseConnection,
    kept: Option<&KeptConnections>,
    email: &Email,
) -> Result<Option<CaseRef>, DbErr> {
    let found: Option<(Uuid, String, String)> = bounded(async {
        match kept {
            Some(kept) => kept
                .run(async |conn| {
                    sqlx::query_as(LATEST_CASE_POSTGRES)
                        .bind(email.as_str())
                        .fetch_optional(conn)
                        .await
                })
                .await
                .map_err(sqlx_err),
            // Boxed, as in `try_submit`: the ORM's future is large.
            None => {
                Box::pin(
                    case::Entity::find()
                        .select_only()
                        .columns([
                            case::Column::Id,
                            case::Column::Reference,
                            case::Column::Brand,
                        ])
                        .filter(case::Column::Email.eq(email.as_str()))
                        .order_by_desc(case::Column::UpdatedAt)
                        .into_tuple()
                        .one(db),
                )
                .await
            }
        }
    })
    .await?;
    Ok(found.map(|(id, reference, brand)| CaseRef {
        id,
        reference,
        brand,
        email: email.as_str().to_owned(),
    }))
}

/// The case attach works on, found by `latest_case_for_email`; `bench/attach.sql` runs the
/// same statement in pgbench.
const LATEST_CASE_POSTGRES: &str = r#"SELECT "id", "reference", "brand" FROM "cases" WHERE "email" = $1 ORDER BY "updated_at" DESC LIMIT 1"#;

/// What attaching a product needs to know of a case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaseRef {
    /// The case's id.
    pub id: Uuid,
    /// Its reference.
    pub reference: String,
    /// Its brand.
    pub brand: String,
    /// Its customer's e-mail address, as stored.
    pub email: String,
}

/// The key writes to one case take turns on ([`Turns`]), by its brand and e-mail: the same
/// for submissions and attaches, so a case's writes hold one connection between them.
fn turn_key<'a>(brand: &'a str, email: &'a str) -> (&'a str, &'a str) {
    (brand, email)
}

/// A redirect link's token as stored beside the product it carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedirectRecord {
    /// The product the link continues with.
    pub product_uuid: Uuid,
    /// The token's hash ([`hash_token`]); the token itself is never stored.
    pub token_hash: String,
    /// How long the token can be redeemed.
    pub ttl: Duration,
}

fn sqlx_err(e: sqlx::Error) -> DbErr {
    DbErr::Query(RuntimeErr::SqlxError(Arc::new(e)))
}

/// A fresh single-use token for a redirect link, and the hash stored for it.
pub fn new_redirect_token() -> Result<(String, String), DbErr> {
    let mut bytes = [0u8; 32];
    aws_lc_rs::rand::fill(&mut bytes).map_err(|_| DbErr::Custom("no randomness".into()))?;
    let token = URL_SAFE_NO_PAD.encode(bytes);
    Ok((token.clone(), hash_token(&token)))
}

/// How a redirect token is stored: SHA-256, base64url. The token is 256 random bits, so a
/// plain hash is enough to make a stolen table useless.
pub fn hash_token(token: &str) -> String {
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, token.as_bytes());
    URL_SAFE_NO_PAD.encode(digest.as_ref())
}

/// Records the product on the case and stores the redirect token's hash. Like submissions,
/// writes to one case take turns before they take a connection ([`Turns`]); the wait counts
/// against the same bound as the work.
pub async fn attach_product(
    db: &DatabaseConnection,
    kept: Option<&KeptConnections>,
    turns: &Turns,
    case: &CaseRef,
    record: RedirectRecord,
    client_id: &str,
) -> Result<(), DbErr> {
    bounded(async {
        let _turn = turns.wait(&turn_key(&case.brand, &case.email)).await;
        attach_product_now(db, kept, case.id, record, client_id).await
    })
    .await
}

/// What attaching a product writes on PostgreSQL, as one statement: the redirect token's
/// hash, the product on the case and the event. `bench/attach.sql` runs the same statement.
const ATTACH_POSTGRES: &str = r#"WITH token AS (
    INSERT INTO "redirect_tokens" ("id", "case_id", "token_hash", "product_uuid", "created_at",
        "expires_at", "used_at")
    VALUES ($1, $2, $3, $4, $5, $6, NULL)
), updated AS (
    UPDATE "cases" SET "product_uuid" = $4, "updated_at" = $5 WHERE "id" = $2
)
INSERT INTO "case_events" ("id", "case_id", "kind", "client_id", "detail", "created_at")
VALUES ($7, $2, 'product_attached', $8, $9::jsonb, $5)"#;

async fn attach_product_now(
    db: &DatabaseConnection,
    kept: Option<&KeptConnections>,
    case_id: Uuid,
    record: RedirectRecord,
    client_id: &str,
) -> Result<(), DbErr> {
    let RedirectRecord {
        product_uuid,
        token_hash,
        ttl,
    } = record;
    let now = Utc::now();
    let expires_at =
        now + chrono::Duration::from_std(ttl).map_err(|e| DbErr::Custom(format!("ttl: {e}")))?;
    let detail = serde_json::json!({"product_uuid": product_uuid});
    if let Some(kept) = kept {
        kept.run(async |conn| {
            sqlx::query(ATTACH_POSTGRES)
                .bind(new_row_id())
                .bind(case_id)
                .bind(token_hash)
                .bind(product_uuid)
                .bind(now)
                .bind(expires_at)
                .bind(new_row_id())
                .bind(client_id)
                .bind(detail.to_string())
                .execute(conn)
                .await
        })
        .await
        .map_err(sqlx_err)?;
        return Ok(());
    }
    // Boxed, as in `try_submit`: the ORM's futures are large.
    Box::pin(async {
        let txn = db.begin().await?;
        redirect_token::Entity::insert(redirect_token::ActiveModel {
            id: Set(new_row_id()),
            case_id: Set(case_id),
            token_hash: Set(token_hash),
            product_uuid: Set(product_uuid),
            created_at: Set(now),
            expires_at: Set(expires_at),
            used_at: Set(None),
        })
        .exec_without_returning(&txn)
        .await?;
        case::Entity::update_many()
            .col_expr(case::Column::ProductUuid, Expr::value(product_uuid))
            .col_expr(case::Column::UpdatedAt, Expr::value(now))
            .filter(case::Column::Id.eq(case_id))
            .exec(&txn)
            .await?;
        case_event::Entity::insert(event(
            case_id,
            "product_attached",
            Some(client_id),
            Some(detail),
            now,
        ))
        .exec_without_returning(&txn)
        .await?;
        txn.commit().await
    })
    .await
}

/// Redeems a redirect token: valid once, before it expires. Returns the case it continues.
pub async fn redeem_redirect_token<C: ConnectionTrait>(
    db: &C,
    token: &str,
) -> Result<Option<Uuid>, DbErr> {
    let now = Utc::now();
    let used = redirect_token::Entity::update_many()
        .col_expr(redirect_token::Column::UsedAt, Expr::value(now))
        .filter(redirect_token::Column::TokenHash.eq(hash_token(token)))
        .filter(redirect_token::Column::UsedAt.is_null())
        .filter(redirect_token::Column::ExpiresAt.gt(now))
        .exec_with_returning(db)
        .await?;
    Ok(used.first().map(|t| t.case_id))
}

/// A case as `intake-api case show` prints it.
#[derive(Debug, Serialize)]
pub struct CaseView {
    /// The reference.
    pub reference: String,
    /// The brand.
    pub brand: String,
    /// `pending_activation` or `active`.
    pub status: String,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// When it was last changed.
    pub updated_at: DateTime<Utc>,
    /// When it becomes (or became) active.
    pub activates_at: DateTime<Utc>,
    /// When it became active.
    pub activated_at: Option<DateTime<Utc>>,
    /// The attached eligibility-engine product.
    pub product_uuid: Option<Uuid>,
    /// How many enquiries were accepted for it.
    pub submissions: u64,
    /// Its history, oldest first.
    pub events: Vec<EventView>,
}

/// One entry of a case's history.
#[derive(Debug, Serialize)]
pub struct EventView {
    /// What happened.
    pub kind: String,
    /// When.
    pub at: DateTime<Utc>,
    /// The partner that caused it.
    pub client_id: Option<String>,
}

/// Looks a case up by reference, with its submission count and history.
pub async fn show_case(
    db: &DatabaseConnection,
    reference: &str,
) -> Result<Option<CaseView>, DbErr> {
    let Some(c) = case::Entity::find()
        .filter(case::Column::Reference.eq(reference))
        .one(db)
        .await?
    else {
        return Ok(None);
    };
    let submissions = submission::Entity::find()
        .filter(submission::Column::CaseId.eq(c.id))
        .count(db)
        .await?;
    let events = case_event::Entity::find()
        .filter(case_event::Column::CaseId.eq(c.id))
        .order_by_asc(case_event::Column::CreatedAt)
        .all(db)
        .await?
        .into_iter()
        .map(|e| EventView {
            kind: e.kind,
            at: e.created_at,
            client_id: e.client_id,
        })
        .collect();
    Ok(Some(CaseView {
        reference: c.reference,
        brand: c.brand,
        status: c.status,
        created_at: c.created_at,
        updated_at: c.updated_at,
        activates_at: c.activates_at,
        activated_at: c.activated_at,
        product_uuid: c.product_uuid,
        submissions,
        events,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_are_twelve_digits_and_differ() {
        let a = new_reference();
        let b = new_reference();
        assert_eq!(a.len(), 12);
        assert!(a.bytes().all(|c| c.is_ascii_digit()));
        assert_ne!(a, b);
    }

    /// Each layer of a request's future holds the layer below and moves it at least once, so
    /// what these futures weigh is copied several times per request: sqlx's acquire and the
    /// ORM's futures inside them are boxed. Unboxed, each of these took 29-31 KiB.
    #[tokio::test]
    async fn the_futures_of_a_request_stay_small() {
        const SMALL: usize = 4 * 1024;
        let db = intake_shared::db::connect("sqlite::memory:", 1)
            .await
            .unwrap();
        let pool = sqlx::PgPool::connect_lazy("postgres://nobody@127.0.0.1:1/none").unwrap();
        let kept = KeptConnections::new(pool, 4, Duration::from_secs(1));
        let turns = Turns::new(4);
        let enquiry = crate::domain::enquiry::tests::purchase_enquiry();
        let delay = Duration::from_secs(1);
        let submit = submit_enquiry(&db, Some(&kept), &turns, &enquiry, "{}", "c", delay);
        let lookup = latest_case_for_email(&db, Some(&kept), &enquiry.email);
        let case = CaseRef {
            id: Uuid::nil(),
            reference: "000000000000".into(),
            brand: "brand_a".into(),
            email: enquiry.email.as_str().into(),
        };
        let record = RedirectRecord {
            product_uuid: Uuid::nil(),
            token_hash: String::new(),
            ttl: delay,
        };
        let attach = attach_product(&db, Some(&kept), &turns, &case, record, "c");
        let sizes = [
            ("submit_enquiry", std::mem::size_of_val(&submit)),
            ("latest_case_for_email", std::mem::size_of_val(&lookup)),
            ("attach_product", std::mem::size_of_val(&attach)),
        ];
        assert!(sizes.iter().all(|(_, size)| *size <= SMALL), "{sizes:?}");
    }

    #[test]
    fn redirect_tokens_are_stored_only_as_hashes() {
        let (token, hash) = new_redirect_token().unwrap();
        assert_ne!(token, hash);
        assert_eq!(hash_token(&token), hash);
        assert_eq!(token.len(), 43);
    }
}
