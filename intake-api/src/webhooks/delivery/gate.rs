//! What stands between a round's claimed events and the network: the endpoint as it was
//! claimed for, read again within [`CHECKED_WITHIN`] of every send.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::{Endpoint, client_disabled};
use crate::entity::webhook_endpoint;
use crate::state::AppState;
use crate::webhooks::store::{CHECKED_WITHIN, DueDelivery};

/// What of an endpoint decides where and how its events go: a change to any of it ends a
/// round, whose events not yet sent then go by the endpoint as it is now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Shape {
    url: String,
    secret: String,
    previous_secret: Option<String>,
    previous_secret_until: Option<DateTime<Utc>>,
    rate_limit: Option<i32>,
}

impl Shape {
    /// `endpoint`'s shape; `None` when it is disabled.
    pub(super) fn of(endpoint: &webhook_endpoint::Model) -> Option<Self> {
        endpoint.disabled_at.is_none().then(|| Self {
            url: endpoint.url.clone(),
            secret: endpoint.secret.clone(),
            previous_secret: endpoint.previous_secret.clone(),
            previous_secret_until: endpoint.previous_secret_until,
            rate_limit: endpoint.rate_limit,
        })
    }
}

/// What stands between a round's claimed events and the network: each is handed over
/// only if its endpoint, read no longer than [`CHECKED_WITHIN`] before, is as it was
/// claimed for and the event is still to be sent. A change is thus obeyed by every replica
/// within that time, and the change waits as long before it is acknowledged.
pub(super) struct Gate {
    state: Arc<AppState>,
    endpoint: Endpoint,
    pub(super) shape: Shape,
    /// Claimed events not yet handed over or given back.
    outstanding: Mutex<HashSet<Uuid>>,
    /// The last check, shared by the round's sends: one read serves every send in its time.
    last: tokio::sync::Mutex<Check>,
}

/// What a gate's check found.
struct Check {
    /// When it began: what it read was so at least from then.
    at: tokio::time::Instant,
    /// The endpoint is as claimed for.
    open: bool,
    /// The database did not answer: nothing is known.
    failed: bool,
    /// Events no longer to be sent (erased, or their endpoint removed).
    dropped: HashSet<Uuid>,
}

/// Whether a claimed event may go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Admission {
    /// Hand it to the network.
    Go,
    /// It is no longer to be sent.
    Dropped,
    /// The endpoint changed: give it back, and end the round.
    Changed,
    /// The database did not answer the check: give it back, and end the round.
    Unchecked,
}

impl Gate {
    pub(super) fn new(state: &Arc<AppState>, endpoint: &Endpoint, shape: Shape) -> Self {
        let stale = tokio::time::Instant::now()
            .checked_sub(CHECKED_WITHIN)
            .unwrap_or_else(tokio::time::Instant::now);
        Self {
            state: state.clone(),
            endpoint: endpoint.clone(),
            shape,
            outstanding: Mutex::default(),
            last: tokio::sync::Mutex::new(Check {
                at: stale,
                open: false,
                failed: false,
                dropped: HashSet::new(),
            }),
        }
    }

    /// Takes in events just claimed: the next send checks again, so that each event is
    /// checked after its claim.
    pub(super) async fn claimed(&self, due: &[DueDelivery]) {
        lock(&self.outstanding).extend(due.iter().map(|e| e.id));
        if let Some(at) = tokio::time::Instant::now().checked_sub(CHECKED_WITHIN) {
            self.last.lock().await.at = at;
        }
    }

    /// Whether event `id` may be handed to the network now.
    pub(super) async fn admit(&self, id: Uuid) -> Admission {
        let mut last = self.last.lock().await;
        if last.at.elapsed() >= CHECKED_WITHIN {
            *last = self.check().await;
        }
        if last.failed {
            return Admission::Unchecked;
        }
        // Read last, after any wait on the database, so that what this replica heard while
        // the check ran holds the send back.
        if !last.open || client_disabled(&self.state, &self.endpoint.client_id) {
            return Admission::Changed;
        }
        if last.dropped.contains(&id) {
            lock(&self.outstanding).remove(&id);
            return Admission::Dropped;
        }
        lock(&self.outstanding).remove(&id);
        Admission::Go
    }

    /// Reads the endpoint and which outstanding events are still to be sent.
    async fn check(&self) -> Check {
        let at = tokio::time::Instant::now();
        let ids: Vec<Uuid> = lock(&self.outstanding).iter().copied().collect();
        let Endpoint { id, client_id } = &self.endpoint;
        match self.state.cases.still_to_send(*id, &ids).await {
            Ok((endpoint, pending)) => {
                let open = endpoint.as_ref().and_then(Shape::of).as_ref() == Some(&self.shape);
                let pending: HashSet<Uuid> = pending.into_iter().collect();
                let dropped = ids.into_iter().filter(|e| !pending.contains(e)).collect();
                if !open {
                    tracing::info!(%client_id, endpoint = %id, "webhook endpoint changed while its events were out; the rest go by it as it is now");
                }
                Check {
                    at,
                    open,
                    failed: false,
                    dropped,
                }
            }
            Err(e) => {
                // Sent blind, a change could be missed: nothing goes until the database answers.
                tracing::warn!(error = %e, %client_id, endpoint = %id, "checking a webhook endpoint before sending failed");
                Check {
                    at,
                    open: false,
                    failed: true,
                    dropped: HashSet::new(),
                }
            }
        }
    }
}

/// `set`, to read or change: each change to it is one call, so a panic elsewhere left it whole.
fn lock<T>(set: &Mutex<T>) -> MutexGuard<'_, T> {
    set.lock().unwrap_or_else(PoisonError::into_inner)
}
