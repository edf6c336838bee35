//! Configuration: environment variables with matching command-line flags.

use clap::Args;
use service_kit::Secret;
use service_kit::command_line::{Actor, Database, Given, Listen, Logs, ServedDatabase, Service};
use service_kit::outbound::Reach;
use service_kit::source::TrustedProxies;

use crate::audit::AuditKey;
use crate::client_jwks::{ALLOW_INSECURE_VARIABLE, FetchPolicy};
use std::path::PathBuf;
use std::sync::Arc;

use crate::key_store::pkcs11::{self, Pkcs11Vault, TokenSettings, TokenVault};
use crate::key_store::{KeyHome, KeyStore};
use crate::keys::SigningKeySealer;

/// The auth-server's names (binary, variables, defaults) for the settings both services
/// share: a type, so that service-kit's arguments take them at compile time.
#[derive(Debug, Clone)]
pub struct AuthServerNames;

impl Service for AuthServerNames {
    const BINARY: &'static str = "auth-server";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const ABOUT: &'static str = env!("CARGO_PKG_DESCRIPTION");
    const EXAMPLES: &'static str = "Examples:
  auth-server serve                    # run the server (also with no command)
  auth-server client list              # partner clients, as a table on a terminal
  auth-server client show CLIENT_ID -o json

Each command reads its settings from flags or the environment (AUTH_DATABASE_URL, ...):
see `auth-server COMMAND --help`.";
    const SERVE_EXAMPLES: &'static str = "Examples:
  AUTH_KEY_ENCRYPTION_KEY=$(cat kek) auth-server serve
  auth-server serve --bind 0.0.0.0:8081 --admin-bind 0.0.0.0:9081 --log-format json";
    const MIGRATE_EXAMPLES: &'static str = "Examples:
  auth-server migrate --database-url postgres://auth@db/auth
  AUTH_DATABASE_URL=postgres://auth@db/auth auth-server migrate --log-format json";
    const BIND_VARIABLE: &'static str = "AUTH_BIND";
    const DEFAULT_BIND: &'static str = "127.0.0.1:8081";
    const ADMIN_BIND_VARIABLE: &'static str = "AUTH_ADMIN_BIND";
    const DATABASE_VARIABLE: &'static str = "AUTH_DATABASE_URL";
    const DEFAULT_DATABASE_URL: &'static str = "sqlite://data/auth.db?mode=rwc";
    const MIGRATE_VARIABLE: &'static str = "AUTH_MIGRATE";
    const ACTOR_VARIABLE: &'static str = "AUTH_ACTOR";
    const KEK_VARIABLE: &'static str = crate::keys::VARIABLE;
    const KEK_HELP: &'static str = "Base64 of the 32 bytes every signing key is encrypted \
        with at rest, and the audit trail sealed with: the servers'";
    const SECRET_ARGUMENTS: &'static [&'static str] = &["key_encryption_key", "pkcs11_pin"];
}

/// The server's settings (`auth-server serve`); every one has a default that runs locally.
#[derive(Debug, Clone, Args)]
pub struct Config {
    #[command(flatten)]
    pub listen: Listen<AuthServerNames>,
    #[command(flatten)]
    pub database: ServedDatabase<AuthServerNames>,
    /// Issuer URL: the `iss` of every token and the base of the metadata's URLs.
    #[arg(long, env = "AUTH_ISSUER", default_value = "http://127.0.0.1:8081")]
    pub issuer: String,
    /// Audience: the `aud` of every token.
    #[arg(long, env = "AUTH_AUDIENCE", default_value = "partner-intake")]
    pub audience: String,
    /// How long resource servers may cache the JWKS, in seconds.
    #[arg(long, env = "AUTH_JWKS_MAX_AGE_SECS", default_value_t = 300)]
    pub jwks_max_age_secs: u64,
    /// Rotate the signing keys on a schedule: once the newest key has been signing this
    /// many seconds, one replica rotates them as `key rotate` does (audited as
    /// `scheduler`). Off when unset.
    #[arg(long, env = ROTATION_INTERVAL_VARIABLE, value_parser = clap::value_parser!(u64).range(1..))]
    pub key_rotation_interval_secs: Option<u64>,
    /// Base64 of 32 random bytes (`openssl rand -base64 32`): the key every signing key is
    /// encrypted with at rest, and the audit trail sealed with (a key derived from it).
    /// Read from the environment only: as a flag `ps` would show it (refused).
    #[arg(
        long,
        env = crate::keys::VARIABLE,
        hide = true,
        hide_env_values = true
    )]
    pub key_encryption_key: Option<Secret<String>>,
    /// A file holding the key-encryption key: base64 of 32 random bytes (`openssl rand
    /// -base64 32`), which every signing key is encrypted with at rest and the audit trail
    /// sealed with; or the key itself in AUTH_KEY_ENCRYPTION_KEY, never as a flag (`ps`
    /// shows flags). Required by `serve`.
    #[arg(long, env = KEK_FILE_VARIABLE, value_name = "FILE")]
    pub key_encryption_key_file: Option<PathBuf>,
    #[command(flatten)]
    pub key_store: KeyStoreArgs,
    /// Redis URL for limits shared between replicas; in-process limits without it.
    #[arg(long, env = "REDIS_URL", hide_env_values = true)]
    pub redis_url: Option<Secret<String>>,
    #[command(flatten)]
    pub logs: Logs,
    /// Token requests allowed per client id and source address per window.
    #[arg(long, env = "AUTH_TOKEN_RATE_LIMIT", default_value_t = 600)]
    pub token_rate_limit: u32,
    /// Token requests allowed per source address per window, whatever the client id: the
    /// first limit a request meets.
    #[arg(long, env = "AUTH_SOURCE_RATE_LIMIT", default_value_t = 1200)]
    pub source_rate_limit: u32,
    /// Proxies whose `X-Forwarded-For` names the source address: comma-separated CIDR
    /// blocks or addresses. None by default: the TCP peer is the source.
    #[arg(long, env = "AUTH_TRUSTED_PROXIES", default_value = "")]
    pub trusted_proxies: TrustedProxies,
    /// Failed client authentications allowed per client id and source address per window.
    #[arg(long, env = "AUTH_FAILED_AUTH_LIMIT", default_value_t = 10)]
    pub failed_auth_limit: u32,
    /// The rate-limit window, in seconds.
    #[arg(long, env = "AUTH_RATE_WINDOW_SECS", default_value_t = 60)]
    pub rate_window_secs: u64,
    /// Lets the JWKS URLs of private_key_jwt clients be http, and name or resolve to
    /// addresses that are not public (private, loopback, link-local...): for local use and
    /// tests only.
    #[arg(
        long,
        env = "AUTH_CLIENT_JWKS_ALLOW_INSECURE",
        default_value_t = false,
        action = clap::ArgAction::Set
    )]
    pub client_jwks_allow_insecure: bool,
    /// The FAPI 2.0 Security Profile for client credentials: clients authenticate with
    /// private_key_jwt only, every token is DPoP-bound, and assertions and proofs are
    /// signed PS256, ES256 or EdDSA. Off by default.
    #[arg(
        long,
        env = "AUTH_FAPI2",
        default_value_t = false,
        action = clap::ArgAction::Set
    )]
    pub fapi2: bool,
    /// DPoP server nonces (RFC 9449 section 8): every answer carries a `DPoP-Nonce`, and a
    /// proof must carry a current one (given at most 60 seconds before). On by default
    /// under FAPI 2.0 (`AUTH_FAPI2`), off otherwise.
    #[arg(long, env = "AUTH_DPOP_NONCE", action = clap::ArgAction::Set)]
    pub dpop_nonce: Option<bool>,
    /// How clients' JWKS are fetched and cached: not a setting (the defaults are the
    /// design's); tests shorten the bounds to see them work.
    #[arg(skip = FetchPolicy::default())]
    pub client_jwks_fetch: FetchPolicy,
}

impl Config {
    /// The server's settings from the environment alone, as `auth-server` with no command
    /// reads them.
    pub fn from_env() -> Result<Self, clap::Error> {
        service_kit::command_line::server_settings::<AuthServerNames, Self>()
    }

    /// The key-encryption key. Private keys are never stored or loaded in clear, so there
    /// is no running without one.
    pub fn kek(&self) -> anyhow::Result<SigningKeySealer> {
        kek(given_kek(
            self.key_encryption_key.as_ref(),
            self.key_encryption_key_file.as_deref(),
        )?
        .as_ref())
    }

    /// Where the signing keys are kept: opens the PKCS#11 token when one is configured,
    /// failing clearly when its library, token or PIN is wrong.
    pub fn keys(&self) -> anyhow::Result<Arc<KeyStore>> {
        self.key_store.open(self.kek()?)
    }

    /// The deployment profile the switch names.
    pub fn profile(&self) -> shared::profile::Profile {
        shared::profile::Profile::from_switch(self.fapi2)
    }

    /// Whether DPoP proofs must carry a server nonce: `AUTH_DPOP_NONCE`, or the profile's
    /// default.
    pub fn dpop_nonces(&self) -> bool {
        self.dpop_nonce.unwrap_or(self.fapi2)
    }

    /// Where clients' JWKS may be fetched from.
    pub fn client_jwks_reach(&self) -> Reach {
        reach(self.client_jwks_allow_insecure)
    }

    /// How often the signing keys are rotated on schedule, if they are.
    pub fn key_rotation_interval(&self) -> Option<std::time::Duration> {
        self.key_rotation_interval_secs
            .map(std::time::Duration::from_secs)
    }

    /// The issuer without a trailing slash, as it appears in tokens and metadata.
    pub fn issuer(&self) -> &str {
        self.issuer.trim_end_matches('/')
    }

    /// A configuration for tests and embedding: every default, with these overrides.
    pub fn with_database(database_url: impl Into<String>) -> Self {
        let mut config = Self::from_env().unwrap_or_else(|e| e.exit());
        config.database.set(database_url);
        config
    }
}

fn reach(allow_insecure: bool) -> Reach {
    Reach {
        allow_insecure,
        switch: ALLOW_INSECURE_VARIABLE,
    }
}

/// The variable naming a file that holds the key-encryption key.
pub const KEK_FILE_VARIABLE: &str = "AUTH_KEY_ENCRYPTION_KEY_FILE";

/// The key-encryption key given: in the environment, or in the file named.
fn given_kek(
    value: Option<&Secret<String>>,
    file: Option<&std::path::Path>,
) -> anyhow::Result<Option<Secret<String>>> {
    match (value, file) {
        (Some(_), Some(_)) => anyhow::bail!(
            "{} and {KEK_FILE_VARIABLE} are both set: give one",
            crate::keys::VARIABLE
        ),
        (Some(value), None) => Ok(Some(value.clone())),
        (None, Some(path)) => service_kit::secret::read_secret_file(path)
            .map(Some)
            .map_err(|problem| anyhow::anyhow!("{KEK_FILE_VARIABLE}: {problem}")),
        (None, None) => Ok(None),
    }
}

fn kek(encoded: Option<&Secret<String>>) -> anyhow::Result<SigningKeySealer> {
    let kek = service_kit::kek::KeyEncryptionKey::required(
        crate::keys::VARIABLE,
        encoded,
        "signing keys are never stored in clear",
    )?;
    SigningKeySealer::from_kek(kek)
}

/// What an operator command (`client`, `key`, `audit`) runs with besides its own
/// arguments. On the command line each subcommand takes only the ones it uses.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The database the servers run on.
    pub database: Database<AuthServerNames>,
    /// Who makes a change, for the audit trail; the operating-system user when unset.
    pub actor: Option<String>,
    /// What signing keys are sealed with, and audit entries (a key derived from it): every
    /// change needs it (its entry is sealed as it is written), and so does `audit verify`.
    pub key_encryption_key: Option<Secret<String>>,
    /// A file holding it, instead.
    pub key_encryption_key_file: Option<PathBuf>,
    /// How long resource servers cache the JWKS: how far ahead of its first signature
    /// `key rotate` publishes a key unless told otherwise.
    pub jwks_max_age_secs: u64,
    /// Whether a client's JWKS URL may be http, or name an address that is not public.
    pub client_jwks_allow_insecure: bool,
    /// Whether the servers run the FAPI 2.0 profile, which takes no secret client.
    pub fapi2: bool,
    /// Where the signing keys are kept, for the commands that make or destroy them.
    pub key_store: KeyStoreArgs,
}

impl Settings {
    /// The key-encryption key, or why there is none.
    pub fn kek(&self) -> anyhow::Result<SigningKeySealer> {
        kek(self.given_kek()?.as_ref())
    }

    /// The key-encryption key given, from the environment or its file.
    fn given_kek(&self) -> anyhow::Result<Option<Secret<String>>> {
        given_kek(
            self.key_encryption_key.as_ref(),
            self.key_encryption_key_file.as_deref(),
        )
    }

    /// Where a client's JWKS URL may point.
    pub fn client_jwks_reach(&self) -> Reach {
        reach(self.client_jwks_allow_insecure)
    }

    /// Where the signing keys are kept.
    pub fn keys(&self) -> anyhow::Result<Arc<KeyStore>> {
        self.key_store.open(self.kek()?)
    }

    /// The key audit entries are sealed with, when the key-encryption key was given.
    pub fn audit_key(&self) -> anyhow::Result<Option<AuditKey>> {
        self.given_kek()?
            .as_ref()
            .map(|encoded| AuditKey::derive(&SigningKeySealer::from_base64(encoded)?))
            .transpose()
    }
}

/// An operator command's settings, as given with it on the command line.
impl From<&Given> for Settings {
    fn from(given: &Given) -> Self {
        let kek = given.settings::<KekArgs>().unwrap_or_default();
        Self {
            database: given.settings().unwrap_or_default(),
            actor: given
                .settings::<Actor<AuthServerNames>>()
                .and_then(|a| a.actor),
            key_encryption_key: kek.key_encryption_key,
            key_encryption_key_file: kek.key_encryption_key_file,
            // `key rotate` reads AUTH_JWKS_MAX_AGE_SECS as its `--publish-ahead-secs`.
            jwks_max_age_secs: DEFAULT_JWKS_MAX_AGE_SECS,
            client_jwks_allow_insecure: given
                .settings::<AllowInsecureArg>()
                .is_some_and(|a| a.client_jwks_allow_insecure),
            fapi2: given.settings::<Fapi2Arg>().is_some_and(|a| a.fapi2),
            key_store: given.settings().unwrap_or_default(),
        }
    }
}

/// The server's settings serve the operator commands run beside it (tests, the launcher).
impl From<&Config> for Settings {
    fn from(config: &Config) -> Self {
        Self {
            database: config.database.database.clone(),
            actor: None,
            key_encryption_key: config.key_encryption_key.clone(),
            key_encryption_key_file: config.key_encryption_key_file.clone(),
            jwks_max_age_secs: config.jwks_max_age_secs,
            client_jwks_allow_insecure: config.client_jwks_allow_insecure,
            fapi2: config.fapi2,
            key_store: config.key_store.clone(),
        }
    }
}

const DEFAULT_JWKS_MAX_AGE_SECS: u64 = 300;

/// The key-encryption key, for the operator commands that seal with it or check what it
/// sealed: from the environment or a file, never a flag.
#[derive(Debug, Clone, Default, Args)]
pub struct KekArgs {
    /// The servers' key-encryption key, base64 of 32 random bytes, which every signing key
    /// is sealed with and the audit trail too; or a file holding it
    /// (--key-encryption-key-file).
    #[arg(
        long,
        env = crate::keys::VARIABLE,
        hide = true,
        hide_env_values = true
    )]
    pub key_encryption_key: Option<Secret<String>>,
    /// A file holding the servers' key-encryption key, which every signing key is sealed
    /// with and the audit trail too; or the key itself in AUTH_KEY_ENCRYPTION_KEY, never
    /// as a flag (`ps` shows flags).
    #[arg(long, env = KEK_FILE_VARIABLE, value_name = "FILE")]
    pub key_encryption_key_file: Option<PathBuf>,
}

/// The setting of the key rotation schedule, which `key list` reads as the servers do.
pub(crate) const ROTATION_INTERVAL_VARIABLE: &str = "AUTH_KEY_ROTATION_INTERVAL_SECS";

/// Sessions kept open with a PKCS#11 token unless AUTH_PKCS11_SESSIONS says otherwise.
const DEFAULT_PKCS11_SESSIONS: usize = 8;

/// Where new signing keys are made and kept.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum KeyStoreKind {
    /// In the database, sealed under the key-encryption key.
    #[default]
    Database,
    /// Inside a PKCS#11 token, which they never leave (AUTH_PKCS11_*).
    Pkcs11,
}

/// The key store's settings: the servers' and those of the commands that make keys.
#[derive(Debug, Clone, Args)]
pub struct KeyStoreArgs {
    /// Where new signing keys are made and kept: `database` (sealed under the
    /// key-encryption key) or `pkcs11` (inside a token, which they never leave).
    #[arg(long, env = "AUTH_KEY_STORE", value_enum, default_value_t = KeyStoreKind::default())]
    pub key_store: KeyStoreKind,
    /// The PKCS#11 library of the token (AUTH_KEY_STORE=pkcs11), e.g.
    /// /usr/lib/softhsm/libsofthsm2.so.
    #[arg(long, env = "AUTH_PKCS11_MODULE")]
    pub pkcs11_module: Option<PathBuf>,
    /// The label of the token the keys live in.
    #[arg(long, env = "AUTH_PKCS11_TOKEN_LABEL")]
    pub pkcs11_token_label: Option<String>,
    /// The token's user PIN (AUTH_KEY_STORE=pkcs11); or a file holding it
    /// (--pkcs11-pin-file).
    #[arg(long, env = "AUTH_PKCS11_PIN", hide = true, hide_env_values = true)]
    pub pkcs11_pin: Option<Secret<String>>,
    /// A file holding the token's user PIN, for a PIN mounted as a secret; or the PIN itself
    /// in AUTH_PKCS11_PIN, never as a flag (`ps` shows flags).
    #[arg(long, env = "AUTH_PKCS11_PIN_FILE", value_name = "FILE")]
    pub pkcs11_pin_file: Option<PathBuf>,
    /// Sessions kept open with the token: as many token requests can be signed at once.
    #[arg(long, env = "AUTH_PKCS11_SESSIONS", default_value_t = DEFAULT_PKCS11_SESSIONS)]
    pub pkcs11_sessions: usize,
}

impl Default for KeyStoreArgs {
    fn default() -> Self {
        Self {
            key_store: KeyStoreKind::default(),
            pkcs11_module: None,
            pkcs11_token_label: None,
            pkcs11_pin: None,
            pkcs11_pin_file: None,
            pkcs11_sessions: DEFAULT_PKCS11_SESSIONS,
        }
    }
}

impl KeyStoreArgs {
    /// The key store these settings name, with keys sealed under `sealer`; fails, saying
    /// which setting, when a PKCS#11 one is missing or wrong.
    pub fn open(&self, sealer: SigningKeySealer) -> anyhow::Result<Arc<KeyStore>> {
        if self.key_store == KeyStoreKind::Database {
            return Ok(Arc::new(KeyStore::database(sealer)));
        }
        let missing = |name: &str| anyhow::anyhow!("AUTH_KEY_STORE=pkcs11 needs {name}");
        let pin = match (&self.pkcs11_pin, &self.pkcs11_pin_file) {
            (Some(pin), None) => pin.clone(),
            (None, Some(path)) => service_kit::secret::read_secret_file(path)
                .map_err(|problem| anyhow::anyhow!("AUTH_PKCS11_PIN_FILE: {problem}"))?,
            (Some(_), Some(_)) => {
                anyhow::bail!("AUTH_PKCS11_PIN and AUTH_PKCS11_PIN_FILE are both set: give one")
            }
            (None, None) => return Err(missing("AUTH_PKCS11_PIN or AUTH_PKCS11_PIN_FILE")),
        };
        let settings = TokenSettings {
            module: self
                .pkcs11_module
                .clone()
                .ok_or_else(|| missing("AUTH_PKCS11_MODULE"))?,
            token_label: self
                .pkcs11_token_label
                .clone()
                .ok_or_else(|| missing("AUTH_PKCS11_TOKEN_LABEL"))?,
            pin,
            sessions: self.pkcs11_sessions,
        };
        let vault = Arc::new(Pkcs11Vault(Arc::new(TokenVault::open(&settings)?)));
        let home = KeyHome::token(&settings.token_label, token_serial(&settings));
        Ok(Arc::new(KeyStore::with_vault(sealer, vault, home)))
    }
}

/// The serial number of the token `settings` name, once it is open; none when the token
/// does not say.
fn token_serial(settings: &TokenSettings) -> Option<String> {
    let library = pkcs11::library(&settings.module).ok()?;
    let slot = pkcs11::find_token(&library, &settings.token_label).ok()?;
    let info = library.get_token_info(slot).ok()?;
    Some(info.serial_number().trim().to_owned()).filter(|s| !s.is_empty())
}

/// `--client-jwks-allow-insecure`, for the commands that register a JWKS URL.
#[derive(Debug, Clone, Args)]
pub(crate) struct AllowInsecureArg {
    /// Lets the JWKS URL be http, or name or resolve to an address that is not public
    /// (private, loopback, link-local...): for local use and tests only.
    #[arg(
        long,
        env = "AUTH_CLIENT_JWKS_ALLOW_INSECURE",
        default_value_t = false,
        action = clap::ArgAction::Set
    )]
    pub(crate) client_jwks_allow_insecure: bool,
}

/// `--fapi2`, for the commands that register a client: the servers' AUTH_FAPI2, so that no
/// client is made that they would refuse.
#[derive(Debug, Clone, Args)]
pub(crate) struct Fapi2Arg {
    /// The deployment runs the FAPI 2.0 profile (AUTH_FAPI2): clients authenticate with
    /// private_key_jwt only, so a secret client is refused.
    #[arg(
        long,
        env = "AUTH_FAPI2",
        default_value_t = false,
        action = clap::ArgAction::Set
    )]
    pub(crate) fapi2: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_database_password_never_shows_in_debug() {
        let config = Config::with_database("postgres://auth:hunter2@db.example/auth");
        let shown = format!("{config:?} {:?}", Settings::from(&config));
        assert!(!shown.contains("hunter2"), "{shown}");
        assert_eq!(
            config.database.url(),
            "postgres://auth:hunter2@db.example/auth"
        );
    }
}
