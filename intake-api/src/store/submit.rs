//! Accepting an enquiry: the case created or updated, the submission kept as sent, the event.

use std::sync::LazyLock;

use chrono::Utc;
use sea_orm::sqlx::Row;
use sea_orm::sqlx::postgres::PgRow;
use sea_orm::{DbBackend, DbErr, SqlErr, Statement, Value};
use uuid::Uuid;

use super::fan_out::hears_of;
use super::idempotency::{Keyed, answer_statement, store_answer};
use super::reused::{Reused, decode_error};
use super::steps::{Step, Steps};
use super::{CaseStore, StoreError, bounded, later, new_row_id};
use crate::domain::Enquiry;
use crate::entity::case;
use crate::sandbox::World;

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

/// What one accepted enquiry writes: the case upserted on its unique (brand, email, sandbox)
/// key (two first submissions racing each other make one case, not two; a sandbox client's
/// enquiry makes or changes only a sandbox case), the submission as sent and the event, and
/// the event queued for every endpoint subscribed to its type, of a partner with a submission
/// on the case (or who is the submitter: on PostgreSQL the statement cannot see its own submission). A
/// case keeps its id on update, so `id = $1` tells a creation. An enquiry without a product
/// leaves an attached one in place; the first enquiry on a referred case completes it, to
/// activate after the delay as a new case would. Its answer is the case's id and reference.
pub(super) static SUBMIT: LazyLock<Steps> = LazyLock::new(|| {
    Steps::new(
        &SUBMIT_STEPS,
        r#"SELECT "id", "reference" FROM "upserted""#,
        &[
            "case_id",
            "reference",
            "brand",
            "email",
            "status",
            "enquiry",
            "product_uuid",
            "now",
            "activates_at",
            "submission_id",
            "client_id",
            "payload",
            "event_id",
            "sandbox",
        ],
    )
});

static SUBMIT_STEPS: [Step; 4] = [
    Step {
        name: "upserted",
        sql: r#"INSERT INTO "cases" ("id", "reference", "brand", "email", "status", "enquiry", "product_uuid",
    "created_at", "updated_at", "activates_at", "activated_at", "redirect_token_id", "sandbox")
VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7, $8, $8, $9, NULL, NULL, $14)
ON CONFLICT ("brand", "email", "sandbox") DO UPDATE SET
    "enquiry" = excluded."enquiry",
    "updated_at" = excluded."updated_at",
    "product_uuid" = COALESCE(excluded."product_uuid", "cases"."product_uuid"),
    "status" = CASE "cases"."status" WHEN 'referred' THEN excluded."status" ELSE "cases"."status" END,
    "activates_at" = CASE "cases"."status" WHEN 'referred' THEN excluded."activates_at" ELSE "cases"."activates_at" END"#,
        returns: &["id", "reference"],
    },
    Step {
        name: "submitted",
        sql: r#"INSERT INTO "submissions" ("id", "case_id", "client_id", "received_at", "payload", "kind")
SELECT $10, "id", $11, $8, $12, 'enquiry' FROM "upserted""#,
        returns: &[],
    },
    Step {
        name: "logged",
        sql: r#"INSERT INTO "case_events" ("id", "case_id", "kind", "client_id", "detail", "created_at")
SELECT $13, "id", CASE WHEN "id" = $1 THEN 'created' ELSE 'updated' END, $11, NULL, $8
FROM "upserted""#,
        returns: &["id", "case_id", "kind", "created_at"],
    },
    Step {
        name: "notified",
        sql: concat!(
            r#"INSERT INTO "webhook_deliveries" ("id", "client_id", "endpoint_id", "case_id", "event_type",
    "created_at", "next_attempt_at", "attempts")
SELECT "logged"."id", "ep"."client_id", "ep"."id", "logged"."case_id",
    CASE "logged"."kind" WHEN 'created' THEN 'case.created' ELSE 'case.updated' END,
    "logged"."created_at", "logged"."created_at", 0
FROM "logged" JOIN "webhook_endpoints" AS "ep" ON "#,
            hears_of!(
                case: r#""logged"."case_id""#,
                submitter: "$11",
                bit: r#"CASE "logged"."kind" WHEN 'created' THEN 1 ELSE 2 END"#
            )
        ),
        returns: &[],
    },
];

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
        world: World,
        keyed: Option<Keyed<'_>>,
    ) -> Result<Submitted, StoreError> {
        let key = case_key(enquiry.brand.as_str(), enquiry.email.as_str());
        self.drawing_references(key, || {
            self.try_submit(enquiry, raw_body, client_id, world, keyed)
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
        world: World,
        keyed: Option<Keyed<'_>>,
    ) -> Result<Submitted, StoreError> {
        let now = Utc::now();
        let delay = self.timing.activation_delay(world);
        let offered = new_row_id();
        // The enquiry goes as JSON text, which PostgreSQL parses into `jsonb` itself: that
        // spares building and encoding a `serde_json::Value` per request.
        let enquiry_json = serde_json::to_string(enquiry).map_err(StoreError::Encoding)?;
        let values: [Value; 14] = [
            offered.into(),
            new_reference().into(),
            enquiry.brand.as_str().into(),
            enquiry.email.as_str().into(),
            case::Status::PendingActivation.as_str().into(),
            enquiry_json.into(),
            enquiry.product_uuid.into(),
            now.into(),
            later(now, delay).into(),
            new_row_id().into(),
            client_id.into(),
            raw_body.into(),
            new_row_id().into(),
            world.is_sandbox().into(),
        ];
        let (case_id, reference) = match self.reused() {
            Some(reused) => Self::submit_on_postgres(reused, offered, values, keyed).await?,
            // Boxed: the ORM's futures take kilobytes, which every layer of the request's
            // future above this one would otherwise hold and copy, on PostgreSQL too.
            None => Box::pin(self.submit_on_sqlite(offered, values, keyed)).await?,
        };
        Ok(submitted(offered, case_id, reference))
    }

    /// [`SUBMIT`] on PostgreSQL, and a keyed submission's answer after it in the same
    /// transaction.
    async fn submit_on_postgres(
        reused: &Reused,
        offered: Uuid,
        values: [Value; 14],
        keyed: Option<Keyed<'_>>,
    ) -> Result<(Uuid, String), StoreError> {
        let statement =
            Statement::from_sql_and_values(DbBackend::Postgres, SUBMIT.postgres(), values);
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
                let sealed = keyed.seal(&submitted(offered, case_id, reference.clone()))?;
                let store = answer_statement(keyed.lease, &sealed, case_id);
                Ok::<_, StoreError>((store, (case_id, reference)))
            })
            .await?
            .ok_or(StoreError::LeaseLost)
    }

    /// [`SUBMIT`] on SQLite, in one transaction with a keyed submission's answer.
    async fn submit_on_sqlite(
        &self,
        offered: Uuid,
        values: [Value; 14],
        keyed: Option<Keyed<'_>>,
    ) -> Result<(Uuid, String), StoreError> {
        let txn = self.begin_write().await?;
        let rows = SUBMIT.run_on_sqlite(&txn, values.into()).await?;
        let row = rows.first().ok_or(DbErr::RecordNotInserted)?;
        let (case_id, reference): (Uuid, String) = row.try_get_many_by_index()?;
        if let Some(keyed) = keyed {
            let done = submitted(offered, case_id, reference.clone());
            store_answer(&txn, keyed.lease, &keyed.seal(&done)?, case_id).await?;
        }
        txn.commit().await?;
        Ok((case_id, reference))
    }
}

/// What a submission that offered a new case `offered` did, by the case it wrote, `case_id`:
/// a case keeps its id on update, so the new id tells a creation.
fn submitted(offered: Uuid, case_id: Uuid, reference: String) -> Submitted {
    let outcome = if case_id == offered {
        Outcome::Created
    } else {
        Outcome::Updated
    };
    Submitted { outcome, reference }
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
