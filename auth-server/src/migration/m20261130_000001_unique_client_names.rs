use std::collections::HashSet;

use sea_orm::Statement;
use sea_orm_migration::prelude::*;
use serde_json::json;

use crate::audit;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261130_000001_unique_client_names"
    }
}

#[derive(DeriveIden)]
enum Clients {
    Table,
    ClientId,
    Name,
}

const INDEX: &str = "idx_clients_name_lower";

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_connection();
        let backend = db.get_database_backend();
        let rows = db
            .query_all_raw(Statement::from_string(
                backend,
                r#"SELECT "client_id", "name" FROM "clients" ORDER BY "created_at", "client_id""#,
            ))
            .await?;
        // Names told apart only by case predate the rule: the oldest keeps its name and the
        // others take their id beside it, in the audit trail like any change to a client,
        // rather than the index failing every start-up.
        let mut seen = HashSet::new();
        for row in rows {
            let client_id: String = row.try_get("", "client_id")?;
            let name: String = row.try_get("", "name")?;
            if seen.insert(name.to_lowercase()) {
                continue;
            }
            let renamed = format!("{name} ({client_id})");
            manager
                .exec_stmt(
                    Query::update()
                        .table(Clients::Table)
                        .value(Clients::Name, renamed.as_str())
                        .and_where(Expr::col(Clients::ClientId).eq(client_id.as_str()))
                        .to_owned(),
                )
                .await?;
            crate::store::bump_revision(db)
                .await
                .map_err(|e| DbErr::Migration(format!("{e:#}")))?;
            let detail = json!({"name": renamed, "previous_name": name});
            // A migration runs without the key: `audit seal` accepts these entries once.
            audit::append_before_sealing(db, "client.rename", &client_id, detail)
                .await
                .map_err(|e| DbErr::Migration(format!("{e:#}")))?;
            tracing::warn!(
                client_id,
                previous_name = name,
                name = renamed,
                "client renamed: client names are now unique whatever their case"
            );
        }
        db.execute_unprepared(&format!(
            r#"CREATE UNIQUE INDEX "{INDEX}" ON "clients" (lower("name"))"#
        ))
        .await?;
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .get_connection()
            .execute_unprepared(&format!(r#"DROP INDEX IF EXISTS "{INDEX}""#))
            .await?;
        Ok(())
    }
}
