//! Upkeep of the intake database in the background: what is kept only for a while goes
//! once its time is up.

use std::sync::Arc;
use std::time::Duration;

use crate::state::AppState;

/// How often expired idempotency keys are purged. A key is forgotten at most this long
/// after its day is up; until then it only takes room.
const PURGE_PERIOD: Duration = Duration::from_secs(60);

/// Purges expired idempotency keys every [`PURGE_PERIOD`] until aborted. Replicas doing it
/// at once only delete the same rows.
pub async fn run(state: Arc<AppState>) {
    let mut ticks = tokio::time::interval(PURGE_PERIOD);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        match state.cases.purge_expired_keys().await {
            Ok(0) => {}
            Ok(purged) => tracing::info!(purged, "expired idempotency keys purged"),
            Err(e) => tracing::warn!(error = %e, "purging expired idempotency keys failed"),
        }
    }
}
