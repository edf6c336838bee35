//! The queue of events to partners (the outbox table): claimed by the delivery worker under a lease, their
//! outcomes recorded in batches, and listed and resent by operators.

use chrono::{DateTime, Utc};
use sea_orm::sea_query::{
    Alias, Expr, ExprTrait, JoinType, LockBehavior, LockType, Order, Query, SelectStatement,
    UpdateStatement,
};
use sea_orm::{
    ColumnTrait, ConnectionTrait, DbBackend, DbErr, EntityTrait, PaginatorTrait, QueryFilter,
    QuerySelect,
};
use uuid::Uuid;

use super::history::{Tried, record_attempts};
use super::tries::{DueDelivery, TryOutcome};
use crate::entity::{case, case_event, webhook_delivery, webhook_endpoint};
use crate::sandbox::{Trigger, World};
use crate::store::{CaseStore, StoreError, bounded};

/// An active endpoint, and whether it has events due now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointDue {
    /// The endpoint.
    pub id: Uuid,
    /// Its partner.
    pub client_id: String,
    /// Whether an event waits for it now.
    pub due: bool,
    /// How many times its events were asked to be sent again: a replica that sees it
    /// change stops waiting out the endpoint's last failures.
    pub resend_requests: i64,
}

pub use crate::store::CHECKED_WITHIN;

impl CaseStore {
    /// Every active endpoint, and whether it has events due now: one probe of the due index
    /// per endpoint, however long the backlogs. Events queued without an endpoint (by a
    /// server that knew one per partner, during a rolling upgrade) are first given their
    /// partner's oldest endpoint.
    pub async fn webhook_endpoints_due(&self) -> Result<Vec<EndpointDue>, StoreError> {
        bounded(async {
            // Looked for first, so the common case (none) takes no write lock: on SQLite an
            // UPDATE would, even one that changes nothing.
            let unassigned = webhook_delivery::Entity::find()
                .filter(webhook_delivery::Column::EndpointId.eq(Uuid::nil()))
                .filter(pending(webhook_delivery::Entity))
                .one(self.db())
                .await?;
            if unassigned.is_some() {
                let backend = self.db().get_database_backend();
                self.db()
                    .execute_raw(backend.build(&adopt_statement()))
                    .await?;
            }
            let now = Utc::now();
            let mut due = Query::select();
            due.expr(Expr::val(1))
                .from(webhook_delivery::Entity)
                .and_where(
                    Expr::col((
                        webhook_delivery::Entity,
                        webhook_delivery::Column::EndpointId,
                    ))
                    .equals((webhook_endpoint::Entity, webhook_endpoint::Column::Id)),
                )
                .and_where(pending(webhook_delivery::Entity))
                .and_where(
                    Expr::col((
                        webhook_delivery::Entity,
                        webhook_delivery::Column::NextAttemptAt,
                    ))
                    .lte(now),
                );
            Ok(webhook_endpoint::Entity::find()
                .select_only()
                .column(webhook_endpoint::Column::Id)
                .column(webhook_endpoint::Column::ClientId)
                .expr(Expr::exists(due))
                .column(webhook_endpoint::Column::ResendRequests)
                .filter(webhook_endpoint::Column::DisabledAt.is_null())
                .into_tuple::<(Uuid, String, bool, Option<i64>)>()
                .all(self.db())
                .await?
                .into_iter()
                .map(|(id, client_id, due, resends)| EndpointDue {
                    id,
                    client_id,
                    due,
                    resend_requests: resends.unwrap_or(0),
                })
                .collect())
        })
        .await
    }

    /// Claims up to `limit` of endpoint `endpoint`'s due events for `lease`, oldest due
    /// first, each the oldest pending one of its case, so an endpoint hears of one case's
    /// changes in order.
    /// A claimed event falls due again when the lease ends: other replicas pass it by until
    /// then, and take it over if this one stopped before recording how its send went.
    ///
    /// The claim reads the endpoint's due events in the order they fall due and stops at
    /// `limit`: its cost follows what it returns, plus the later events of cases whose
    /// earliest event is being sent or waits for a retry, never the backlog's length.
    pub async fn claim_deliveries(
        &self,
        endpoint: Uuid,
        limit: u64,
        lease: std::time::Duration,
    ) -> Result<Vec<DueDelivery>, StoreError> {
        bounded(async {
            let backend = self.db().get_database_backend();
            let claim = claim_statement(backend, endpoint, limit, lease);
            let mut claimed = self
                .db()
                .query_all_raw(backend.build(&claim))
                .await?
                .iter()
                .map(|r| {
                    Ok(DueDelivery {
                        id: r.try_get("", "id")?,
                        case_id: r.try_get("", "case_id")?,
                        event_type: r.try_get("", "event_type")?,
                        created_at: r.try_get("", "created_at")?,
                        attempts: r.try_get("", "attempts")?,
                        reference: String::new(),
                        brand: String::new(),
                        status: String::new(),
                        product_uuid: None,
                        later_waiting: false,
                        fails_on_purpose: false,
                    })
                })
                .collect::<Result<Vec<_>, DbErr>>()?;
            if claimed.is_empty() {
                return Ok(claimed);
            }
            self.fill_payloads(endpoint, &mut claimed).await?;
            // RETURNING keeps no order: the partner gets the oldest first.
            claimed.sort_by_key(|e| (e.created_at, e.id));
            Ok(claimed)
        })
        .await
    }

    /// How PostgreSQL runs a claim of `limit` of endpoint `endpoint`'s events, as
    /// `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)` shows it: the claim is run and rolled back.
    /// For checking what a claim reads against a large backlog; `None` on SQLite.
    pub async fn claim_plan(
        &self,
        endpoint: Uuid,
        limit: u64,
    ) -> Result<Option<serde_json::Value>, StoreError> {
        let backend = self.db().get_database_backend();
        if backend != DbBackend::Postgres {
            return Ok(None);
        }
        let claim = backend.build(&claim_statement(
            backend,
            endpoint,
            limit,
            std::time::Duration::from_secs(60),
        ));
        let explain = sea_orm::Statement::from_sql_and_values(
            backend,
            format!("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {}", claim.sql),
            claim.values.map(|v| v.0).unwrap_or_default(),
        );
        let txn = self.begin_write().await?;
        let row = txn.query_one_raw(explain).await?;
        txn.rollback().await?;
        let plan = row
            .map(|r| r.try_get_by_index::<serde_json::Value>(0))
            .transpose()?;
        Ok(plan)
    }

    /// Fills in what the payloads of endpoint `endpoint`'s `events` say of their cases (and the
    /// product of a `product.attached`), and whether later events of each case wait, in one
    /// read. Cases are never deleted (erasure empties them), so every event finds its own.
    async fn fill_payloads(
        &self,
        endpoint: Uuid,
        events: &mut [DueDelivery],
    ) -> Result<(), StoreError> {
        let ev = Alias::new("ev");
        let c = Alias::new("c");
        let later = Alias::new("later");
        let mut waiting = Query::select();
        waiting
            .expr(Expr::val(1))
            .from_as(webhook_delivery::Entity, later.clone())
            .and_where(
                Expr::col((later.clone(), webhook_delivery::Column::EndpointId)).eq(endpoint),
            )
            .and_where(
                Expr::col((later.clone(), webhook_delivery::Column::CaseId))
                    .equals((ev.clone(), case_event::Column::CaseId)),
            )
            .and_where(pending(later.clone()))
            .and_where(
                Expr::col((later.clone(), webhook_delivery::Column::Id))
                    .ne(Expr::col((ev.clone(), case_event::Column::Id))),
            );
        let mut query = Query::select();
        query
            .column((ev.clone(), case_event::Column::Id))
            .column((c.clone(), case::Column::Reference))
            .column((c.clone(), case::Column::Brand))
            .column((c.clone(), case::Column::Status))
            .column((ev.clone(), case_event::Column::Detail))
            .expr(Expr::exists(waiting))
            .column((c.clone(), case::Column::Email))
            .column((c.clone(), case::Column::Sandbox))
            .from_as(case_event::Entity, ev.clone())
            .join_as(
                JoinType::InnerJoin,
                case::Entity,
                c.clone(),
                Expr::col((c.clone(), case::Column::Id))
                    .equals((ev.clone(), case_event::Column::CaseId)),
            )
            .and_where(Expr::col((ev, case_event::Column::Id)).is_in(events.iter().map(|e| e.id)));
        let backend = self.db().get_database_backend();
        let mut found = std::collections::HashMap::new();
        for row in self.db().query_all_raw(backend.build(&query)).await? {
            let id: Uuid = row.try_get_by_index(0)?;
            let detail: Option<serde_json::Value> = row.try_get_by_index(4)?;
            found.insert(
                id,
                (
                    row.try_get_by_index::<String>(1)?,
                    row.try_get_by_index::<String>(2)?,
                    row.try_get_by_index::<String>(3)?,
                    detail.and_then(|d| d.get("product_uuid")?.as_str()?.parse().ok()),
                    row.try_get_by_index::<bool>(5)?,
                    World::of(row.try_get_by_index::<bool>(7)?)
                        .trigger(&row.try_get_by_index::<String>(6)?)
                        == Some(Trigger::WebhookFails),
                ),
            );
        }
        for event in events {
            if let Some((reference, brand, status, product_uuid, later, fails)) =
                found.remove(&event.id)
            {
                (event.reference, event.brand, event.status) = (reference, brand, status);
                (event.product_uuid, event.later_waiting) = (product_uuid, later);
                event.fails_on_purpose = fails;
            }
        }
        Ok(())
    }

    /// Records how the tries of endpoint `endpoint`'s `outcomes` ended: every delivery in one write
    /// (the common case), each retry or failure in one of its own.
    ///
    /// While an event waits for its retry, the later events of its case wait with it (they
    /// are due no sooner), so the claim and the look for due partners pass over no event
    /// that cannot be sent; once it is delivered or given up on, they are due at once.
    pub async fn finish_deliveries(
        &self,
        endpoint: Uuid,
        outcomes: &[(DueDelivery, TryOutcome, Tried)],
    ) -> Result<(), StoreError> {
        let now = Utc::now();
        let none = None::<DateTime<Utc>>;
        // Delivered events by the answer's status: one write for each status (one, as a
        // rule).
        let mut delivered: Vec<(u16, Vec<Uuid>)> = Vec::new();
        for (event, outcome, _) in outcomes {
            if let TryOutcome::Delivered { status } = outcome {
                match delivered.iter_mut().find(|(s, _)| s == status) {
                    Some((_, ids)) => ids.push(event.id),
                    None => delivered.push((*status, vec![event.id])),
                }
            }
        }
        // Cases whose later events may have been held back by a retry of this one.
        let held: Vec<Uuid> = outcomes
            .iter()
            .filter(|(e, o, _)| e.attempts > 1 && !matches!(o, TryOutcome::Retry { .. }))
            .map(|(e, _, _)| e.case_id)
            .collect();
        bounded(async {
            // The tries first: a try that happened stays in the history even should what
            // follows fail (the event is then sent again when its lease ends).
            record_attempts(self.db(), endpoint, outcomes).await?;
            for (status, ids) in &delivered {
                for ids in ids.chunks(FINISHED_AT_ONCE) {
                    webhook_delivery::Entity::update_many()
                        .col_expr(webhook_delivery::Column::DeliveredAt, Expr::value(now))
                        .col_expr(
                            webhook_delivery::Column::LastStatus,
                            Expr::value(*status as i16),
                        )
                        .col_expr(webhook_delivery::Column::LockedUntil, Expr::value(none))
                        .col_expr(
                            webhook_delivery::Column::LastError,
                            Expr::value(None::<String>),
                        )
                        .filter(webhook_delivery::Column::EndpointId.eq(endpoint))
                        .filter(webhook_delivery::Column::Id.is_in(ids.iter().copied()))
                        .exec(self.db())
                        .await?;
                }
            }
            for (event, outcome, _) in outcomes {
                // A failed try marks when to try again (or that it was given up on) and why.
                let (mark, at, status, error) = match outcome {
                    TryOutcome::Delivered { .. } => continue,
                    TryOutcome::Retry { at, status, error } => {
                        (webhook_delivery::Column::NextAttemptAt, *at, status, error)
                    }
                    TryOutcome::Failed { status, error } => {
                        (webhook_delivery::Column::FailedAt, now, status, error)
                    }
                };
                webhook_delivery::Entity::update_many()
                    .col_expr(mark, Expr::value(at))
                    .col_expr(webhook_delivery::Column::LockedUntil, Expr::value(none))
                    .col_expr(
                        webhook_delivery::Column::LastStatus,
                        Expr::value(status.map(|s| s as i16)),
                    )
                    .col_expr(
                        webhook_delivery::Column::LastError,
                        Expr::value(error.as_str()),
                    )
                    .filter(webhook_delivery::Column::Id.eq(event.id))
                    .filter(webhook_delivery::Column::EndpointId.eq(endpoint))
                    .exec(self.db())
                    .await?;
                if let TryOutcome::Retry { at, .. } = outcome {
                    later_of_case(endpoint, event)
                        .col_expr(webhook_delivery::Column::NextAttemptAt, Expr::value(*at))
                        .filter(webhook_delivery::Column::NextAttemptAt.lt(*at))
                        .exec(self.db())
                        .await?;
                }
            }
            for cases in held.chunks(FINISHED_AT_ONCE) {
                webhook_delivery::Entity::update_many()
                    .col_expr(webhook_delivery::Column::NextAttemptAt, Expr::value(now))
                    .filter(webhook_delivery::Column::EndpointId.eq(endpoint))
                    .filter(webhook_delivery::Column::CaseId.is_in(cases.iter().copied()))
                    .filter(pending(webhook_delivery::Entity))
                    .filter(webhook_delivery::Column::Attempts.eq(0))
                    .filter(webhook_delivery::Column::NextAttemptAt.gt(now))
                    .exec(self.db())
                    .await?;
            }
            Ok(())
        })
        .await
    }

    /// Gives back endpoint `endpoint`'s events `ids`, claimed but never sent: due again at once, the
    /// claim's try not counted.
    pub async fn release_deliveries(&self, endpoint: Uuid, ids: &[Uuid]) -> Result<(), StoreError> {
        let now = Utc::now();
        bounded(async {
            for ids in ids.chunks(FINISHED_AT_ONCE) {
                webhook_delivery::Entity::update_many()
                    .col_expr(
                        webhook_delivery::Column::LockedUntil,
                        Expr::value(None::<DateTime<Utc>>),
                    )
                    .col_expr(webhook_delivery::Column::NextAttemptAt, Expr::value(now))
                    .col_expr(
                        webhook_delivery::Column::Attempts,
                        Expr::col(webhook_delivery::Column::Attempts).sub(1),
                    )
                    .filter(webhook_delivery::Column::EndpointId.eq(endpoint))
                    .filter(webhook_delivery::Column::Id.is_in(ids.iter().copied()))
                    .filter(pending(webhook_delivery::Entity))
                    .exec(self.db())
                    .await?;
            }
            Ok(())
        })
        .await
    }

    /// Endpoint `endpoint` as it is now (`None` once removed), and which of `ids`, events
    /// claimed for it, are still to be sent (an erasure or a removal drops the others):
    /// what the worker checks before it hands one of them to the network.
    pub async fn still_to_send(
        &self,
        endpoint: Uuid,
        ids: &[Uuid],
    ) -> Result<(Option<webhook_endpoint::Model>, Vec<Uuid>), StoreError> {
        bounded(async {
            let Some(current) = self.endpoint_row(endpoint).await? else {
                return Ok((None, Vec::new()));
            };
            let mut pending_ids = Vec::with_capacity(ids.len());
            for ids in ids.chunks(FINISHED_AT_ONCE) {
                pending_ids.extend(
                    webhook_delivery::Entity::find()
                        .select_only()
                        .column(webhook_delivery::Column::Id)
                        .filter(webhook_delivery::Column::EndpointId.eq(endpoint))
                        .filter(webhook_delivery::Column::Id.is_in(ids.iter().copied()))
                        .filter(pending(webhook_delivery::Entity))
                        .into_tuple::<Uuid>()
                        .all(self.db())
                        .await?,
                );
            }
            Ok((Some(current), pending_ids))
        })
        .await
    }

    /// Returns once no replica can send endpoint `endpoint`'s events by what it knew
    /// before a change just written: after [`CHECKED_WITHIN`] when the endpoint has events
    /// to send (some may be out on a claim), at once when it has none.
    pub(crate) async fn sends_settled(&self, endpoint: Uuid) -> Result<(), StoreError> {
        let waiting = bounded(async {
            Ok(webhook_delivery::Entity::find()
                .select_only()
                .column(webhook_delivery::Column::Id)
                .filter(webhook_delivery::Column::EndpointId.eq(endpoint))
                .filter(pending(webhook_delivery::Entity))
                .into_tuple::<Uuid>()
                .one(self.db())
                .await?
                .is_some())
        })
        .await?;
        if waiting {
            tokio::time::sleep(CHECKED_WITHIN).await;
        }
        Ok(())
    }

    /// How many events are still to be sent.
    pub async fn pending_deliveries(&self) -> Result<u64, StoreError> {
        bounded(async {
            Ok(webhook_delivery::Entity::find()
                .filter(webhook_delivery::Column::DeliveredAt.is_null())
                .filter(webhook_delivery::Column::FailedAt.is_null())
                .count(self.db())
                .await?)
        })
        .await
    }
}

/// The claim of up to `limit` of endpoint `endpoint`'s due events for `lease`
/// ([`CaseStore::claim_deliveries`]).
fn claim_statement(
    backend: DbBackend,
    endpoint: Uuid,
    limit: u64,
    lease: std::time::Duration,
) -> UpdateStatement {
    let now = Utc::now();
    let until = now + chrono::Duration::from_std(lease).unwrap_or_default();
    let d = Alias::new("d");
    let p = Alias::new("p");
    let col = |c: webhook_delivery::Column| Expr::col((d.clone(), c));
    let mut due = Query::select();
    due.column((d.clone(), webhook_delivery::Column::Id))
        .from_as(webhook_delivery::Entity, d.clone())
        .and_where(col(webhook_delivery::Column::EndpointId).eq(endpoint))
        .and_where(pending(d.clone()))
        .and_where(col(webhook_delivery::Column::NextAttemptAt).lte(now))
        // Held by a replica that leases without moving the due time (0.2 and earlier),
        // during a rolling upgrade.
        .and_where(
            col(webhook_delivery::Column::LockedUntil)
                .is_null()
                .or(col(webhook_delivery::Column::LockedUntil).lte(now)),
        )
        .and_where(Expr::exists(earlier_pending(&d, &p)).not())
        .order_by(
            (d.clone(), webhook_delivery::Column::NextAttemptAt),
            Order::Asc,
        )
        .limit(limit);
    if backend == DbBackend::Postgres {
        due.lock_with_behavior(LockType::Update, LockBehavior::SkipLocked);
    }
    Query::update()
        .table(webhook_delivery::Entity)
        .value(webhook_delivery::Column::LockedUntil, until)
        .value(webhook_delivery::Column::NextAttemptAt, until)
        .value(
            webhook_delivery::Column::Attempts,
            Expr::col(webhook_delivery::Column::Attempts).add(1),
        )
        .and_where(webhook_delivery::Column::EndpointId.eq(endpoint))
        .and_where(webhook_delivery::Column::Id.in_subquery(due))
        .returning(Query::returning().columns([
            webhook_delivery::Column::Id,
            webhook_delivery::Column::CaseId,
            webhook_delivery::Column::EventType,
            webhook_delivery::Column::CreatedAt,
            webhook_delivery::Column::Attempts,
        ]))
        .to_owned()
}

/// The events of `event`'s case to endpoint `endpoint` queued after it and never tried:
/// those its retry holds back.
fn later_of_case(
    endpoint: Uuid,
    event: &DueDelivery,
) -> sea_orm::UpdateMany<webhook_delivery::Entity> {
    webhook_delivery::Entity::update_many()
        .filter(webhook_delivery::Column::EndpointId.eq(endpoint))
        .filter(webhook_delivery::Column::CaseId.eq(event.case_id))
        .filter(pending(webhook_delivery::Entity))
        .filter(webhook_delivery::Column::Attempts.eq(0))
        .filter(webhook_delivery::Column::Id.ne(event.id))
}

/// Events recorded or released by one statement at most: SQLite takes at most 32,766
/// values in one statement, and a shorter list keeps each write brief.
const FINISHED_AT_ONCE: usize = 500;

/// Whether a delivery in `table` is still to be sent.
fn pending(table: impl sea_orm::sea_query::IntoIden + Clone) -> sea_orm::sea_query::SimpleExpr {
    Expr::col((table.clone(), webhook_delivery::Column::DeliveredAt))
        .is_null()
        .and(Expr::col((table, webhook_delivery::Column::FailedAt)).is_null())
}

/// A pending delivery `p` to the same endpoint, about the same case, older than `d`.
fn earlier_pending(d: &Alias, p: &Alias) -> SelectStatement {
    let col = |t: &Alias, c: webhook_delivery::Column| Expr::col((t.clone(), c));
    Query::select()
        .expr(Expr::val(1))
        .from_as(webhook_delivery::Entity, p.clone())
        .and_where(
            col(p, webhook_delivery::Column::EndpointId)
                .equals((d.clone(), webhook_delivery::Column::EndpointId)),
        )
        .and_where(
            col(p, webhook_delivery::Column::CaseId)
                .equals((d.clone(), webhook_delivery::Column::CaseId)),
        )
        .and_where(pending(p.clone()))
        .and_where(
            col(p, webhook_delivery::Column::CreatedAt)
                .lt(col(d, webhook_delivery::Column::CreatedAt))
                .or(col(p, webhook_delivery::Column::CreatedAt)
                    .equals((d.clone(), webhook_delivery::Column::CreatedAt))
                    .and(
                        col(p, webhook_delivery::Column::Id)
                            .lt(col(d, webhook_delivery::Column::Id)),
                    )),
        )
        .to_owned()
}

/// Gives each pending event queued without an endpoint (the nil id: a server that knew one
/// endpoint per partner queued it) its partner's oldest endpoint; they are found through the
/// due index under the nil id.
fn adopt_statement() -> UpdateStatement {
    let ep = Alias::new("ep");
    let mut oldest = Query::select();
    oldest
        .column((ep.clone(), webhook_endpoint::Column::Id))
        .from_as(webhook_endpoint::Entity, ep.clone())
        .and_where(
            Expr::col((ep.clone(), webhook_endpoint::Column::ClientId))
                .equals((webhook_delivery::Entity, webhook_delivery::Column::ClientId)),
        )
        .order_by(
            (ep.clone(), webhook_endpoint::Column::CreatedAt),
            Order::Asc,
        )
        .order_by((ep, webhook_endpoint::Column::Id), Order::Asc)
        .limit(1);
    Query::update()
        .table(webhook_delivery::Entity)
        .value(
            webhook_delivery::Column::EndpointId,
            Expr::SubQuery(None, Box::new(oldest.clone().into())),
        )
        .and_where(webhook_delivery::Column::EndpointId.eq(Uuid::nil()))
        .and_where(pending(webhook_delivery::Entity))
        .and_where(Expr::exists(oldest))
        .to_owned()
}
