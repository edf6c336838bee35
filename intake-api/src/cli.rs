//! Operator commands.

use crate::config::{CaseCommand, Config};
use crate::{migration, store};

/// Runs `intake-api case ...` and returns what it prints.
pub async fn case(config: &Config, command: CaseCommand) -> anyhow::Result<serde_json::Value> {
    let db = intake_shared::db::connect(&config.database_url, 2).await?;
    migration::run(&db).await?;
    match command {
        CaseCommand::Show { reference } => {
            let view = store::show_case(&db, &reference)
                .await?
                .ok_or_else(|| anyhow::anyhow!("no case with reference {reference}"))?;
            Ok(serde_json::to_value(view)?)
        }
    }
}
