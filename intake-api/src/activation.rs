//! The activation worker: cases become active once their delay has passed.

use std::sync::Arc;
use std::time::Duration;

use crate::sandbox;
use crate::state::AppState;
use crate::store::ACTIVATION_BATCH;

/// Activates due cases until aborted: a pass every poll period, and after a full pass the
/// next one at once, so a backlog drains at the database's pace.
pub async fn run(state: Arc<AppState>) {
    let period = Duration::from_millis(state.config.activation_poll_ms.max(10));
    let mut backlog = false;
    loop {
        if !backlog {
            tokio::time::sleep(period).await;
        }
        backlog = match state.cases.activate_due().await {
            Ok(activated) => {
                for a in &activated {
                    let name = a.world.counter(sandbox::CASES_ACTIVATED);
                    metrics::counter!(name, "brand" => a.brand.clone()).increment(1);
                    metrics::histogram!("intake_activation_lag_seconds")
                        .record(a.lag.as_secs_f64());
                }
                // One line per pass: each case's activation is in its history already, and a
                // backlog would otherwise write a line per case.
                if let Some(max_lag) = activated.iter().map(|a| a.lag).max() {
                    tracing::info!(
                        count = activated.len(),
                        max_lag_ms = max_lag.as_millis() as u64,
                        "cases activated"
                    );
                }
                activated.len() >= ACTIVATION_BATCH
            }
            Err(e) => {
                tracing::warn!(error = %e, "activation pass failed; retrying");
                false
            }
        };
    }
}

/// How often the activation backlog is measured.
const BACKLOG_PERIOD: std::time::Duration = std::time::Duration::from_secs(5);

/// Measures the activation backlog every [`BACKLOG_PERIOD`] until aborted, apart from the
/// worker: a worker that stalls stops activating but cannot stop these gauges from
/// showing the cases piling up.
pub async fn watch_backlog(state: Arc<AppState>) {
    let mut ticks = tokio::time::interval(BACKLOG_PERIOD);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        match state.cases.activation_backlog().await {
            Ok(backlog) => {
                let oldest = backlog
                    .oldest_due
                    .map(|due| (chrono::Utc::now() - due).num_milliseconds().max(0) as f64 / 1000.0)
                    .unwrap_or(0.0);
                metrics::gauge!("intake_activation_backlog").set(backlog.due as f64);
                metrics::gauge!("intake_activation_oldest_due_seconds").set(oldest);
            }
            Err(e) => tracing::warn!(error = %e, "measuring the activation backlog failed"),
        }
    }
}
