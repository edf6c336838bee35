//! Upkeep of the intake database in the background: what is kept only for a while goes
//! once its time is up.

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use uuid::Uuid;

use service_kit::replay::DPOP_PROOFS;

use crate::state::AppState;
use crate::store::PURGE_BATCH;

/// How often expired idempotency keys and submissions past their retention are purged. A
/// key or a body is gone at most this long after its time is up; until then it only takes
/// room.
const PURGE_PERIOD: Duration = Duration::from_secs(60);

/// Purges expired idempotency keys, submission bodies older than
/// `INTAKE_SUBMISSION_RETENTION_DAYS` when it is set, sandbox cases older than
/// `INTAKE_SANDBOX_RETENTION_DAYS`, settled webhook events older than
/// `INTAKE_WEBHOOK_HISTORY_DAYS`, and DPoP proofs too old to be accepted again, every
/// [`PURGE_PERIOD`] until aborted.
/// Replicas doing it at once only empty the same rows.
pub async fn run(state: Arc<AppState>) {
    let retention = state
        .config
        .submission_retention_days
        .map(|days| chrono::Duration::days(i64::from(days)));
    // The last submission emptied, so each pass starts after what earlier ones did.
    let mut purged_up_to: Option<Uuid> = None;
    let mut ticks = tokio::time::interval(PURGE_PERIOD);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        match state.cases.purge_expired_keys().await {
            Ok(0) => {}
            Ok(purged) => tracing::info!(purged, "expired idempotency keys purged"),
            Err(e) => tracing::warn!(error = %e, "purging expired idempotency keys failed"),
        }
        if let Some(retention) = retention {
            purged_up_to = purge_submissions(&state, retention, purged_up_to).await;
        }
        purge_sandbox(&state).await;
        prune_webhook_history(&state).await;
        if let Err(e) = state.replay.prune(&DPOP_PROOFS, Utc::now()).await {
            tracing::warn!(error = %e, "forgetting expired DPoP proofs failed");
        }
    }
}

/// Deletes the sandbox cases older than `INTAKE_SANDBOX_RETENTION_DAYS`, a batch at a time.
async fn purge_sandbox(state: &AppState) {
    let days = i64::from(state.config.sandbox_retention_days);
    let cutoff = Utc::now() - chrono::Duration::days(days);
    in_batches(
        || state.cases.purge_sandbox(cutoff),
        |deleted| {
            metrics::counter!("intake_sandbox_cases_deleted_total").increment(deleted);
            tracing::info!(deleted, "sandbox cases past their retention deleted");
        },
        "deleting sandbox cases past their retention failed",
    )
    .await;
}

/// Deletes the webhook events delivered or given up on more than
/// `INTAKE_WEBHOOK_HISTORY_DAYS` ago, with their tries, a batch at a time.
async fn prune_webhook_history(state: &AppState) {
    let days = i64::from(state.config.webhooks.history_days);
    let cutoff = Utc::now() - chrono::Duration::days(days);
    in_batches(
        || state.cases.prune_history(cutoff),
        |deleted| {
            tracing::info!(
                deleted,
                "webhook events past the history's retention deleted"
            )
        },
        "deleting webhook events past the history's retention failed",
    )
    .await;
}

/// Runs `batch` until one does less than [`PURGE_BATCH`], telling `done` of each that did
/// something; a failure is logged as `failed` and ends the pass.
async fn in_batches<F, Fut>(mut batch: F, done: impl Fn(u64), failed: &str)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<u64, crate::store::StoreError>>,
{
    loop {
        match batch().await {
            Ok(n) => {
                if n > 0 {
                    done(n);
                }
                if n < PURGE_BATCH {
                    return;
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "{failed}");
                return;
            }
        }
    }
}

/// Empties the bodies of every submission received more than `retention` ago, a batch at a
/// time; answers where the next pass starts.
async fn purge_submissions(
    state: &AppState,
    retention: chrono::Duration,
    mut after: Option<Uuid>,
) -> Option<Uuid> {
    let cutoff = Utc::now() - retention;
    loop {
        match state.cases.purge_submissions(cutoff, after).await {
            Ok((emptied, last)) => {
                after = last;
                if emptied > 0 {
                    metrics::counter!("intake_submissions_purged_total").increment(emptied);
                    tracing::info!(emptied, "submissions past their retention emptied");
                }
                if emptied < PURGE_BATCH {
                    return after;
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "emptying submissions past their retention failed");
                return after;
            }
        }
    }
}
