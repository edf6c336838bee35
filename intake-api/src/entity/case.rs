//! A customer's case: one per brand and e-mail address.

use sea_orm::entity::prelude::*;

/// Where a case is in its life: it starts `pending_activation` (or `referred`, until its
/// enquiry) and becomes `active` at `activates_at`. Stored as its text, which the raw
/// statements and the index of pending cases name too.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, EnumIter, DeriveActiveEnum, serde::Serialize)]
#[sea_orm(rs_type = "String", db_type = "Text")]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Referred by a partner, waiting for the customer's enquiry: no activation touches it,
    /// and the first enquiry makes it `pending_activation`.
    #[sea_orm(string_value = "referred")]
    Referred,
    /// Accepted; it becomes active at `activates_at`.
    #[sea_orm(string_value = "pending_activation")]
    PendingActivation,
    /// Staff of its brand can service it.
    #[sea_orm(string_value = "active")]
    Active,
}

impl Status {
    /// Its stored text, borrowed: raw statements bind and embed it on the hot path.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Referred => "referred",
            Self::PendingActivation => "pending_activation",
            Self::Active => "active",
        }
    }
}

/// One case.
#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "cases")]
pub struct Model {
    /// Internal identifier.
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    /// The case reference partners see: digits, unique, not sequential.
    #[sea_orm(unique)]
    pub reference: String,
    /// The brand the case belongs to.
    pub brand: String,
    /// The applicant's e-mail address, trimmed and lower-cased.
    pub email: String,
    /// Where it is in its life.
    pub status: Status,
    /// The enquiry as last applied, normalised.
    pub enquiry: Json,
    /// The eligibility-engine product attached last.
    pub product_uuid: Option<Uuid>,
    /// When the case was created.
    pub created_at: DateTimeUtc,
    /// When it was last changed.
    pub updated_at: DateTimeUtc,
    /// When it becomes active.
    pub activates_at: DateTimeUtc,
    /// When it became active.
    pub activated_at: Option<DateTimeUtc>,
    /// The newest redirect link made for it: only that one may be redeemed.
    pub redirect_token_id: Option<Uuid>,
    /// Made by a sandbox client: apart from real cases, which have their own case for the
    /// same brand and e-mail.
    pub sandbox: bool,
}

/// Relations of `cases`.
#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}

#[cfg(test)]
mod tests {
    use sea_orm::Iterable;

    use super::*;

    #[test]
    fn each_status_reads_back_from_the_text_it_is_stored_as() {
        for status in Status::iter() {
            assert_eq!(status.to_value(), status.as_str());
            assert_eq!(Status::try_from_value(&status.to_value()).unwrap(), status);
            let json = serde_json::to_value(status).unwrap();
            assert_eq!(json, status.as_str());
        }
        for other in ["Active", "active\0"] {
            assert!(
                Status::try_from_value(&other.to_owned()).is_err(),
                "{other:?}"
            );
        }
    }
}
