//! The activation worker: cases become active once their delay has passed.

use std::sync::Arc;
use std::time::Duration;

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
                    metrics::counter!("intake_cases_activated_total", "brand" => a.brand.clone())
                        .increment(1);
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
