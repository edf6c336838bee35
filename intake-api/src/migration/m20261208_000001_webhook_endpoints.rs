//! Several webhook endpoints per partner, each subscribed to chosen event types: an
//! endpoint gets an id of its own (the primary key, instead of the partner's client id) and
//! an `event_types` mask (null: every type, those added later too), and each queued event
//! names the endpoint it goes to.
//!
//! Expand only, so 0.2.0's servers keep working on the result while a rolling upgrade or a
//! rollback has both running: they find a partner's endpoint by its client id, make one
//! without an id (the column has a default), and queue events without an endpoint (the nil
//! id, which this release's worker adopts for the partner's endpoint). 0.2.0 queues one row
//! per event and partner, so a partner may have one endpoint while it runs
//! (`INTAKE_WEBHOOK_ENDPOINTS_PER_PARTNER=1`, CHANGELOG). The partner indexes 0.2.0 claims
//! with stay until a release that no longer rolls back to it.
//!
//! SQLite cannot change a primary key or add a column with a computed default: both tables
//! are made anew there and their rows copied, in the migration's transaction.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::{ConnectionTrait, DbBackend, Statement};

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261208_000001_webhook_endpoints"
    }
}

/// The endpoint id of an event queued by a server that knows only one endpoint per partner
/// (`Uuid::nil()`).
const NO_ENDPOINT: &str = "00000000-0000-0000-0000-000000000000";

/// Where a claim looks: one endpoint's pending events in the order they fall due (and the
/// pending events queued without an endpoint, under the nil id).
const DUE_INDEX: &str = r#"CREATE INDEX "idx_webhook_deliveries_endpoint_due" ON "webhook_deliveries" ("endpoint_id", "next_attempt_at") WHERE "delivered_at" IS NULL AND "failed_at" IS NULL"#;

/// Whether an earlier event of the same case waits for the same endpoint.
const CASE_INDEX: &str = r#"CREATE INDEX "idx_webhook_deliveries_endpoint_case" ON "webhook_deliveries" ("endpoint_id", "case_id", "created_at") WHERE "delivered_at" IS NULL AND "failed_at" IS NULL"#;

/// The indexes 0.2.0 finds a partner's pending events by, as earlier migrations made them.
const PENDING_INDEX: &str = r#"CREATE INDEX "idx_webhook_deliveries_pending" ON "webhook_deliveries" ("client_id", "case_id", "created_at") WHERE "delivered_at" IS NULL AND "failed_at" IS NULL"#;
const PARTNER_DUE_INDEX: &str = r#"CREATE INDEX "idx_webhook_deliveries_partner_due" ON "webhook_deliveries" ("client_id", "next_attempt_at") WHERE "delivered_at" IS NULL AND "failed_at" IS NULL"#;

/// A partner's endpoints.
const CLIENT_INDEX: &str =
    r#"CREATE INDEX "idx_webhook_endpoints_client" ON "webhook_endpoints" ("client_id")"#;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_connection();
        match db.get_database_backend() {
            DbBackend::Postgres => {
                for sql in [
                    r#"ALTER TABLE "webhook_endpoints" ADD COLUMN "id" uuid NOT NULL DEFAULT gen_random_uuid()"#,
                    r#"ALTER TABLE "webhook_endpoints" ADD COLUMN "event_types" integer"#,
                    r#"ALTER TABLE "webhook_endpoints" DROP CONSTRAINT "webhook_endpoints_pkey""#,
                    r#"ALTER TABLE "webhook_endpoints" ADD PRIMARY KEY ("id")"#,
                    CLIENT_INDEX,
                    &format!(
                        r#"ALTER TABLE "webhook_deliveries" ADD COLUMN "endpoint_id" uuid NOT NULL DEFAULT '{NO_ENDPOINT}'"#
                    ),
                    r#"UPDATE "webhook_deliveries" AS "d" SET "endpoint_id" = "ep"."id" FROM "webhook_endpoints" AS "ep" WHERE "ep"."client_id" = "d"."client_id""#,
                    r#"ALTER TABLE "webhook_deliveries" DROP CONSTRAINT "webhook_deliveries_pkey""#,
                    r#"ALTER TABLE "webhook_deliveries" ADD PRIMARY KEY ("id", "client_id", "endpoint_id")"#,
                ] {
                    db.execute_unprepared(sql).await?;
                }
            }
            _ => {
                // An id as SQLite keeps one: 16 bytes.
                for sql in [
                    r#"CREATE TABLE "webhook_endpoints_new" (
    "id" uuid_text NOT NULL PRIMARY KEY DEFAULT (randomblob(16)),
    "client_id" varchar NOT NULL,
    "url" text NOT NULL,
    "secret" varchar NOT NULL,
    "previous_secret" varchar NULL,
    "previous_secret_until" timestamp_with_timezone_text NULL,
    "disabled_at" timestamp_with_timezone_text NULL,
    "disabled_reason" varchar NULL,
    "created_at" timestamp_with_timezone_text NOT NULL,
    "updated_at" timestamp_with_timezone_text NOT NULL,
    "event_types" integer NULL
)"#,
                    r#"INSERT INTO "webhook_endpoints_new" ("id", "client_id", "url", "secret", "previous_secret",
    "previous_secret_until", "disabled_at", "disabled_reason", "created_at", "updated_at")
SELECT randomblob(16), "client_id", "url", "secret", "previous_secret", "previous_secret_until",
    "disabled_at", "disabled_reason", "created_at", "updated_at" FROM "webhook_endpoints""#,
                    r#"DROP TABLE "webhook_endpoints""#,
                    r#"ALTER TABLE "webhook_endpoints_new" RENAME TO "webhook_endpoints""#,
                    CLIENT_INDEX,
                    r#"CREATE TABLE "webhook_deliveries_new" (
    "id" uuid_text NOT NULL,
    "client_id" varchar NOT NULL,
    "endpoint_id" uuid_text NOT NULL DEFAULT X'00000000000000000000000000000000',
    "case_id" uuid_text NOT NULL,
    "event_type" varchar NOT NULL,
    "created_at" timestamp_with_timezone_text NOT NULL,
    "next_attempt_at" timestamp_with_timezone_text NOT NULL,
    "locked_until" timestamp_with_timezone_text NULL,
    "attempts" integer NOT NULL,
    "delivered_at" timestamp_with_timezone_text NULL,
    "failed_at" timestamp_with_timezone_text NULL,
    "last_status" smallint NULL,
    "last_error" text NULL,
    PRIMARY KEY ("id", "client_id", "endpoint_id")
)"#,
                    r#"INSERT INTO "webhook_deliveries_new" ("id", "client_id", "endpoint_id", "case_id", "event_type",
    "created_at", "next_attempt_at", "locked_until", "attempts", "delivered_at", "failed_at",
    "last_status", "last_error")
SELECT "d"."id", "d"."client_id",
    COALESCE((SELECT "ep"."id" FROM "webhook_endpoints" AS "ep" WHERE "ep"."client_id" = "d"."client_id"),
        X'00000000000000000000000000000000'),
    "d"."case_id", "d"."event_type", "d"."created_at", "d"."next_attempt_at", "d"."locked_until",
    "d"."attempts", "d"."delivered_at", "d"."failed_at", "d"."last_status", "d"."last_error"
FROM "webhook_deliveries" AS "d""#,
                    r#"DROP TABLE "webhook_deliveries""#,
                    r#"ALTER TABLE "webhook_deliveries_new" RENAME TO "webhook_deliveries""#,
                    // The indexes the table had, as earlier migrations made them.
                    PENDING_INDEX,
                    PARTNER_DUE_INDEX,
                ] {
                    db.execute_unprepared(sql).await?;
                }
            }
        }
        for sql in [DUE_INDEX, CASE_INDEX] {
            db.execute_unprepared(sql).await?;
        }
        Ok(())
    }

    /// Back to one endpoint per partner, receiving every event type: refused while a
    /// partner has several endpoints or an endpoint chose its types, which the earlier
    /// schema cannot hold (remove or widen them first).
    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_connection();
        let backend = db.get_database_backend();
        let unfit = db
            .query_one_raw(Statement::from_string(
                backend,
                r#"SELECT count(*) FROM "webhook_endpoints" AS "ep" WHERE "ep"."event_types" IS NOT NULL
    OR EXISTS (SELECT 1 FROM "webhook_endpoints" AS "other"
        WHERE "other"."client_id" = "ep"."client_id" AND "other"."id" <> "ep"."id")"#,
            ))
            .await?
            .map(|row| row.try_get_by_index::<i64>(0))
            .transpose()?
            .unwrap_or(0);
        if unfit > 0 {
            return Err(DbErr::Migration(format!(
                "{unfit} webhook endpoints are one of several of their partner's or receive only \
                 chosen event types, which the earlier schema cannot hold: remove or widen them first"
            )));
        }
        let statements: &[&str] = match backend {
            DbBackend::Postgres => &[
                r#"DROP INDEX "idx_webhook_deliveries_endpoint_due""#,
                r#"DROP INDEX "idx_webhook_deliveries_endpoint_case""#,
                r#"ALTER TABLE "webhook_deliveries" DROP CONSTRAINT "webhook_deliveries_pkey""#,
                r#"ALTER TABLE "webhook_deliveries" ADD PRIMARY KEY ("id", "client_id")"#,
                r#"ALTER TABLE "webhook_deliveries" DROP COLUMN "endpoint_id""#,
                r#"DROP INDEX "idx_webhook_endpoints_client""#,
                r#"ALTER TABLE "webhook_endpoints" DROP CONSTRAINT "webhook_endpoints_pkey""#,
                r#"ALTER TABLE "webhook_endpoints" DROP COLUMN "id""#,
                r#"ALTER TABLE "webhook_endpoints" DROP COLUMN "event_types""#,
                r#"ALTER TABLE "webhook_endpoints" ADD PRIMARY KEY ("client_id")"#,
            ],
            _ => &[
                r#"CREATE TABLE "webhook_endpoints_old" (
    "client_id" varchar NOT NULL PRIMARY KEY,
    "url" text NOT NULL,
    "secret" varchar NOT NULL,
    "previous_secret" varchar NULL,
    "previous_secret_until" timestamp_with_timezone_text NULL,
    "disabled_at" timestamp_with_timezone_text NULL,
    "disabled_reason" varchar NULL,
    "created_at" timestamp_with_timezone_text NOT NULL,
    "updated_at" timestamp_with_timezone_text NOT NULL
)"#,
                r#"INSERT INTO "webhook_endpoints_old" SELECT "client_id", "url", "secret", "previous_secret",
    "previous_secret_until", "disabled_at", "disabled_reason", "created_at", "updated_at"
FROM "webhook_endpoints""#,
                r#"DROP TABLE "webhook_endpoints""#,
                r#"ALTER TABLE "webhook_endpoints_old" RENAME TO "webhook_endpoints""#,
                r#"CREATE TABLE "webhook_deliveries_old" (
    "id" uuid_text NOT NULL,
    "client_id" varchar NOT NULL,
    "case_id" uuid_text NOT NULL,
    "event_type" varchar NOT NULL,
    "created_at" timestamp_with_timezone_text NOT NULL,
    "next_attempt_at" timestamp_with_timezone_text NOT NULL,
    "locked_until" timestamp_with_timezone_text NULL,
    "attempts" integer NOT NULL,
    "delivered_at" timestamp_with_timezone_text NULL,
    "failed_at" timestamp_with_timezone_text NULL,
    "last_status" smallint NULL,
    "last_error" text NULL,
    PRIMARY KEY ("id", "client_id")
)"#,
                r#"INSERT INTO "webhook_deliveries_old" SELECT "id", "client_id", "case_id", "event_type",
    "created_at", "next_attempt_at", "locked_until", "attempts", "delivered_at", "failed_at",
    "last_status", "last_error"
FROM "webhook_deliveries""#,
                r#"DROP TABLE "webhook_deliveries""#,
                r#"ALTER TABLE "webhook_deliveries_old" RENAME TO "webhook_deliveries""#,
                PENDING_INDEX,
                PARTNER_DUE_INDEX,
            ],
        };
        for sql in statements {
            db.execute_unprepared(sql).await?;
        }
        Ok(())
    }
}
