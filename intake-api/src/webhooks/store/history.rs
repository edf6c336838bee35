//! The delivery history: each event queued for an endpoint and each try of it, read by
//! partners (their own) and by operators, sent again on request, and pruned once older than
//! the deployment keeps it.
//!
//! An event's id is a UUIDv7 (its case event's), so the history's order, newest first, is
//! the order of ids, and a time bound is a bound on ids: a partner's settled events are
//! paged through the history index (`client_id`, `id`, of settled events only, so queueing
//! and claiming never write it), its pending ones through the worker's pending indexes,
//! and the retention walks the primary key's range.

use chrono::{DateTime, Utc};
use sea_orm::sea_query::{Expr, ExprTrait, Query};
use sea_orm::{
    ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder, QuerySelect, QueryTrait,
    Set,
};
use serde::Serialize;
use shared::intake::webhook_deliveries::DeliveryStatus;
use uuid::Uuid;

use super::tries::{DueDelivery, TryOutcome};
use crate::entity::{case, webhook_attempt, webhook_delivery, webhook_endpoint};
use crate::store::{CaseStore, PURGE_BATCH, StoreError, bounded, first_id_at};

/// One event for one endpoint, as partners and operators read it.
#[derive(Debug, Clone, Serialize)]
pub struct DeliveryView {
    /// The event's id; `msg_` and this, without hyphens, is its `webhook-id`.
    pub id: Uuid,
    /// The endpoint it goes to (the nil id until the worker adopts an event queued by a
    /// server that knew one endpoint per partner).
    pub endpoint_id: Uuid,
    /// The case's reference.
    pub reference: String,
    /// The event type.
    pub event_type: String,
    /// When the change happened.
    pub created_at: DateTime<Utc>,
    /// How it stands.
    pub state: DeliveryStatus,
    /// Tries so far.
    pub attempts: i32,
    /// When it is next tried, while pending or failing.
    pub next_attempt_at: Option<DateTime<Utc>>,
    /// When the partner acknowledged it.
    pub delivered_at: Option<DateTime<Utc>>,
    /// The last answer's status.
    pub last_status: Option<i16>,
    /// What went wrong last.
    pub last_error: Option<String>,
}

/// One try of an event, as the history keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AttemptView {
    /// Which try, from 1.
    pub attempt: i32,
    /// When the request went out.
    pub attempted_at: DateTime<Utc>,
    /// The answer's status, when one came.
    pub status: Option<i16>,
    /// What went wrong; none when delivered.
    pub error: Option<String>,
    /// How long it took, in milliseconds.
    pub duration_ms: i32,
    /// When the next try was set for, after a failed one.
    pub next_attempt_at: Option<DateTime<Utc>>,
}

/// Facts of one try the outcome leaves out: when it went out and how long it took.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tried {
    /// When the request went out.
    pub at: DateTime<Utc>,
    /// How long the answer, or the failure, took.
    pub duration: std::time::Duration,
}

pub use crate::history_cursor::HistoryCursor;

/// Which of a partner's events to list.
#[derive(Debug, Clone, Default)]
pub struct HistoryQuery<'a> {
    /// The partner.
    pub client_id: &'a str,
    /// Only this endpoint's.
    pub endpoint: Option<Uuid>,
    /// Only those that stand so.
    pub status: Option<DeliveryStatus>,
    /// Only this type's.
    pub event_type: Option<&'a str>,
    /// Only events that happened at or after this.
    pub since: Option<DateTime<Utc>>,
    /// Only events that happened before this.
    pub until: Option<DateTime<Utc>>,
    /// Only events older than this cursor's.
    pub after: Option<HistoryCursor>,
    /// At most this many.
    pub limit: u64,
}

/// Events queued again by one recovery at most, so a request stays brief; the answer says
/// when more wait.
pub const RECOVER_AT_ONCE: u64 = 1000;

/// How far the time an event's id carries may be from its `created_at`: both are taken
/// as its change is written, this is a wide margin.
const ID_CLOCK_SLACK: chrono::Duration = chrono::Duration::minutes(1);

impl CaseStore {
    /// A page of the events `query` asks for, newest first, and the cursor of the next
    /// page when there is one.
    pub async fn history(
        &self,
        query: HistoryQuery<'_>,
    ) -> Result<(Vec<DeliveryView>, Option<HistoryCursor>), StoreError> {
        bounded(async {
            use webhook_delivery::Column as D;
            // Settled events through the history index, pending ones through the worker's
            // pending indexes: each part newest first, a page of each at most, merged.
            let settled = D::DeliveredAt.is_not_null().or(D::FailedAt.is_not_null());
            let unsettled = D::DeliveredAt.is_null().and(D::FailedAt.is_null());
            let parts = match query.status {
                Some(status) => vec![standing(status)],
                None => vec![settled, unsettled],
            };
            // One snapshot for both parts: an event settled between two reads would be in
            // neither.
            let txn = self.begin_snapshot().await?;
            let mut rows = Vec::new();
            for part in parts {
                rows.extend(
                    history_part(&query, part)
                        .limit(query.limit + 1)
                        .all(&txn)
                        .await?,
                );
            }
            txn.commit().await?;
            rows.sort_by_key(|r| std::cmp::Reverse((r.id, r.endpoint_id)));
            let next = if rows.len() as u64 > query.limit {
                rows.truncate(query.limit as usize);
                rows.last().map(|r| HistoryCursor {
                    id: r.id,
                    endpoint: r.endpoint_id,
                })
            } else {
                None
            };
            Ok((self.views(rows).await?, next))
        })
        .await
    }

    /// `client_id`'s events, newest first, at most `limit`; only failed ones if `failed`.
    pub async fn webhook_deliveries(
        &self,
        client_id: &str,
        failed: bool,
        limit: u64,
    ) -> Result<Vec<DeliveryView>, StoreError> {
        let query = HistoryQuery {
            client_id,
            status: failed.then_some(DeliveryStatus::Failed),
            limit,
            ..HistoryQuery::default()
        };
        Ok(self.history(query).await?.0)
    }

    /// `client_id`'s event `id` for its endpoint `endpoint`, with each try the history
    /// keeps, oldest first; `None` when the partner has no such event.
    pub async fn delivery(
        &self,
        client_id: &str,
        endpoint: Uuid,
        id: Uuid,
    ) -> Result<Option<(DeliveryView, Vec<AttemptView>)>, StoreError> {
        bounded(async {
            let Some(row) = webhook_delivery::Entity::find()
                .filter(webhook_delivery::Column::Id.eq(id))
                .filter(webhook_delivery::Column::ClientId.eq(client_id))
                .filter(webhook_delivery::Column::EndpointId.eq(endpoint))
                .one(self.db())
                .await?
            else {
                return Ok(None);
            };
            let attempts = webhook_attempt::Entity::find()
                .filter(webhook_attempt::Column::DeliveryId.eq(id))
                .filter(webhook_attempt::Column::EndpointId.eq(endpoint))
                .order_by_asc(webhook_attempt::Column::Attempt)
                .all(self.db())
                .await?
                .into_iter()
                .map(|a| AttemptView {
                    attempt: a.attempt,
                    attempted_at: a.attempted_at,
                    status: a.status,
                    error: a.error,
                    duration_ms: a.duration_ms,
                    next_attempt_at: a.next_attempt_at,
                })
                .collect();
            let view = self.views(vec![row]).await?.pop();
            Ok(view.map(|v| (v, attempts)))
        })
        .await
    }

    /// Queues event `id` again, to be sent at once: for every endpoint it went to (or
    /// failed to reach), or only for `scope`'s partner and endpoint. A delivery being sent
    /// right now is left to that send. How many deliveries were queued.
    pub async fn redeliver(
        &self,
        scope: Option<(&str, Uuid)>,
        id: Uuid,
    ) -> Result<u64, StoreError> {
        let mut update = queue_again(Utc::now()).filter(webhook_delivery::Column::Id.eq(id));
        let mut endpoints = webhook_delivery::Entity::find()
            .select_only()
            .column(webhook_delivery::Column::EndpointId)
            .filter(webhook_delivery::Column::Id.eq(id));
        if let Some((client_id, endpoint)) = scope {
            update = update
                .filter(webhook_delivery::Column::ClientId.eq(client_id))
                .filter(webhook_delivery::Column::EndpointId.eq(endpoint));
            endpoints = endpoints
                .filter(webhook_delivery::Column::ClientId.eq(client_id))
                .filter(webhook_delivery::Column::EndpointId.eq(endpoint));
        }
        bounded(async {
            let queued = update.exec(self.db()).await?.rows_affected;
            if queued > 0 {
                asked_to_resend(self.db(), endpoints.into_query()).await?;
            }
            Ok(queued)
        })
        .await
    }

    /// Queues again the events of `client_id`'s endpoint `endpoint` that happened in
    /// `since..until` and were not delivered: given up on (`failed`), or waiting for a retry
    /// (`failing`, not being sent right now). Oldest first, at most [`RECOVER_AT_ONCE`]:
    /// each is sent once more, at once, and the claim's order keeps each case's events in
    /// order. How many were queued, and whether more such events wait in the window (a
    /// queued one is pending, so the same request again goes on with the rest).
    pub async fn recover(
        &self,
        client_id: &str,
        endpoint: Uuid,
        since: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> Result<(u64, bool), StoreError> {
        bounded(async {
            use webhook_delivery::Column as D;
            let now = Utc::now();
            let stranded = || {
                standing(DeliveryStatus::Failed).or(standing(DeliveryStatus::Failing)
                    .and(D::LockedUntil.is_null().or(D::LockedUntil.lte(now))))
            };
            let ids: Vec<Uuid> = webhook_delivery::Entity::find()
                .select_only()
                .column(D::Id)
                .filter(D::ClientId.eq(client_id))
                .filter(D::EndpointId.eq(endpoint))
                .filter(stranded())
                .filter(D::CreatedAt.gte(since))
                .filter(D::CreatedAt.lt(until))
                .filter(D::Id.gte(first_id_at(since - ID_CLOCK_SLACK)))
                .filter(D::Id.lt(first_id_at(until + ID_CLOCK_SLACK)))
                .order_by_asc(D::Id)
                .limit(RECOVER_AT_ONCE + 1)
                .into_tuple()
                .all(self.db())
                .await?;
            let more = ids.len() as u64 > RECOVER_AT_ONCE;
            let chosen = &ids[..ids.len().min(RECOVER_AT_ONCE as usize)];
            let mut queued = 0;
            if !chosen.is_empty() {
                let this = webhook_endpoint::Entity::find()
                    .select_only()
                    .column(webhook_endpoint::Column::Id)
                    .filter(webhook_endpoint::Column::Id.eq(endpoint))
                    .into_query();
                asked_to_resend(self.db(), this).await?;
            }
            for ids in chosen.chunks(PURGE_BATCH as usize) {
                queued += queue_again(now)
                    .filter(D::ClientId.eq(client_id))
                    .filter(D::EndpointId.eq(endpoint))
                    .filter(stranded())
                    .filter(D::Id.is_in(ids.iter().copied()))
                    .exec(self.db())
                    .await?
                    .rows_affected;
            }
            Ok((queued, more))
        })
        .await
    }

    /// Deletes a batch of the delivered and failed events that happened before `cutoff`,
    /// with their tries; how many went. Pending ones stay until they are settled.
    pub async fn prune_history(&self, cutoff: DateTime<Utc>) -> Result<u64, StoreError> {
        bounded(async {
            use webhook_delivery::Column as D;
            let settled = || {
                D::Id
                    .lt(first_id_at(cutoff))
                    .and(D::DeliveredAt.is_not_null().or(D::FailedAt.is_not_null()))
            };
            let txn = self.begin_write().await?;
            let ids: Vec<Uuid> = webhook_delivery::Entity::find()
                .select_only()
                .column(D::Id)
                .filter(settled())
                .limit(PURGE_BATCH)
                .into_tuple()
                .all(&txn)
                .await?;
            if ids.is_empty() {
                return Ok(0);
            }
            let deleted = webhook_delivery::Entity::delete_many()
                .filter(D::Id.is_in(ids.iter().copied()))
                .filter(settled())
                .exec(&txn)
                .await?
                .rows_affected;
            // The tries of the deliveries just deleted (an event may still be pending for
            // another endpoint: its tries stay).
            let mut left = Query::select();
            left.expr(Expr::val(1))
                .from(webhook_delivery::Entity)
                .and_where(
                    Expr::col((webhook_delivery::Entity, D::Id))
                        .equals((webhook_attempt::Entity, webhook_attempt::Column::DeliveryId)),
                )
                .and_where(
                    Expr::col((webhook_delivery::Entity, D::EndpointId))
                        .equals((webhook_attempt::Entity, webhook_attempt::Column::EndpointId)),
                );
            webhook_attempt::Entity::delete_many()
                .filter(webhook_attempt::Column::DeliveryId.is_in(ids))
                .filter(Expr::exists(left).not())
                .exec(&txn)
                .await?;
            txn.commit().await?;
            Ok(deleted)
        })
        .await
    }

    /// The rows as views, with their cases' references, in one more read.
    async fn views(
        &self,
        rows: Vec<webhook_delivery::Model>,
    ) -> Result<Vec<DeliveryView>, StoreError> {
        let case_ids: Vec<Uuid> = rows.iter().map(|r| r.case_id).collect();
        let references: std::collections::HashMap<Uuid, String> = case::Entity::find()
            .select_only()
            .columns([case::Column::Id, case::Column::Reference])
            .filter(case::Column::Id.is_in(case_ids))
            .into_tuple::<(Uuid, String)>()
            .all(self.db())
            .await?
            .into_iter()
            .collect();
        Ok(rows
            .into_iter()
            .map(|r| {
                let state = match (r.delivered_at, r.failed_at, &r.last_error) {
                    (Some(_), _, _) => DeliveryStatus::Delivered,
                    (None, Some(_), _) => DeliveryStatus::Failed,
                    (None, None, Some(_)) => DeliveryStatus::Failing,
                    (None, None, None) => DeliveryStatus::Pending,
                };
                let waiting = matches!(state, DeliveryStatus::Pending | DeliveryStatus::Failing);
                DeliveryView {
                    id: r.id,
                    endpoint_id: r.endpoint_id,
                    reference: references.get(&r.case_id).cloned().unwrap_or_default(),
                    event_type: r.event_type,
                    created_at: r.created_at,
                    state,
                    attempts: r.attempts,
                    next_attempt_at: waiting.then_some(r.next_attempt_at),
                    delivered_at: r.delivered_at,
                    last_status: r.last_status,
                    last_error: r.last_error,
                }
            })
            .collect())
    }
}

/// The events `query` asks for that also meet `part`, newest first.
fn history_part(
    query: &HistoryQuery<'_>,
    part: sea_orm::sea_query::SimpleExpr,
) -> sea_orm::Select<webhook_delivery::Entity> {
    use webhook_delivery::Column as D;
    let mut select = webhook_delivery::Entity::find()
        .filter(D::ClientId.eq(query.client_id))
        .filter(part);
    if let Some(endpoint) = query.endpoint {
        select = select.filter(D::EndpointId.eq(endpoint));
    }
    if let Some(event_type) = query.event_type {
        select = select.filter(D::EventType.eq(event_type));
    }
    if let Some(since) = query.since {
        select = select
            .filter(D::CreatedAt.gte(since))
            .filter(D::Id.gte(first_id_at(since - ID_CLOCK_SLACK)));
    }
    if let Some(until) = query.until {
        select = select
            .filter(D::CreatedAt.lt(until))
            .filter(D::Id.lt(first_id_at(until + ID_CLOCK_SLACK)));
    }
    if let Some(after) = query.after {
        select = select.filter(
            D::Id
                .lt(after.id)
                .or(D::Id.eq(after.id).and(D::EndpointId.lt(after.endpoint))),
        );
    }
    select.order_by_desc(D::Id).order_by_desc(D::EndpointId)
}

/// Writes the tries of `outcomes` to the history, in one statement per
/// [`PURGE_BATCH`]. A try already written (a lease that ran out while it was recorded) is
/// left as it is.
pub(super) async fn record_attempts(
    db: &impl ConnectionTrait,
    endpoint: Uuid,
    outcomes: &[(DueDelivery, TryOutcome, Tried)],
) -> Result<(), StoreError> {
    for chunk in outcomes.chunks(PURGE_BATCH as usize) {
        let rows = chunk.iter().map(|(event, outcome, tried)| {
            let (status, error, next) = match outcome {
                TryOutcome::Delivered { status } => (Some(*status), None, None),
                TryOutcome::Retry { at, status, error } => {
                    (*status, Some(error.clone()), Some(*at))
                }
                TryOutcome::Failed { status, error } => (*status, Some(error.clone()), None),
            };
            webhook_attempt::ActiveModel {
                delivery_id: Set(event.id),
                endpoint_id: Set(endpoint),
                attempt: Set(event.attempts),
                attempted_at: Set(tried.at),
                status: Set(status.map(|s| s as i16)),
                error: Set(error),
                duration_ms: Set(i32::try_from(tried.duration.as_millis()).unwrap_or(i32::MAX)),
                next_attempt_at: Set(next),
            }
        });
        webhook_attempt::Entity::insert_many(rows)
            .on_conflict_do_nothing_on([
                webhook_attempt::Column::DeliveryId,
                webhook_attempt::Column::EndpointId,
                webhook_attempt::Column::Attempt,
            ])
            .exec(db)
            .await?;
    }
    Ok(())
}

/// Deliveries that stand as `status` says.
fn standing(status: DeliveryStatus) -> sea_orm::sea_query::SimpleExpr {
    use webhook_delivery::Column as D;
    let unsettled = D::DeliveredAt.is_null().and(D::FailedAt.is_null());
    match status {
        DeliveryStatus::Pending => unsettled.and(D::LastError.is_null()),
        DeliveryStatus::Failing => unsettled.and(D::LastError.is_not_null()),
        DeliveryStatus::Delivered => D::DeliveredAt.is_not_null(),
        DeliveryStatus::Failed => D::DeliveredAt.is_null().and(D::FailedAt.is_not_null()),
    }
}

/// Counts a request to send again on each endpoint `endpoints` selects, so every replica
/// ends the wait it keeps after the endpoint's failures and sends at once.
async fn asked_to_resend(
    db: &impl ConnectionTrait,
    endpoints: sea_orm::sea_query::SelectStatement,
) -> Result<(), sea_orm::DbErr> {
    use webhook_endpoint::Column as E;
    webhook_endpoint::Entity::update_many()
        .col_expr(
            E::ResendRequests,
            Expr::expr(Expr::col(E::ResendRequests).if_null(0)).add(1),
        )
        .filter(E::Id.in_subquery(endpoints))
        .exec(db)
        .await?;
    Ok(())
}

/// Makes deliveries pending and due at `now`, as if never tried, except those being sent
/// right now (leased), which their send settles, and those of an endpoint since removed,
/// which nothing would send.
fn queue_again(now: DateTime<Utc>) -> sea_orm::UpdateMany<webhook_delivery::Entity> {
    use webhook_delivery::Column as D;
    let none = None::<DateTime<Utc>>;
    let endpoints = webhook_endpoint::Entity::find()
        .select_only()
        .column(webhook_endpoint::Column::Id)
        .into_query();
    webhook_delivery::Entity::update_many()
        .col_expr(D::DeliveredAt, Expr::value(none))
        .col_expr(D::FailedAt, Expr::value(none))
        .col_expr(D::LockedUntil, Expr::value(none))
        .col_expr(D::NextAttemptAt, Expr::value(now))
        .col_expr(D::LastStatus, Expr::value(None::<i16>))
        .col_expr(D::LastError, Expr::value(None::<String>))
        .filter(
            D::LockedUntil
                .is_null()
                .or(D::LockedUntil.lte(now))
                .or(D::DeliveredAt.is_not_null())
                .or(D::FailedAt.is_not_null()),
        )
        .filter(D::EndpointId.in_subquery(endpoints))
}
