//! Where the signing keys' private halves live: the one interface the rotation logic and the
//! registry go through, never knowing which it is.
//!
//! By default a new key is made in this process and kept in the database sealed under the
//! key-encryption key. With a [`KeyVault`] (a PKCS#11 token, [`pkcs11`]; a cloud KMS could
//! follow) a new key is made inside the vault and never leaves it: the database keeps its
//! kid, its public half and the vault's name for it, and every signature is the vault's. Keys
//! sealed before a vault was configured keep loading from the database until they retire.

pub mod pkcs11;

use std::sync::Arc;

use anyhow::{Context, anyhow};
use shared::claims::TokenAlgorithm;

use crate::entity::signing_key;
use crate::keys::{self, ExternalKey, Jwk, LoadedKey, SigningKeySealer};

/// A place outside this process that makes, keeps and uses private keys.
pub trait KeyVault: Send + Sync {
    /// The prefix of what the database keeps for the vault's keys (`pkcs11`), and the name
    /// operators know it by.
    fn scheme(&self) -> &'static str;

    /// Makes a key pair for `alg` inside the vault, named `kid` once its public half is
    /// known: the name the vault knows it by, and its public half, whose thumbprint is the
    /// kid. Blocking: key generation takes a while.
    fn generate(&self, alg: TokenAlgorithm) -> anyhow::Result<(String, Jwk)>;

    /// The key the vault knows as `name`, ready to sign. Fails when the vault holds no
    /// such key.
    fn key(&self, name: &str) -> anyhow::Result<Arc<dyn ExternalKey>>;

    /// Destroys the key the vault knows as `name`, so that it can never sign again.
    fn destroy(&self, name: &str) -> anyhow::Result<()>;
}

/// A new key, as its database row keeps it.
pub struct NewKey {
    /// The RFC 7638 thumbprint of its public half.
    pub kid: String,
    /// What it signs with.
    pub alg: TokenAlgorithm,
    /// The `private_key` column: the sealed PKCS#8 key, or `SCHEME:NAME` for a vault's.
    pub private_key: String,
    /// The `public_jwk` column: the public half, for a key whose private half is elsewhere.
    pub public_jwk: Option<String>,
}

/// The signing keys' store: sealed in the database, or in a vault.
pub struct KeyStore {
    sealer: SigningKeySealer,
    vault: Option<Arc<dyn KeyVault>>,
}

impl std::fmt::Debug for KeyStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyStore")
            .field("vault", &self.vault.as_ref().map(|v| v.scheme()))
            .finish_non_exhaustive()
    }
}

impl KeyStore {
    /// Keys sealed with `sealer` in the database, and made in `vault` when there is one.
    pub fn new(sealer: SigningKeySealer, vault: Option<Arc<dyn KeyVault>>) -> Self {
        Self { sealer, vault }
    }

    /// The key-encryption key, which also roots the keys derived for other uses.
    pub fn sealer(&self) -> &SigningKeySealer {
        &self.sealer
    }

    /// Where new keys are made: `database` or the vault's scheme.
    pub fn kind(&self) -> &'static str {
        self.vault.as_ref().map_or("database", |v| v.scheme())
    }

    /// Makes a new key for `alg`. Blocking: run it off the async workers.
    pub fn generate(&self, alg: TokenAlgorithm) -> anyhow::Result<NewKey> {
        let Some(vault) = &self.vault else {
            let generated = keys::generate_key(alg)?;
            let sealed =
                keys::seal_private_key(&self.sealer, &generated.kid, generated.pkcs8.expose())?;
            return Ok(NewKey {
                kid: generated.kid,
                alg,
                private_key: sealed,
                public_jwk: None,
            });
        };
        let (name, jwk) = vault.generate(alg)?;
        Ok(NewKey {
            kid: jwk.kid.clone(),
            alg,
            private_key: format!("{}:{name}", vault.scheme()),
            public_jwk: Some(serde_json::to_string(&jwk)?),
        })
    }

    /// The key of `row`, ready to sign.
    pub fn load(&self, row: &signing_key::Model, alg: TokenAlgorithm) -> anyhow::Result<LoadedKey> {
        let Some((vault, name)) = self.in_vault(row)? else {
            let der = keys::open_private_key(&self.sealer, &row.kid, &row.private_key)?;
            return LoadedKey::new(row.kid.clone(), alg, row.created_at, row.activates_at, &der);
        };
        let jwk: Jwk = serde_json::from_str(row.public_jwk.as_deref().unwrap_or_default())
            .with_context(|| format!("key {} has no readable public half", row.kid))?;
        if jwk.thumbprint() != row.kid {
            anyhow::bail!("key {}: its stored public half is another key's", row.kid);
        }
        let key = vault.key(name)?;
        let loaded = LoadedKey::external(
            row.kid.clone(),
            alg,
            row.created_at,
            row.activates_at,
            jwk.with_kid(row.kid.clone()),
            key,
        )?;
        // One signature checked against the stored public half: the vault's object is the
        // key the JWKS publishes, not another that happens to bear its name.
        let probe = loaded.sign_jwt(&serde_json::json!({"probe": row.kid}))?;
        let mut validation = jsonwebtoken::Validation::new(alg.jwt());
        validation.required_spec_claims.clear();
        validation.validate_exp = false;
        jsonwebtoken::decode::<serde_json::Value>(&probe, &loaded.verifier, &validation)
            .with_context(|| {
                format!(
                    "key {} in the {} store does not match its public half",
                    row.kid,
                    vault.scheme()
                )
            })?;
        Ok(loaded)
    }

    /// Destroys `row`'s private half where it lives, when that is a vault: a revoked key
    /// can never sign again, whoever holds the database. A sealed key goes with its row.
    pub fn destroy(&self, row: &signing_key::Model) -> anyhow::Result<()> {
        match self.in_vault(row)? {
            Some((vault, name)) => vault.destroy(name),
            None => Ok(()),
        }
    }

    /// The vault holding `row`'s key and its name for it, if a vault holds it; an error
    /// when it names a vault this server was not given.
    fn in_vault<'r>(
        &self,
        row: &'r signing_key::Model,
    ) -> anyhow::Result<Option<(&dyn KeyVault, &'r str)>> {
        let Some((scheme, name)) = row.private_key.split_once(':') else {
            return Ok(None);
        };
        if !is_vault_scheme(scheme) {
            return Ok(None);
        }
        match &self.vault {
            Some(vault) if vault.scheme() == scheme => Ok(Some((vault.as_ref(), name))),
            _ => Err(anyhow!(
                "signing key {} is kept in a {scheme} store: start the server with \
                 AUTH_KEY_STORE={scheme} and its settings",
                row.kid
            )),
        }
    }
}

/// Whether `scheme` names a vault rather than a way of keeping a key in the database
/// (`aes256gcm`, or `pkcs8` in clear from an older version).
fn is_vault_scheme(scheme: &str) -> bool {
    scheme == pkcs11::SCHEME
}
