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
use serde::Serialize;
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
#[derive(Clone)]
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

/// Where signing keys are made and kept: a process's configured store, and what the
/// database records its keys' custody to be.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KeyHome {
    /// `database` (sealed under the key-encryption key) or a vault's scheme (`pkcs11`).
    pub store: String,
    /// The PKCS#11 token's label: what names the token in the settings.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token_label: Option<String>,
    /// The token's serial number, for the operator.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token_serial: Option<String>,
}

/// The name of the database store, as `AUTH_KEY_STORE` and the custody record say it.
pub const DATABASE: &str = "database";

impl KeyHome {
    /// Keys sealed in the database.
    pub fn database() -> Self {
        Self {
            store: DATABASE.to_owned(),
            token_label: None,
            token_serial: None,
        }
    }

    /// Keys in the PKCS#11 token labelled `label`, of serial number `serial`.
    pub fn token(label: &str, serial: Option<String>) -> Self {
        Self {
            store: pkcs11::SCHEME.to_owned(),
            token_label: Some(label.to_owned()),
            token_serial: serial,
        }
    }

    /// Whether keys made at `made_at` are kept here: the same store and, for a token, the
    /// same label (when this names one). The label, not the serial, names the token: the
    /// members of an HSM cluster hold the same objects under their own serials.
    pub fn takes_keys_of(&self, made_at: &KeyHome) -> bool {
        self.store == made_at.store
            && (self.token_label.is_none() || self.token_label == made_at.token_label)
    }

    /// How the settings that select this store read, for a message telling an operator
    /// what to give a command.
    pub fn settings(&self) -> String {
        match (self.store.as_str(), &self.token_label) {
            (DATABASE, _) => "AUTH_KEY_STORE unset or database".to_owned(),
            (store, Some(label)) => format!(
                "AUTH_KEY_STORE={store} with AUTH_PKCS11_TOKEN_LABEL={label}, AUTH_PKCS11_MODULE \
                 and AUTH_PKCS11_PIN or AUTH_PKCS11_PIN_FILE"
            ),
            (store, None) => format!("AUTH_KEY_STORE={store} and its AUTH_PKCS11_* settings"),
        }
    }
}

impl std::fmt::Display for KeyHome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.store.as_str(), &self.token_label, &self.token_serial) {
            (DATABASE, _, _) => f.write_str("the database"),
            (store, Some(label), Some(serial)) => {
                write!(f, "the {store} token {label:?} (serial {serial})")
            }
            (store, Some(label), None) => write!(f, "the {store} token {label:?}"),
            (store, None, _) => write!(f, "a {store} token"),
        }
    }
}

/// Where the key whose `private_key` column holds `stored` lives: `database`, or the vault's
/// scheme.
pub fn store_of(stored: &str) -> &str {
    match stored.split_once(':') {
        Some((scheme, _)) if is_vault_scheme(scheme) => scheme,
        _ => DATABASE,
    }
}

/// The signing keys' store: sealed in the database, or in a vault.
pub struct KeyStore {
    sealer: SigningKeySealer,
    vault: Option<Arc<dyn KeyVault>>,
    home: KeyHome,
}

impl std::fmt::Debug for KeyStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyStore")
            .field("vault", &self.vault.as_ref().map(|v| v.scheme()))
            .finish_non_exhaustive()
    }
}

impl KeyStore {
    /// Keys sealed with `sealer` in the database.
    pub fn database(sealer: SigningKeySealer) -> Self {
        Self {
            sealer,
            vault: None,
            home: KeyHome::database(),
        }
    }

    /// Keys made in `vault`, which is `home`; those sealed with `sealer` before it was
    /// configured still load from the database.
    pub fn with_vault(sealer: SigningKeySealer, vault: Arc<dyn KeyVault>, home: KeyHome) -> Self {
        Self {
            sealer,
            vault: Some(vault),
            home,
        }
    }

    /// Where this store makes keys.
    pub fn home(&self) -> &KeyHome {
        &self.home
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
    /// Destroying what is already gone does nothing, so a revoke can be completed.
    pub fn destroy(&self, row: &signing_key::Model) -> anyhow::Result<()> {
        match self.in_vault(row)? {
            Some((vault, name)) => vault.destroy(name),
            None => Ok(()),
        }
    }

    /// Fails, saying which settings it takes, unless this store can destroy `row`'s private
    /// half: a revoke checks it before it marks anything.
    pub fn can_destroy(&self, row: &signing_key::Model) -> anyhow::Result<()> {
        self.in_vault(row).map(|_| ())
    }

    /// Destroys a key made and never stored (a rotation or revoke that did not need it, or
    /// failed), so that no object is left in a vault that no row names.
    pub fn discard(&self, key: &NewKey) -> anyhow::Result<()> {
        match (&self.vault, key.private_key.split_once(':')) {
            (Some(vault), Some((scheme, name))) if scheme == vault.scheme() => vault.destroy(name),
            _ => Ok(()),
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
                "signing key {} is kept in a {scheme} token, which this process was not \
                 given: give it AUTH_KEY_STORE={scheme} and the AUTH_PKCS11_* settings the \
                 servers have",
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
