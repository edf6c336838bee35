//! A key pair that signs access tokens.

use sea_orm::entity::prelude::*;

/// One signing key. Its state follows from its dates and those of the keys after it.
#[derive(Clone, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "signing_keys")]
pub struct Model {
    /// Key id: the RFC 7638 thumbprint of the public key.
    #[sea_orm(primary_key, auto_increment = false)]
    pub kid: String,
    /// The private key: PKCS#8 sealed under the key-encryption key, or `pkcs11:LABEL`, the
    /// label of a key that never leaves its PKCS#11 token.
    #[sea_orm(column_type = "Text")]
    pub private_key: String,
    /// When the key was generated (and published).
    pub created_at: DateTimeUtc,
    /// When it starts signing; meaningless while the key is on standby.
    pub activates_at: DateTimeUtc,
    /// Set by an emergency revoke: unpublished and never used again.
    pub revoked_at: Option<DateTimeUtc>,
    /// Published, but with no activation scheduled: the key the next rotation or revoke
    /// switches to.
    pub standby: bool,
    /// The algorithm it signs with: `RS256`, `PS256` or `ES256`.
    pub alg: String,
    /// The public half as a JWK, for a key whose private half is kept outside the database.
    #[sea_orm(column_type = "Text", nullable)]
    pub public_jwk: Option<String>,
}

// Hand-written so the private key can never reach a log through `{:?}`.
impl std::fmt::Debug for Model {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigningKey")
            .field("kid", &self.kid)
            .field("private_key", &"[REDACTED]")
            .field("created_at", &self.created_at)
            .field("activates_at", &self.activates_at)
            .field("revoked_at", &self.revoked_at)
            .field("standby", &self.standby)
            .field("alg", &self.alg)
            .field("public_jwk", &self.public_jwk)
            .finish()
    }
}

/// Relations of `signing_keys`.
#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
