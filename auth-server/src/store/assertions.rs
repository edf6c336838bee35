//! Client assertions already spent: what makes each one usable once, at every replica.

use chrono::{DateTime, Utc};
use sea_orm::sea_query::Expr;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter, Set, SqlErr,
};

use crate::assertion::SpentAssertion;
use crate::entity::client_assertion;

/// Records `client_id`'s assertion as spent; false when it was spent before. A row left
/// behind by an expired assertion with the same `jti` is taken over, not counted as a use.
pub async fn spend_assertion(
    db: &DatabaseConnection,
    client_id: &str,
    spent: &SpentAssertion,
    now: DateTime<Utc>,
) -> Result<bool, sea_orm::DbErr> {
    let inserted = client_assertion::ActiveModel {
        client_id: Set(client_id.to_owned()),
        jti: Set(spent.jti.clone()),
        expires_at: Set(spent.expires_at),
    }
    .insert(db)
    .await;
    match inserted {
        Ok(_) => Ok(true),
        Err(e) if matches!(e.sql_err(), Some(SqlErr::UniqueConstraintViolation(_))) => {
            let taken_over = client_assertion::Entity::update_many()
                .col_expr(
                    client_assertion::Column::ExpiresAt,
                    Expr::value(spent.expires_at),
                )
                .filter(client_assertion::Column::ClientId.eq(client_id))
                .filter(client_assertion::Column::Jti.eq(spent.jti.as_str()))
                .filter(client_assertion::Column::ExpiresAt.lte(now))
                .exec(db)
                .await?;
            Ok(taken_over.rows_affected == 1)
        }
        Err(e) => Err(e),
    }
}

/// Forgets assertions that expired before `now`: they would be refused as expired anyway.
pub async fn prune_assertions(
    db: &DatabaseConnection,
    now: DateTime<Utc>,
) -> Result<u64, sea_orm::DbErr> {
    let deleted = client_assertion::Entity::delete_many()
        .filter(client_assertion::Column::ExpiresAt.lte(now))
        .exec(db)
        .await?;
    Ok(deleted.rows_affected)
}
