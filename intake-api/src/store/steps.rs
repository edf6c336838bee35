//! A write of several statements, written once for both databases.
//!
//! PostgreSQL runs the steps as one statement, each a data-modifying `WITH` query: one round
//! trip and one implicit transaction. SQLite's `WITH` queries cannot write, so it runs them
//! one after another in the caller's transaction, and gives each step the rows the earlier
//! ones returned as a `WITH` query of bound values by the same name. Both run the same text
//! with the same bound values; SQLite, which keeps JSON as text, only goes without
//! PostgreSQL's `::jsonb` casts.

use sea_orm::sqlx::sqlite::SqliteValueRef;
use sea_orm::sqlx::{Decode, Row, Sqlite, TypeInfo, ValueRef};
use sea_orm::{
    ConnectionTrait, DatabaseTransaction, DbBackend, DbErr, QueryResult, Statement, Value, Values,
};

/// One statement of a write.
#[derive(Debug)]
pub struct Step {
    /// What the later statements call the rows it returns.
    pub name: &'static str,
    /// The statement, without its `RETURNING` list.
    pub sql: &'static str,
    /// The columns it returns to the later statements (its `RETURNING` list); none when they
    /// read nothing of it.
    pub returns: &'static [&'static str],
}

/// A write: its steps in order, then its last statement, whose rows are what it returns.
#[derive(Debug)]
pub struct Steps {
    steps: &'static [Step],
    /// The values bound to `$1`, `$2`..., by name, for those who run the statement elsewhere
    /// (`intake-api statements`, the benchmark).
    parameters: &'static [&'static str],
    /// PostgreSQL's one statement.
    postgres: String,
    /// SQLite's statements: each step's, with its `RETURNING` list.
    sqlite: Vec<String>,
    /// SQLite's last statement.
    sqlite_last: String,
}

impl Steps {
    /// The write of `steps` then `last`, with `parameters` bound.
    pub fn new(
        steps: &'static [Step],
        last: &'static str,
        parameters: &'static [&'static str],
    ) -> Self {
        let with: Vec<String> = steps
            .iter()
            .map(|step| format!("{} AS (\n{}{}\n)", step.name, step.sql, returning(step)))
            .collect();
        let postgres = if with.is_empty() {
            last.to_owned()
        } else {
            format!("WITH {}\n{last}", with.join(", "))
        };
        // SQLite keeps JSON as text, as it is bound.
        let for_sqlite = |sql: &str| sql.replace("::jsonb", "");
        let sqlite = steps
            .iter()
            .map(|step| for_sqlite(&format!("{}{}", step.sql, returning(step))))
            .collect();
        Self {
            steps,
            parameters,
            postgres,
            sqlite,
            sqlite_last: for_sqlite(last),
        }
    }

    /// The write as PostgreSQL runs it: one statement.
    pub fn postgres(&self) -> &str {
        &self.postgres
    }

    /// The names of the values bound to `$1`, `$2`...
    pub fn parameters(&self) -> &'static [&'static str] {
        self.parameters
    }

    /// Runs the write on SQLite in `txn`, with `values` bound to `$1`, `$2`...: the rows of
    /// its last statement.
    pub async fn run_on_sqlite(
        &self,
        txn: &DatabaseTransaction,
        values: Vec<Value>,
    ) -> Result<Vec<QueryResult>, DbErr> {
        debug_assert_eq!(values.len(), self.parameters.len());
        let mut values = values;
        // `WITH` queries of the rows each earlier step returned, bound after the write's own.
        let mut earlier: Vec<String> = Vec::new();
        for (step, sql) in self.steps.iter().zip(&self.sqlite) {
            let rows = txn.query_all_raw(sqlite(&earlier, sql, &values)).await?;
            if !step.returns.is_empty() {
                earlier.push(carried(step, &rows, &mut values)?);
            }
        }
        txn.query_all_raw(sqlite(&earlier, &self.sqlite_last, &values))
            .await
    }
}

/// `sql` with `values` bound, after the `WITH` queries of what earlier steps returned.
fn sqlite(earlier: &[String], sql: &str, values: &[Value]) -> Statement {
    let sql = if earlier.is_empty() {
        sql.to_owned()
    } else {
        format!("WITH {}\n{sql}", earlier.join(", "))
    };
    Statement::from_sql_and_values(DbBackend::Sqlite, sql, Values(values.to_vec()))
}

/// `step`'s `RETURNING` list, if it returns anything.
fn returning(step: &Step) -> String {
    if step.returns.is_empty() {
        return String::new();
    }
    let columns: Vec<String> = step.returns.iter().map(|c| format!(r#""{c}""#)).collect();
    format!("\nRETURNING {}", columns.join(", "))
}

/// A `WITH` query by `step`'s name of the `rows` it returned, their values bound after
/// `values`, to which they are added.
fn carried(step: &Step, rows: &[QueryResult], values: &mut Vec<Value>) -> Result<String, DbErr> {
    let columns: Vec<String> = step.returns.iter().map(|c| format!(r#""{c}""#)).collect();
    let mut tuples = Vec::with_capacity(rows.len());
    for row in rows {
        let row = row.try_as_sqlite_row().ok_or_else(|| {
            DbErr::Custom("a SQLite write returned another database's row".into())
        })?;
        let mut placeholders = Vec::with_capacity(columns.len());
        for i in 0..columns.len() {
            values.push(stored_value(row.try_get_raw(i).map_err(type_error)?)?);
            placeholders.push(format!("${}", values.len()));
        }
        tuples.push(format!("({})", placeholders.join(", ")));
    }
    let rows = if tuples.is_empty() {
        // No row: a query of the same columns that returns none.
        let nulls = vec!["NULL"; columns.len()].join(", ");
        format!("SELECT {nulls} WHERE 0")
    } else {
        format!("VALUES {}", tuples.join(", "))
    };
    Ok(format!(
        r#""{}"({}) AS ({rows})"#,
        step.name,
        columns.join(", ")
    ))
}

/// A returned value, bound again exactly as SQLite stored it (its storage class: an id
/// stays a blob, a time text), so later steps compare and store it as the step did.
fn stored_value(value: SqliteValueRef<'_>) -> Result<Value, DbErr> {
    if value.is_null() {
        return Ok(Value::String(None));
    }
    let decoded = match value.type_info().name() {
        "INTEGER" => Value::BigInt(Some(Decode::<Sqlite>::decode(value).map_err(decode_error)?)),
        "REAL" => Value::Double(Some(Decode::<Sqlite>::decode(value).map_err(decode_error)?)),
        "BLOB" => Value::Bytes(Some(Decode::<Sqlite>::decode(value).map_err(decode_error)?)),
        _ => Value::String(Some(Decode::<Sqlite>::decode(value).map_err(decode_error)?)),
    };
    Ok(decoded)
}

fn type_error(e: sea_orm::sqlx::Error) -> DbErr {
    DbErr::Type(e.to_string())
}

fn decode_error(e: sea_orm::sqlx::error::BoxDynError) -> DbErr {
    DbErr::Type(e.to_string())
}

#[cfg(test)]
mod tests {
    use sea_orm::TransactionTrait;

    use super::*;

    static STEPS: [Step; 2] = [
        Step {
            name: "made",
            sql: r#"INSERT INTO "things" ("id", "name", "size") VALUES ($1, $2, $3::jsonb)"#,
            returns: &["id", "name"],
        },
        Step {
            name: "noted",
            sql: r#"INSERT INTO "notes" ("thing", "text") SELECT "id", 'made ' || "name" FROM "made""#,
            returns: &["thing"],
        },
    ];

    fn write() -> Steps {
        Steps::new(
            &STEPS,
            r#"SELECT "made"."name", "noted"."thing" FROM "made", "noted""#,
            &["id", "name", "size"],
        )
    }

    #[test]
    fn postgresql_gets_one_statement_of_data_modifying_queries() {
        assert_eq!(
            write().postgres(),
            r#"WITH made AS (
INSERT INTO "things" ("id", "name", "size") VALUES ($1, $2, $3::jsonb)
RETURNING "id", "name"
), noted AS (
INSERT INTO "notes" ("thing", "text") SELECT "id", 'made ' || "name" FROM "made"
RETURNING "thing"
)
SELECT "made"."name", "noted"."thing" FROM "made", "noted""#
        );
    }

    #[tokio::test]
    async fn sqlite_runs_the_steps_in_turn_each_reading_what_the_earlier_returned() {
        let db = service_kit::db::connect("sqlite::memory:", 1)
            .await
            .unwrap();
        for sql in [
            r#"CREATE TABLE "things" ("id" BLOB PRIMARY KEY, "name" TEXT, "size" TEXT)"#,
            r#"CREATE TABLE "notes" ("thing" BLOB, "text" TEXT)"#,
        ] {
            db.execute_unprepared(sql).await.unwrap();
        }
        let id = uuid::Uuid::now_v7();
        let txn = db.begin().await.unwrap();
        let rows = write()
            .run_on_sqlite(&txn, vec![id.into(), "box".into(), r#"{"cm":3}"#.into()])
            .await
            .unwrap();
        txn.commit().await.unwrap();
        assert_eq!(rows.len(), 1);
        let name: String = rows[0].try_get_by_index(0).unwrap();
        let thing: uuid::Uuid = rows[0].try_get_by_index(1).unwrap();
        assert_eq!((name.as_str(), thing), ("box", id));
        let note = db
            .query_one_raw(Statement::from_string(
                DbBackend::Sqlite,
                r#"SELECT "thing", "text" FROM "notes""#,
            ))
            .await
            .unwrap()
            .unwrap();
        let (noted, text): (uuid::Uuid, String) = note.try_get_many_by_index().unwrap();
        assert_eq!((noted, text.as_str()), (id, "made box"));
        let size: String = db
            .query_one_raw(Statement::from_string(
                DbBackend::Sqlite,
                r#"SELECT "size" FROM "things""#,
            ))
            .await
            .unwrap()
            .unwrap()
            .try_get_by_index(0)
            .unwrap();
        assert_eq!(size, r#"{"cm":3}"#, "stored as the text it was given");
    }

    #[tokio::test]
    async fn a_step_that_returns_no_row_gives_the_later_ones_none() {
        static NONE: [Step; 1] = [Step {
            name: "found",
            sql: r#"UPDATE "things" SET "name" = $1 WHERE "name" = 'absent'"#,
            returns: &["id"],
        }];
        let db = service_kit::db::connect("sqlite::memory:", 1)
            .await
            .unwrap();
        db.execute_unprepared(r#"CREATE TABLE "things" ("id" BLOB, "name" TEXT)"#)
            .await
            .unwrap();
        let write = Steps::new(&NONE, r#"SELECT count(*) FROM "found""#, &["name"]);
        let txn = db.begin().await.unwrap();
        let rows = write.run_on_sqlite(&txn, vec!["x".into()]).await.unwrap();
        let count: i64 = rows[0].try_get_by_index(0).unwrap();
        assert_eq!(count, 0);
    }
}
