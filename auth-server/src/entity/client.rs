//! A partner application allowed to ask for tokens.

use sea_orm::entity::prelude::*;

/// One registered client.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "clients")]
pub struct Model {
    /// Public identifier the partner authenticates with.
    #[sea_orm(primary_key, auto_increment = false)]
    pub client_id: String,
    /// Operator-facing name of the partner.
    pub name: String,
    /// Scopes the client may be granted, space-separated.
    pub scopes: String,
    /// The brands a customer-portal client redeems links of, space-separated; none for
    /// partners, and for portal clients registered before clients had brands.
    pub brands: Option<String>,
    /// How it authenticates: `client_secret` (its secrets) or `private_key_jwt` (an
    /// assertion signed with one of its keys).
    pub auth_method: String,
    /// Its public keys, a JWKS as registered, for `private_key_jwt`.
    pub jwks: Option<String>,
    /// Where its public keys are published, for `private_key_jwt`; not used yet.
    pub jwks_uri: Option<String>,
    /// Whether it gets only DPoP-bound tokens: a token request without a proof is refused.
    pub dpop_required: bool,
    /// Whether it is a sandbox client, a partner practising: its tokens say so, and the
    /// intake-api keeps what it makes apart from real cases.
    pub sandbox: bool,
    /// Set when an operator disabled the client; it then gets no token.
    pub disabled_at: Option<DateTimeUtc>,
    /// When the client was registered.
    pub created_at: DateTimeUtc,
    /// Last change by an operator.
    pub updated_at: DateTimeUtc,
    /// What keeps it as code: `apply` for a client a clients file made or adopted, the only
    /// ones `apply` changes or prunes; none for a client made by hand (`client create`,
    /// `client ensure`).
    pub managed_by: Option<String>,
}

/// Relations of `clients`.
#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
