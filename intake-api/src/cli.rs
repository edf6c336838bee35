//! Operator commands.

use crate::config::{CaseCommand, Config};
use crate::migration;
use crate::store::CaseStore;

/// Runs `intake-api case ...` and returns what it prints.
pub async fn case(config: &Config, command: CaseCommand) -> anyhow::Result<serde_json::Value> {
    const POOL: u32 = 2;
    let db = migration::open_existing(&config.database_url, POOL).await?;
    let cases = CaseStore::new(db, POOL, config.timing());
    match command {
        CaseCommand::Show { reference } => {
            let view = cases
                .show(&reference)
                .await?
                .ok_or_else(|| anyhow::anyhow!("no case with reference {reference}"))?;
            Ok(serde_json::to_value(view)?)
        }
    }
}
