//! Accepting an enquiry: the case created or updated, the submission kept as sent, the event.

use chrono::{DateTime, Utc};
use sea_orm::sea_query::{Expr, OnConflict};
use sea_orm::sqlx::Row;
use sea_orm::sqlx::postgres::PgRow;
use sea_orm::{ActiveValue::Set, DbBackend, DbErr, EntityTrait, SqlErr, Statement};
use uuid::Uuid;

use super::idempotency::{Keyed, answer_statement, store_answer};
use super::outbox::{hears_of, log_event};
use super::reused::{Reused, decode_error};
use super::{CaseStore, StoreError, bounded, event, later, new_row_id, submission_row};
use crate::domain::Enquiry;
use crate::entity::{case, submission};

/// Whether a write made a new case (or, for a referral, the partner's first referral of
/// the customer) or met one it had.
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

/// How many references a new case may draw before giving up: a collision has a chance of
/// the number of cases in 9 x 10^11, so a third draw means something else is wrong.
const REFERENCE_DRAWS: u32 = 3;

/// A new case reference: 12 random digits, so references reveal nothing about volume.
pub(super) fn new_reference() -> String {
    let mut bytes = [0u8; 8];
    // Falling back to a UUID's randomness keeps this infallible.
    if aws_lc_rs::rand::fill(&mut bytes).is_err() {
        bytes.copy_from_slice(&Uuid::new_v4().as_bytes()[..8]);
    }
    let n = u64::from_le_bytes(bytes) % 900_000_000_000 + 100_000_000_000;
    n.to_string()
}

/// What one accepted enquiry writes on PostgreSQL, as one statement and so one round trip
/// and one implicit transaction: the case upserted on its unique (brand, email, sandbox) key
/// (two first submissions racing each other make one case, not two; a sandbox client's
/// enquiry makes or changes only a sandbox case), the submission as sent and
/// the event, and the event queued for every partner with a webhook endpoint and a
/// submission on the case (the submitter's own is written by this same statement, which
/// cannot see it yet). A case keeps its id on update, so `id = $1` tells a creation. An
/// enquiry without a product leaves an attached one in place; the first enquiry on a
/// referred case completes it, to activate after the delay as a new case would. `bench/intake.sql` runs this same
/// statement in pgbench.
pub(super) const SUBMIT_POSTGRES: &str = concat!(
    r#"WITH upserted AS (
    INSERT INTO "cases" ("id", "reference", "brand", "email", "status", "enquiry", "product_uuid",
        "created_at", "updated_at", "activates_at", "activated_at", "redirect_token_id", "sandbox")
    VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7, $8, $8, $9, NULL, NULL, $14)
    ON CONFLICT ("brand", "email", "sandbox") DO UPDATE SET
        "enquiry" = excluded."enquiry",
        "updated_at" = excluded."updated_at",
        "product_uuid" = COALESCE(excluded."product_uuid", "cases"."product_uuid"),
        "status" = CASE "cases"."status" WHEN 'referred' THEN excluded."status" ELSE "cases"."status" END,
        "activates_at" = CASE "cases"."status" WHEN 'referred' THEN excluded."activates_at" ELSE "cases"."activates_at" END
    RETURNING "id", "reference"
), submitted AS (
    INSERT INTO "submissions" ("id", "case_id", "client_id", "received_at", "payload", "kind")
    SELECT $10, "id", $11, $8, $12, 'enquiry' FROM upserted
), logged AS (
    INSERT INTO "case_events" ("id", "case_id", "kind", "client_id", "detail", "created_at")
    SELECT $13, "id", CASE WHEN "id" = $1 THEN 'created' ELSE 'updated' END, $11, NULL, $8
    FROM upserted
    RETURNING "id", "case_id", "kind", "created_at"
), notified AS (
    INSERT INTO "webhook_deliveries" ("id", "client_id", "case_id", "event_type", "created_at",
        "next_attempt_at", "attempts")
    SELECT "logged"."id", "ep"."client_id", "logged"."case_id",
        CASE "logged"."kind" WHEN 'created' THEN 'case.created' ELSE 'case.updated' END,
        "logged"."created_at", "logged"."created_at", 0
    FROM "logged" JOIN "webhook_endpoints" AS "ep" ON "#,
    hears_of!(case: r#""logged"."case_id""#, submitter: "$11"),
    r#"
)
SELECT "id", "reference" FROM upserted"#
);

/// One submission's values, as both ways of writing it need them.
struct NewSubmission<'a> {
    case_id: Uuid,
    reference: String,
    enquiry: &'a Enquiry,
    raw_body: &'a str,
    client_id: &'a str,
    sandbox: bool,
    now: DateTime<Utc>,
    activates_at: DateTime<Utc>,
}

impl CaseStore {
    /// Creates the case for the enquiry's brand and e-mail, or applies the enquiry to the
    /// existing one (a sandbox client's, among sandbox cases only); the submission is
    /// stored as sent either way. Writes to one case wait
    /// in line before they take a connection ([`super::WriteQueue`]), within the same
    /// time bound as the work. A keyed submission stores its answer, as [`Keyed::answer`] makes
    /// it, in the same transaction.
    pub async fn submit(
        &self,
        enquiry: &Enquiry,
        raw_body: &str,
        client_id: &str,
        sandbox: bool,
        keyed: Option<Keyed<'_>>,
    ) -> Result<Submitted, StoreError> {
        let key = case_key(enquiry.brand.as_str(), enquiry.email.as_str());
        self.drawing_references(key, || {
            self.try_submit(enquiry, raw_body, client_id, sandbox, keyed)
        })
        .await
    }

    /// Runs `attempt`, a write that may create the case queued on `key`, in its turn and
    /// within the time bound, again while the reference it drew for a new case was taken.
    pub(super) async fn drawing_references<F>(
        &self,
        key: (&str, &str),
        attempt: impl Fn() -> F,
    ) -> Result<Submitted, StoreError>
    where
        F: std::future::Future<Output = Result<Submitted, StoreError>>,
    {
        for draw in 1..=REFERENCE_DRAWS {
            let attempt = bounded(async {
                let _turn = self.writes.wait(&key).await;
                let _connection = self.request_connection().await?;
                attempt().await
            });
            match attempt.await {
                Err(StoreError::Db(e)) if reference_taken(&e) => {
                    tracing::warn!(draw, "a new case's reference was taken; drawing another");
                }
                other => {
                    if other.is_ok() {
                        self.queued.notify_one();
                    }
                    return other;
                }
            }
        }
        Err(StoreError::ReferencesExhausted(REFERENCE_DRAWS))
    }

    async fn try_submit(
        &self,
        enquiry: &Enquiry,
        raw_body: &str,
        client_id: &str,
        sandbox: bool,
        keyed: Option<Keyed<'_>>,
    ) -> Result<Submitted, StoreError> {
        let now = Utc::now();
        let delay = if sandbox {
            self.timing.sandbox_activation_delay
        } else {
            self.timing.activation_delay
        };
        let new = NewSubmission {
            case_id: new_row_id(),
            reference: new_reference(),
            enquiry,
            raw_body,
            client_id,
            sandbox,
            now,
            activates_at: later(now, delay),
        };
        let (case_id, reference) = match self.reused() {
            Some(reused) => Self::submit_in_one_statement(reused, &new, keyed).await?,
            // Boxed: the ORM's futures take kilobytes, which every layer of the request's
            // future above this one would otherwise hold and copy, on PostgreSQL too.
            None => Box::pin(self.submit_in_transaction(&new, keyed)).await?,
        };
        Ok(submitted(&new, case_id, reference))
    }

    /// The writes on PostgreSQL: [`SUBMIT_POSTGRES`], and a keyed submission's answer
    /// after it in the same transaction.
    async fn submit_in_one_statement(
        reused: &Reused,
        new: &NewSubmission<'_>,
        keyed: Option<Keyed<'_>>,
    ) -> Result<(Uuid, String), StoreError> {
        // The enquiry goes as JSON text that PostgreSQL parses into `jsonb` itself, which
        // spares building and encoding a `serde_json::Value` per request.
        let enquiry_json = serde_json::to_string(new.enquiry).map_err(StoreError::Encoding)?;
        let statement = Statement::from_sql_and_values(
            DbBackend::Postgres,
            SUBMIT_POSTGRES,
            [
                new.case_id.into(),
                new.reference.as_str().into(),
                new.enquiry.brand.as_str().into(),
                new.enquiry.email.as_str().into(),
                case::Status::PendingActivation.as_str().into(),
                enquiry_json.into(),
                new.enquiry.product_uuid.into(),
                new.now.into(),
                new.activates_at.into(),
                new_row_id().into(),
                new.client_id.into(),
                new.raw_body.into(),
                new_row_id().into(),
                new.sandbox.into(),
            ],
        );
        let written = |row: Option<&PgRow>| -> Result<(Uuid, String), DbErr> {
            let row = row.ok_or(DbErr::RecordNotInserted)?;
            Ok((
                row.try_get("id").map_err(decode_error)?,
                row.try_get("reference").map_err(decode_error)?,
            ))
        };
        let Some(keyed) = keyed else {
            return Ok(written(reused.fetch_optional(statement).await?.as_ref())?);
        };
        reused
            .fetch_then(statement, |row| {
                let (case_id, reference) = written(row)?;
                let sealed = keyed.seal(&submitted(new, case_id, reference.clone()))?;
                let store = answer_statement(keyed.lease, &sealed, case_id);
                Ok::<_, StoreError>((store, (case_id, reference)))
            })
            .await?
            .ok_or(StoreError::LeaseLost)
    }

    /// The same writes through the ORM, on SQLite: the upsert, then the submission, the
    /// event and a keyed submission's answer, in one transaction.
    async fn submit_in_transaction(
        &self,
        new: &NewSubmission<'_>,
        keyed: Option<Keyed<'_>>,
    ) -> Result<(Uuid, String), StoreError> {
        let enquiry_json = serde_json::to_value(new.enquiry).map_err(StoreError::Encoding)?;
        let txn = self.begin_write().await?;
        let upserted = case::Entity::insert(case::ActiveModel {
            id: Set(new.case_id),
            reference: Set(new.reference.clone()),
            brand: Set(new.enquiry.brand.as_str().to_owned()),
            email: Set(new.enquiry.email.as_str().to_owned()),
            status: Set(case::Status::PendingActivation),
            enquiry: Set(enquiry_json),
            product_uuid: Set(new.enquiry.product_uuid),
            created_at: Set(new.now),
            updated_at: Set(new.now),
            activates_at: Set(new.activates_at),
            activated_at: Set(None),
            redirect_token_id: Set(None),
            sandbox: Set(new.sandbox),
        })
        .on_conflict(
            on_case_key()
                .update_columns([case::Column::Enquiry, case::Column::UpdatedAt])
                .value(
                    case::Column::ProductUuid,
                    Expr::cust(r#"COALESCE(excluded."product_uuid", "cases"."product_uuid")"#),
                )
                .value(case::Column::Status, completing_referral("status"))
                .value(
                    case::Column::ActivatesAt,
                    completing_referral("activates_at"),
                )
                .to_owned(),
        )
        .exec_with_returning(&txn)
        .await?;
        let enquiry = submission_row(
            upserted.id,
            new.client_id,
            new.now,
            new.raw_body,
            submission::KIND_ENQUIRY,
        );
        submission::Entity::insert(enquiry)
            .exec_without_returning(&txn)
            .await?;
        let kind = match outcome_of(new.case_id, upserted.id) {
            Outcome::Created => "created",
            Outcome::Updated => "updated",
        };
        let logged = event(upserted.id, kind, Some(new.client_id), None, new.now);
        log_event(&txn, logged).await?;
        if let Some(keyed) = keyed {
            let done = submitted(new, upserted.id, upserted.reference.clone());
            store_answer(&txn, keyed.lease, &keyed.seal(&done)?, upserted.id).await?;
        }
        txn.commit().await?;
        Ok((upserted.id, upserted.reference))
    }
}

/// On an enquiry's upsert, the `column` an existing case keeps, unless it is referred: then
/// the enquiry's, which starts it towards activation.
fn completing_referral(column: &str) -> sea_orm::sea_query::SimpleExpr {
    Expr::cust(format!(
        r#"CASE "cases"."status" WHEN '{}' THEN excluded."{column}" ELSE "cases"."{column}" END"#,
        case::Status::Referred.as_str()
    ))
}

/// What a submission that wrote case `case_id` did: a case keeps its id on update, so the
/// new id tells a creation.
fn submitted(new: &NewSubmission<'_>, case_id: Uuid, reference: String) -> Submitted {
    Submitted {
        outcome: outcome_of(new.case_id, case_id),
        reference,
    }
}

/// Whether a write that offered a new case `offered` made it, by the id of the case it
/// wrote: a case keeps its id on update.
fn outcome_of(offered: Uuid, written: Uuid) -> Outcome {
    if written == offered {
        Outcome::Created
    } else {
        Outcome::Updated
    }
}

/// A case insert's conflict on the case's key, brand, e-mail and sandbox (the unique index
/// `ux_cases_brand_email_sandbox`): the writer says what it changes of the case found.
pub(super) fn on_case_key() -> OnConflict {
    OnConflict::columns([
        case::Column::Brand,
        case::Column::Email,
        case::Column::Sandbox,
    ])
}

/// The key writes to one case queue on, by its brand and e-mail: the same for submissions
/// and attaches, so a case's writes hold one connection between them.
pub(super) fn case_key<'a>(brand: &'a str, email: &'a str) -> (&'a str, &'a str) {
    (brand, email)
}

/// Whether an insert failed only because the new case's reference was already taken.
fn reference_taken(e: &DbErr) -> bool {
    matches!(e.sql_err(), Some(SqlErr::UniqueConstraintViolation(m)) if m.contains("reference"))
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
}
