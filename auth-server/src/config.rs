//! Configuration: environment variables with matching command-line flags.

use clap::{Args, Parser, Subcommand};
use service_kit::Secret;
use service_kit::source::TrustedProxies;
use service_kit::telemetry::LogFormat;

use crate::keys::KeyEncryptionKey;

/// The auth-server's settings; every one has a default that runs locally.
#[derive(Debug, Clone, Args)]
pub struct Config {
    /// Address and port to listen on.
    #[arg(
        long,
        env = "AUTH_BIND",
        default_value = "127.0.0.1:8081",
        global = true
    )]
    pub bind: String,
    /// Address and port of a separate listener for `/metrics` (and `/healthz`, `/readyz`);
    /// unset, `/metrics` is served on the main listener.
    #[arg(long, env = "AUTH_ADMIN_BIND", global = true)]
    pub admin_bind: Option<String>,
    /// Database URL: `sqlite://PATH?mode=rwc` or `postgres://USER@HOST/DB`.
    #[arg(
        long,
        env = "AUTH_DATABASE_URL",
        default_value = "sqlite://data/auth.db?mode=rwc",
        hide_env_values = true,
        global = true
    )]
    pub database_url: String,
    /// Issuer URL: the `iss` of every token and the base of the metadata's URLs.
    #[arg(
        long,
        env = "AUTH_ISSUER",
        default_value = "http://127.0.0.1:8081",
        global = true
    )]
    pub issuer: String,
    /// Audience: the `aud` of every token.
    #[arg(
        long,
        env = "AUTH_AUDIENCE",
        default_value = "partner-intake",
        global = true
    )]
    pub audience: String,
    /// How long resource servers may cache the JWKS, in seconds.
    #[arg(
        long,
        env = "AUTH_JWKS_MAX_AGE_SECS",
        default_value_t = 300,
        global = true
    )]
    pub jwks_max_age_secs: u64,
    /// Base64 of 32 random bytes (`openssl rand -base64 32`): the key every signing key is
    /// encrypted with at rest. Required by `serve`, `key rotate` and `key revoke`.
    #[arg(
        long,
        env = "AUTH_KEY_ENCRYPTION_KEY",
        hide_env_values = true,
        global = true
    )]
    pub key_encryption_key: Option<Secret<String>>,
    /// Who is making a change, for the audit trail; the operating-system user when unset.
    #[arg(long, env = "AUTH_ACTOR", global = true)]
    pub actor: Option<String>,
    /// Redis URL for limits shared between replicas; in-process limits without it.
    #[arg(long, env = "REDIS_URL", hide_env_values = true, global = true)]
    pub redis_url: Option<Secret<String>>,
    /// Log format.
    #[arg(long, env = "LOG_FORMAT", value_enum, default_value_t = LogFormat::Pretty, global = true)]
    pub log_format: LogFormat,
    /// Token requests allowed per client id and source address per window.
    #[arg(
        long,
        env = "AUTH_TOKEN_RATE_LIMIT",
        default_value_t = 600,
        global = true
    )]
    pub token_rate_limit: u32,
    /// Token requests allowed per source address per window, whatever the client id: the
    /// first limit a request meets.
    #[arg(
        long,
        env = "AUTH_SOURCE_RATE_LIMIT",
        default_value_t = 1200,
        global = true
    )]
    pub source_rate_limit: u32,
    /// Proxies whose `X-Forwarded-For` names the source address: comma-separated CIDR
    /// blocks or addresses. None by default: the TCP peer is the source.
    #[arg(long, env = "AUTH_TRUSTED_PROXIES", default_value = "", global = true)]
    pub trusted_proxies: TrustedProxies,
    /// Failed client authentications allowed per client id and source address per window.
    #[arg(
        long,
        env = "AUTH_FAILED_AUTH_LIMIT",
        default_value_t = 10,
        global = true
    )]
    pub failed_auth_limit: u32,
    /// The rate-limit window, in seconds.
    #[arg(
        long,
        env = "AUTH_RATE_WINDOW_SECS",
        default_value_t = 60,
        global = true
    )]
    pub rate_window_secs: u64,
}

impl Config {
    /// The key-encryption key. Private keys are never stored or loaded in clear, so there
    /// is no running without one.
    pub fn kek(&self) -> anyhow::Result<KeyEncryptionKey> {
        let encoded = self.key_encryption_key.as_ref().ok_or_else(|| {
            anyhow::anyhow!(
                "AUTH_KEY_ENCRYPTION_KEY is not set: signing keys are never stored in clear. \
                 Make one with `openssl rand -base64 32`, keep it with your other secrets, and \
                 give every auth-server replica the same one."
            )
        })?;
        KeyEncryptionKey::from_base64(encoded)
    }

    /// The issuer without a trailing slash, as it appears in tokens and metadata.
    pub fn issuer(&self) -> &str {
        self.issuer.trim_end_matches('/')
    }

    /// A configuration for tests and embedding: every default, with these overrides.
    pub fn with_database(database_url: impl Into<String>) -> Self {
        Cli::parse_from(["auth-server"])
            .config
            .with_db(database_url)
    }

    fn with_db(mut self, url: impl Into<String>) -> Self {
        self.database_url = url.into();
        self
    }
}

/// The auth-server: an OAuth 2.0 client-credentials authorization server.
#[derive(Debug, Parser)]
#[command(name = "auth-server", version, about)]
pub struct Cli {
    /// Settings shared by every command.
    #[command(flatten)]
    pub config: Config,
    /// What to do; `serve` when omitted.
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// Commands of the auth-server binary.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the HTTP server (the default).
    Serve,
    /// Apply database migrations and exit.
    Migrate,
    /// Manage partner clients.
    #[command(subcommand)]
    Client(ClientCommand),
    /// Manage token-signing keys.
    #[command(subcommand)]
    Key(KeyCommand),
    /// Read and check the audit trail of changes to clients and keys.
    #[command(subcommand)]
    Audit(AuditCommand),
}

/// `auth-server audit ...`
#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// Print the entries, oldest first.
    List {
        /// Only entries made at or after this time (RFC 3339, e.g. 2026-11-26T00:00:00Z).
        #[arg(long)]
        since: Option<chrono::DateTime<chrono::Utc>>,
    },
    /// Check the hash chain: exits 1 naming the first entry altered, removed or reordered.
    Verify,
}

/// `auth-server client ...`
#[derive(Debug, Subcommand)]
pub enum ClientCommand {
    /// Register a client; prints its id and secret (shown only this once).
    Create {
        /// Partner name, for operators.
        #[arg(long)]
        name: String,
        /// Space-separated scopes the client may be granted.
        #[arg(long)]
        scopes: String,
    },
    /// List clients (never their secrets).
    List,
    /// Issue a new secret; the old one keeps working for the grace period.
    RotateSecret {
        /// The client's id.
        client_id: String,
        /// How long the previous secret keeps working, in seconds.
        #[arg(long, default_value_t = 86_400)]
        grace_secs: u64,
    },
    /// Disable a client: no more tokens, and resource servers refuse the ones it holds.
    Disable {
        /// The client's id.
        client_id: String,
    },
    /// Enable a disabled client again: its unexpired tokens work again too.
    Enable {
        /// The client's id.
        client_id: String,
    },
}

/// `auth-server key ...`
#[derive(Debug, Subcommand)]
pub enum KeyCommand {
    /// Switch signing to the standby key, and publish a new standby.
    Rotate {
        /// The least time between the standby's publication and its first signature;
        /// defaults to the JWKS max-age, so every resource server caching the JWKS holds
        /// the key before it signs. A standby is usually older than that: it signs at once.
        #[arg(long)]
        publish_ahead_secs: Option<u64>,
    },
    /// List keys with their state and dates.
    List,
    /// Emergency: unpublish a key now; tokens it signed stop verifying. When it was
    /// signing, the standby key takes over at once.
    Revoke {
        /// The key's kid.
        kid: String,
    },
}
