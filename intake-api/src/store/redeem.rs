//! Redeeming a customer's redirect link: the brand's portal trades the link's token, once,
//! for the case and product it continues with.

use chrono::Utc;
use sea_orm::sea_query::Expr;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
use uuid::Uuid;

use super::refer::newest_referral_link;
use super::{CaseStore, StoreError, bounded, event};
use crate::entity::{case, case_event, redirect_token};
use crate::sandbox::World;

/// What a redeemed link continues with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redeemed {
    /// The case's reference.
    pub reference: String,
    /// Its brand.
    pub brand: String,
    /// Its customer's e-mail address.
    pub email: String,
    /// The product attached when the link was made; none for a referral's link.
    pub product_uuid: Option<Uuid>,
    /// The case's world: a sandbox client's, made for practice, is not a real customer's.
    pub world: World,
}

/// What a redeem did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Redemption {
    /// The link was good and is now used.
    Redeemed(Redeemed),
    /// No such link, or it is used, expired or replaced by a newer one.
    Gone,
    /// A link of a brand the portal is not bound to, left as it was: the portal is told
    /// what it would be told of a link that never existed.
    OtherBrand,
}

impl CaseStore {
    /// Marks the link whose token hashes to `token_hash` used and answers what it continues
    /// with, if it can still be used, and by this portal: it exists, is of one of `brands`,
    /// was never used, has not expired, its customer's data was not erased, and it is the
    /// newest of its kind: for attach's links, the newest link made for its case; for a
    /// referral's, the newest its partner's referrals made for the case, which is all a
    /// referral's partner knows of (it redeems with the referral's reference, whoever else
    /// is on the case). Of two redeems of one link exactly one gets it: the mark is a
    /// conditional update, and the loser's finds the token already used.
    pub async fn redeem(
        &self,
        token_hash: &str,
        portal_client_id: &str,
        brands: &[String],
    ) -> Result<Redemption, StoreError> {
        bounded(async {
            let _connection = self.request_connection().await?;
            Box::pin(self.redeem_now(token_hash, portal_client_id, brands)).await
        })
        .await
    }

    async fn redeem_now(
        &self,
        token_hash: &str,
        portal_client_id: &str,
        brands: &[String],
    ) -> Result<Redemption, StoreError> {
        let now = Utc::now();
        let txn = self.begin_write().await?;
        let Some(token) = redirect_token::Entity::find()
            .filter(redirect_token::Column::TokenHash.eq(token_hash))
            .one(&txn)
            .await?
        else {
            return Ok(Redemption::Gone);
        };
        let Some(case) = case::Entity::find_by_id(token.case_id).one(&txn).await? else {
            return Ok(Redemption::Gone);
        };
        // Before anything about the link's state: another brand's portal learns nothing of it.
        if !brands.contains(&case.brand) {
            return Ok(Redemption::OtherBrand);
        }
        if token.used_at.is_some() || token.expires_at <= now {
            return Ok(Redemption::Gone);
        }
        if case.email.starts_with(super::ERASED_EMAIL_PREFIX) {
            return Ok(Redemption::Gone);
        }
        let newest = match &token.client_id {
            Some(referrer) => newest_referral_link(&txn, case.id, referrer)
                .await?
                .is_some_and(|(id, _)| id == token.id),
            None => case.redirect_token_id == Some(token.id),
        };
        if !newest {
            // A newer link was made since.
            return Ok(Redemption::Gone);
        }
        let marked = redirect_token::Entity::update_many()
            .col_expr(redirect_token::Column::UsedAt, Expr::value(now))
            .filter(redirect_token::Column::Id.eq(token.id))
            .filter(redirect_token::Column::UsedAt.is_null())
            .exec(&txn)
            .await?;
        if marked.rows_affected != 1 {
            return Ok(Redemption::Gone);
        }
        let detail = serde_json::json!({"product_uuid": token.product_uuid});
        case_event::Entity::insert(event(
            case.id,
            "redirect_redeemed",
            Some(portal_client_id),
            Some(detail),
            now,
        ))
        .exec_without_returning(&txn)
        .await?;
        txn.commit().await?;
        Ok(Redemption::Redeemed(Redeemed {
            // A referral's own, which is not the case's when the customer was another
            // partner's: the link tells nothing of their case.
            reference: token.reference.unwrap_or(case.reference),
            brand: case.brand,
            email: case.email,
            product_uuid: token.product_uuid,
            world: World::of(case.sandbox),
        }))
    }
}
