//! Sealing the audit trail's entries written without the key.

use anyhow::bail;
use sea_orm::DatabaseConnection;
use serde_json::json;

use super::begin_change;
use crate::audit;

/// Seals the audit entries written without the key since the last sealed one (by the
/// previous release, a migration, or a command run without the key), with an `audit.seal`
/// entry saying which; returns their first and last, none when there were none.
pub async fn seal_audit_trail(
    db: &DatabaseConnection,
    actor: &audit::Author,
) -> anyhow::Result<Option<(i64, i64)>> {
    if !actor.seals() {
        bail!("sealing the audit trail needs AUTH_KEY_ENCRYPTION_KEY");
    }
    if audit::unsealed(db).await?.is_none() {
        return Ok(None);
    }
    let txn = begin_change(db).await?;
    // Another process may have sealed them meanwhile: then nothing changes.
    let Some((from, to)) = audit::unsealed(&txn).await? else {
        return Ok(None);
    };
    let detail = json!({"from": from, "to": to});
    audit::append(&txn, actor, "audit.seal", "audit_log", detail).await?;
    txn.commit().await?;
    Ok(Some((from, to)))
}
