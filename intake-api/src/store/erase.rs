//! Erasing a customer's personal data on request, and the retention of submissions as sent.
//!
//! An erased case keeps what is not about the person (its reference, brand, status, dates,
//! product and history) so the business can still account for it; its enquiry is emptied,
//! its e-mail replaced by a marker, and the submissions (each body as sent) deleted. With no
//! submission left no partner sees it (status and attach answer 404), and with no e-mail a
//! later enquiry for the address makes a new case. The answers stored for partners'
//! `Idempotency-Key`s about the case are emptied too, their keys kept spent until they
//! expire, so a late retry neither reveals the reference or link nor makes the case again.

use chrono::{DateTime, Utc};
use sea_orm::sea_query::Expr;
use sea_orm::{
    ColumnTrait, Condition, DatabaseTransaction, EntityTrait, ExprTrait, QueryFilter, QueryOrder,
    QuerySelect, QueryTrait,
};
use uuid::Uuid;

use super::CHECKED_WITHIN;
use super::{CaseStore, StoreError, bounded, event};
use crate::domain::{Email, hash_token};
use crate::entity::{
    case, case_event, idempotency_key, redirect_token, submission, webhook_attempt,
    webhook_delivery,
};

/// The start of an erased case's e-mail: no address has it, and the case id after it keeps
/// the brand and e-mail key unique.
pub const ERASED_EMAIL_PREFIX: &str = "erased:";

/// The case event an erasure leaves.
pub const ERASED_EVENT: &str = "erased";

/// The case event a retention pass leaves on each case whose submissions it emptied.
pub const PURGED_EVENT: &str = "submissions_purged";

/// Submissions one retention pass empties at most, so a first pass over years of data does
/// not hold one long transaction.
pub const PURGE_BATCH: u64 = 1000;

/// Drops the events about case `case` not yet sent, with their tries: nothing more about
/// an erased customer goes out. How many were dropped. Run before its submissions go: they
/// name the partners its events are for, which the pending events' index starts with.
async fn drop_unsent_events(txn: &DatabaseTransaction, case: Uuid) -> Result<u64, StoreError> {
    let partners = || {
        submission::Entity::find()
            .select_only()
            .column(submission::Column::ClientId)
            .filter(submission::Column::CaseId.eq(case))
            .into_query()
    };
    let unsent = || {
        webhook_delivery::Column::ClientId
            .in_subquery(partners())
            .and(webhook_delivery::Column::CaseId.eq(case))
            .and(webhook_delivery::Column::DeliveredAt.is_null())
            .and(webhook_delivery::Column::FailedAt.is_null())
    };
    let unsent_ids = webhook_delivery::Entity::find()
        .select_only()
        .column(webhook_delivery::Column::Id)
        .filter(unsent())
        .into_query();
    webhook_attempt::Entity::delete_many()
        .filter(webhook_attempt::Column::DeliveryId.in_subquery(unsent_ids))
        .exec(txn)
        .await?;
    Ok(webhook_delivery::Entity::delete_many()
        .filter(unsent())
        .exec(txn)
        .await?
        .rows_affected)
}

/// A case an erasure emptied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErasedCase {
    /// Its reference, which still resolves (for the business) to the erased case.
    pub reference: String,
    /// Its brand.
    pub brand: String,
}

impl CaseStore {
    /// Erases the personal data of `email`'s cases (of `brand` only, when given), recording
    /// who asked in an `erased` event on each; answers the cases erased, none when there
    /// were none.
    pub async fn erase(
        &self,
        email: &Email,
        brand: Option<&str>,
        requested_by: &str,
    ) -> Result<Vec<ErasedCase>, StoreError> {
        let (erased, unsent) = bounded(async {
            let txn = self.begin_write().await?;
            let mut found = case::Entity::find().filter(case::Column::Email.eq(email.as_str()));
            if let Some(brand) = brand {
                found = found.filter(case::Column::Brand.eq(brand));
            }
            let cases = found.all(&txn).await?;
            let now = Utc::now();
            let mut unsent = 0;
            for erased in &cases {
                case::Entity::update_many()
                    .col_expr(
                        case::Column::Email,
                        Expr::value(format!("{ERASED_EMAIL_PREFIX}{}", erased.id)),
                    )
                    .col_expr(case::Column::Enquiry, Expr::value(serde_json::json!({})))
                    // The links already made stop working: the portal's answer carries the
                    // e-mail address.
                    .col_expr(case::Column::RedirectTokenId, Expr::value(None::<Uuid>))
                    .filter(case::Column::Id.eq(erased.id))
                    .exec(&txn)
                    .await?;
                unsent += drop_unsent_events(&txn, erased.id).await?;
                submission::Entity::delete_many()
                    .filter(submission::Column::CaseId.eq(erased.id))
                    .exec(&txn)
                    .await?;
                let detail = serde_json::json!({"requested_by": requested_by});
                case_event::Entity::insert(event(erased.id, ERASED_EVENT, None, Some(detail), now))
                    .exec_without_returning(&txn)
                    .await?;
            }
            Box::pin(forget_answers(&txn, &cases)).await?;
            txn.commit().await?;
            let erased = cases
                .into_iter()
                .map(|c| ErasedCase {
                    reference: c.reference,
                    brand: c.brand,
                })
                .collect();
            Ok((erased, unsent))
        })
        .await?;
        if unsent > 0 {
            // Some may be out on a claim at a replica that has not checked since.
            tokio::time::sleep(CHECKED_WITHIN).await;
        }
        Ok(erased)
    }

    /// Empties the payloads (the bodies as sent) of up to [`PURGE_BATCH`] submissions
    /// received before `cutoff` and after the submission `after` (the last one an earlier
    /// pass emptied), leaving a `submissions_purged` event on each case; answers how many it
    /// emptied and the last one, to start the next pass after.
    ///
    /// Submission ids are time-ordered, so both bounds are ranges of the primary key: no
    /// index on the time of receipt, which every submission would pay for.
    pub async fn purge_submissions(
        &self,
        cutoff: DateTime<Utc>,
        after: Option<Uuid>,
    ) -> Result<(u64, Option<Uuid>), StoreError> {
        bounded(async {
            let txn = self.begin_write().await?;
            let mut old = submission::Entity::find()
                .select_only()
                .column(submission::Column::Id)
                .column(submission::Column::CaseId)
                .filter(submission::Column::Id.lt(first_id_at(cutoff)))
                .filter(submission::Column::Payload.ne(""));
            if let Some(after) = after {
                old = old.filter(submission::Column::Id.gt(after));
            }
            let rows: Vec<(Uuid, Uuid)> = old
                .order_by_asc(submission::Column::Id)
                .limit(PURGE_BATCH)
                .into_tuple()
                .all(&txn)
                .await?;
            let Some(&(last, _)) = rows.last() else {
                return Ok((0, after));
            };
            let ids: Vec<Uuid> = rows.iter().map(|(id, _)| *id).collect();
            submission::Entity::update_many()
                .col_expr(submission::Column::Payload, Expr::value(""))
                .filter(submission::Column::Id.is_in(ids))
                .exec(&txn)
                .await?;
            let mut per_case: Vec<(Uuid, u64)> = Vec::new();
            for (_, case_id) in &rows {
                match per_case.iter_mut().find(|(id, _)| id == case_id) {
                    Some((_, count)) => *count += 1,
                    None => per_case.push((*case_id, 1)),
                }
            }
            let now = Utc::now();
            let events = per_case.iter().map(|(case_id, count)| {
                let detail = serde_json::json!({"submissions": count, "received_before": cutoff});
                event(*case_id, PURGED_EVENT, None, Some(detail), now)
            });
            case_event::Entity::insert_many(events)
                .exec_without_returning(&txn)
                .await?;
            txn.commit().await?;
            Ok((rows.len() as u64, Some(last)))
        })
        .await
    }

    /// Deletes sandbox cases created before `cutoff`, with everything about them (their
    /// submissions, events, links, webhook events and kept answers), up to
    /// [`PURGE_BATCH`] at a time; answers how many went. Nothing real is about a sandbox
    /// case, so nothing of it is kept.
    pub async fn purge_sandbox(&self, cutoff: DateTime<Utc>) -> Result<u64, StoreError> {
        bounded(async {
            let txn = self.begin_write().await?;
            // The bare column, not `= $1`: a bound value would keep PostgreSQL's generic
            // plan from the partial index of sandbox cases.
            let ids: Vec<Uuid> = case::Entity::find()
                .select_only()
                .column(case::Column::Id)
                .filter(Expr::col((case::Entity, case::Column::Sandbox)))
                .filter(case::Column::CreatedAt.lt(cutoff))
                .order_by_asc(case::Column::CreatedAt)
                .limit(PURGE_BATCH)
                .into_tuple()
                .all(&txn)
                .await?;
            if ids.is_empty() {
                return Ok(0);
            }
            // A webhook event has its case event's id.
            let events = case_event::Entity::find()
                .select_only()
                .column(case_event::Column::Id)
                .filter(case_event::Column::CaseId.is_in(ids.clone()))
                .as_query()
                .to_owned();
            webhook_attempt::Entity::delete_many()
                .filter(webhook_attempt::Column::DeliveryId.in_subquery(events.clone()))
                .exec(&txn)
                .await?;
            webhook_delivery::Entity::delete_many()
                .filter(webhook_delivery::Column::Id.in_subquery(events))
                .exec(&txn)
                .await?;
            idempotency_key::Entity::delete_many()
                .filter(idempotency_key::Column::CaseId.is_in(ids.clone()))
                .exec(&txn)
                .await?;
            // Submissions, events and links go with their case.
            let deleted = case::Entity::delete_many()
                .filter(case::Column::Id.is_in(ids))
                .exec(&txn)
                .await?;
            txn.commit().await?;
            Ok(deleted.rows_affected)
        })
        .await
    }
}

/// Empties the stored answers about `cases`, keeping their keys: a retry with one is then
/// refused ([`super::Claim::Erased`]) rather than processed again.
async fn forget_answers(
    txn: &DatabaseTransaction,
    cases: &[case::Model],
) -> Result<(), StoreError> {
    if cases.is_empty() {
        return Ok(());
    }
    let ids: Vec<Uuid> = cases.iter().map(|c| c.id).collect();
    let mut about = Condition::any().add(idempotency_key::Column::CaseId.is_in(ids.clone()));
    // Answers 0.1.0 stored in clear name no case: a submission's names its reference...
    for erased in cases {
        let answer = format!(r#"%"reference":"{}"%"#, erased.reference);
        about = about.add(
            idempotency_key::Column::CaseId
                .is_null()
                .and(idempotency_key::Column::Response.like(answer)),
        );
    }
    // ...and an attach's its link, whose token's hash is the case's.
    let hashes: Vec<String> = redirect_token::Entity::find()
        .select_only()
        .column(redirect_token::Column::TokenHash)
        .filter(redirect_token::Column::CaseId.is_in(ids))
        .into_tuple()
        .all(txn)
        .await?;
    if !hashes.is_empty() {
        let clear: Vec<(String, String, String)> = idempotency_key::Entity::find()
            .select_only()
            .column(idempotency_key::Column::ClientId)
            .column(idempotency_key::Column::IdemKey)
            .column(idempotency_key::Column::Response)
            .filter(idempotency_key::Column::CaseId.is_null())
            .filter(idempotency_key::Column::Response.like(r#"%"redirect":%"#))
            .into_tuple()
            .all(txn)
            .await?;
        for (client_id, key, response) in clear {
            if link_token(&response).is_some_and(|t| hashes.contains(&hash_token(&t))) {
                about = about.add(
                    idempotency_key::Column::ClientId
                        .eq(client_id)
                        .and(idempotency_key::Column::IdemKey.eq(key)),
                );
            }
        }
    }
    idempotency_key::Entity::update_many()
        .col_expr(
            idempotency_key::Column::Response,
            Expr::value(None::<String>),
        )
        .col_expr(
            idempotency_key::Column::SealedResponse,
            Expr::value(None::<String>),
        )
        .filter(idempotency_key::Column::Status.is_not_null())
        .filter(about)
        .exec(txn)
        .await?;
    Ok(())
}

/// The token of the link in an attach's answer as 0.1.0 stored it.
fn link_token(answer: &str) -> Option<String> {
    let answer: serde_json::Value = serde_json::from_str(answer).ok()?;
    let link = url::Url::parse(answer["redirect"].as_str()?).ok()?;
    link.query_pairs()
        .find(|(name, _)| name == "token")
        .map(|(_, token)| token.into_owned())
}

/// The smallest UUIDv7 of the millisecond `at`: every row id made before `at` is below it.
pub(crate) fn first_id_at(at: DateTime<Utc>) -> Uuid {
    let millis = u64::try_from(at.timestamp_millis()).unwrap_or(0);
    let mut bytes = [0u8; 16];
    bytes[..6].copy_from_slice(&millis.to_be_bytes()[2..]);
    bytes[6] = 0x70;
    bytes[8] = 0x80;
    Uuid::from_bytes(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_id_of_a_millisecond_orders_between_the_ids_around_it() {
        let at = Utc::now();
        let before = Uuid::new_v7(uuid::Timestamp::from_unix(
            uuid::NoContext,
            u64::try_from(at.timestamp() - 1).unwrap_or(0),
            0,
        ));
        let after = Uuid::new_v7(uuid::Timestamp::from_unix(
            uuid::NoContext,
            u64::try_from(at.timestamp() + 1).unwrap_or(0),
            0,
        ));
        let bound = first_id_at(at);
        assert!(before < bound && bound < after, "{before} {bound} {after}");
        assert_eq!(bound.get_version_num(), 7);
    }
}
