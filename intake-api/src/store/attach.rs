//! Attaching a product: finding the customer's case, then recording the product and the
//! redirect link's token on it.

use std::sync::LazyLock;

use chrono::Utc;
use sea_orm::sqlx::Row;
use sea_orm::{
    ColumnTrait, ConnectionTrait, DbBackend, EntityTrait, QueryFilter, QueryOrder, QuerySelect,
    QueryTrait, Statement, Value,
};
use uuid::Uuid;

use super::fan_out::hears_of;
use super::idempotency::{Lease, SealedAnswer, answer_statement, store_answer};
use super::reused::decode_error;
use super::steps::{Step, Steps};
use super::submit::case_key;
use super::{CaseStore, StoreError, bounded, enquired_by, later, new_row_id};
use crate::domain::Email;
use crate::entity::case;

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

/// A redirect link about to be handed out: the product it continues with and the hash of
/// its token (the token itself is never stored).
#[derive(Debug, Clone, Copy)]
pub struct NewLink<'a> {
    /// The product attached.
    pub product_uuid: Uuid,
    /// The hash of the link's token.
    pub token_hash: &'a str,
}

/// A keyed attach's hold on its key and its answer, stored with the change.
pub type KeyedAttach<'a> = (&'a Lease, &'a SealedAnswer);

/// What attaching a product writes: the redirect token's hash, the product and the newest
/// link on the case, the event, and the event queued for every endpoint subscribed to
/// `product.attached`, of a partner with an enquiry on the case.
pub(super) static ATTACH: LazyLock<Steps> = LazyLock::new(|| {
    Steps::new(
        &ATTACH_STEPS,
        concat!(
            r#"INSERT INTO "webhook_deliveries" ("id", "client_id", "endpoint_id", "case_id", "event_type",
    "created_at", "next_attempt_at", "attempts")
SELECT $7, "ep"."client_id", "ep"."id", $2, 'product.attached', $5, $5, 0
FROM "webhook_endpoints" AS "ep"
WHERE "#,
            hears_of!(case: "$2", bit: "8")
        ),
        &[
            "token_id",
            "case_id",
            "token_hash",
            "product_uuid",
            "now",
            "expires_at",
            "event_id",
            "client_id",
            "detail",
        ],
    )
});

static ATTACH_STEPS: [Step; 3] = [
    Step {
        name: "token",
        // Attach's links are the case's (no partner, no reference of their own): only its
        // newest redeems.
        sql: r#"INSERT INTO "redirect_tokens" ("id", "case_id", "token_hash", "product_uuid", "created_at",
    "expires_at", "used_at", "client_id", "reference")
VALUES ($1, $2, $3, $4, $5, $6, NULL, NULL, NULL)"#,
        returns: &[],
    },
    Step {
        name: "updated",
        sql: r#"UPDATE "cases" SET "product_uuid" = $4, "updated_at" = $5, "redirect_token_id" = $1
WHERE "id" = $2"#,
        returns: &[],
    },
    Step {
        name: "logged",
        sql: r#"INSERT INTO "case_events" ("id", "case_id", "kind", "client_id", "detail", "created_at")
VALUES ($7, $2, 'product_attached', $8, $9::jsonb, $5)"#,
        returns: &[],
    },
];

/// The query [`CaseStore::find_for_attach`] runs, of an e-mail address and a partner's client
/// id, for `backend`. `bench/attach.sql` runs the same query in pgbench.
pub(super) fn attach_lookup(args: [&str; 2], backend: DbBackend) -> Statement {
    let [email, client_id] = args;
    let query = case::Entity::find()
        .select_only()
        .columns([
            case::Column::Id,
            case::Column::Reference,
            case::Column::Brand,
        ])
        .filter(case::Column::Email.eq(email))
        // Only the partner's own enquiry opens a case; a referred case has none yet, so
        // attach answers as the spec says for a customer without one, and the partner
        // falls back to the enquiry form.
        .filter(enquired_by(client_id, backend))
        .order_by_desc(case::Column::UpdatedAt)
        .limit(1);
    query.build(backend)
}

impl CaseStore {
    /// The case a product for `email` from partner `client_id` is attached to, if any: the
    /// most recently updated of the e-mail's cases (any brand) that the partner has made at
    /// least one enquiry on (so none still referred). Another partner's customer, or one
    /// the partner only referred, is not found, exactly as an unknown e-mail is not, so
    /// attach tells a partner nothing about others' customers.
    pub async fn find_for_attach(
        &self,
        email: &Email,
        client_id: &str,
    ) -> Result<Option<CaseRef>, StoreError> {
        let statement = self.attach_lookup.bind([email.as_str(), client_id]);
        let found: Option<(Uuid, String, String)> = bounded(async {
            let _connection = self.request_connection().await?;
            let Some(reused) = self.reused() else {
                let row = self.db.query_one_raw(statement).await?;
                return Ok(row.map(|r| r.try_get_many_by_index()).transpose()?);
            };
            let row = reused.fetch_optional(statement).await?;
            Ok(match row {
                None => None,
                Some(r) => Some((
                    r.try_get(0).map_err(decode_error)?,
                    r.try_get(1).map_err(decode_error)?,
                    r.try_get(2).map_err(decode_error)?,
                )),
            })
        })
        .await?;
        Ok(found.map(|(id, reference, brand)| CaseRef {
            id,
            reference,
            brand,
            email: email.as_str().to_owned(),
        }))
    }

    /// Records the product on the case and stores the link's token hash, with the event.
    /// Like submissions, writes to one case wait in line before they take a connection. A
    /// keyed attach stores its answer in the same transaction.
    pub async fn attach(
        &self,
        case: &CaseRef,
        link: NewLink<'_>,
        client_id: &str,
        keyed: Option<KeyedAttach<'_>>,
    ) -> Result<(), StoreError> {
        bounded(async {
            let _turn = self.writes.wait(&case_key(&case.brand, &case.email)).await;
            let _connection = self.request_connection().await?;
            self.attach_now(case.id, link, client_id, keyed).await
        })
        .await?;
        self.queued.notify_one();
        Ok(())
    }

    async fn attach_now(
        &self,
        case_id: Uuid,
        link: NewLink<'_>,
        client_id: &str,
        keyed: Option<KeyedAttach<'_>>,
    ) -> Result<(), StoreError> {
        let now = Utc::now();
        let detail = serde_json::json!({"product_uuid": link.product_uuid});
        let values: [Value; 9] = [
            new_row_id().into(),
            case_id.into(),
            link.token_hash.into(),
            link.product_uuid.into(),
            now.into(),
            later(now, self.timing.redirect_ttl).into(),
            new_row_id().into(),
            client_id.into(),
            detail.to_string().into(),
        ];
        let Some(reused) = self.reused() else {
            // Boxed, as in `submit`: the ORM's futures are large.
            return Box::pin(self.attach_on_sqlite(case_id, values, keyed)).await;
        };
        let statement =
            Statement::from_sql_and_values(DbBackend::Postgres, ATTACH.postgres(), values);
        let Some((lease, answer)) = keyed else {
            return Ok(reused.execute(statement).await?);
        };
        // A keyed attach's answer, after the change in its transaction.
        let stored = reused
            .fetch_then(statement, |_| {
                Ok::<_, StoreError>((answer_statement(lease, answer, case_id), ()))
            })
            .await?;
        stored.ok_or(StoreError::LeaseLost)
    }

    /// [`ATTACH`] on SQLite, in one transaction with a keyed attach's answer.
    async fn attach_on_sqlite(
        &self,
        case_id: Uuid,
        values: [Value; 9],
        keyed: Option<KeyedAttach<'_>>,
    ) -> Result<(), StoreError> {
        let txn = self.begin_write().await?;
        ATTACH.run_on_sqlite(&txn, values.into()).await?;
        if let Some((lease, answer)) = keyed {
            store_answer(&txn, lease, answer, case_id).await?;
        }
        txn.commit().await?;
        Ok(())
    }
}
