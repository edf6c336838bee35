//! Single-use tokens carried by customer redirect links, kept only as hashes.

use sea_orm::entity::prelude::*;

/// One redirect token.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "redirect_tokens")]
pub struct Model {
    /// Row identifier.
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    /// The case the link continues.
    pub case_id: Uuid,
    /// SHA-256 of the token, base64url.
    #[sea_orm(unique)]
    pub token_hash: String,
    /// The product attached when the link was made; none for a referral's link, which
    /// continues with the customer's enquiry.
    pub product_uuid: Option<Uuid>,
    /// When it was made.
    pub created_at: DateTimeUtc,
    /// When it stops working.
    pub expires_at: DateTimeUtc,
    /// When the customer used it; a token works once.
    pub used_at: Option<DateTimeUtc>,
    /// The partner whose referral made it; none for attach's links (and links made before
    /// referrals named theirs), which only the case's newest redeems.
    pub client_id: Option<String>,
    /// The reference the referral was answered with, which redeeming it answers: the
    /// case's, or the referral's own when the case was another partner's customer.
    pub reference: Option<String>,
}

/// Relations of `redirect_tokens`.
#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
