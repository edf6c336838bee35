//! Configuration: environment variables with matching command-line flags.

use std::time::Duration;

use clap::Args;
use service_kit::Secret;
use service_kit::command_line::{Listen, Logs, ServedDatabase, Service};
use service_kit::kek::KeyEncryptionKey;
use service_kit::source::TrustedProxies;
use shared::profile::Profile;
use token_client::{AssertionKey, Credentials};
use url::Url;

use crate::store::Timing;

mod auth_server;
mod operator;
mod webhooks;

pub use auth_server::AuthServerSettings;
pub use operator::Settings;
pub(crate) use operator::{changes, webhook_secret, webhook_target};
pub use webhooks::{AllowInsecure, WebhookSettings};

/// The setting the key-encryption key is read from.
pub const KEK_VARIABLE: &str = "INTAKE_KEY_ENCRYPTION_KEY";

/// The intake-api's names for the settings both services share.
#[derive(Debug, Clone)]
pub struct IntakeApiNames;

impl Service for IntakeApiNames {
    const BINARY: &'static str = "intake-api";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const ABOUT: &'static str = env!("CARGO_PKG_DESCRIPTION");
    const EXAMPLES: &'static str = "Examples:
  intake-api serve                           # run the server (also with no command)
  intake-api case find --email jane.doe@example.com
  intake-api case list --status pending_activation --since 24h -o json

Each command reads its settings from flags or the environment (INTAKE_DATABASE_URL, ...):
see `intake-api COMMAND --help`.";
    const SERVE_EXAMPLES: &'static str = "Examples:
  intake-api serve
  intake-api serve --bind 0.0.0.0:8082 --admin-bind 0.0.0.0:9082 --log-format json";
    const MIGRATE_EXAMPLES: &'static str = "Examples:
  intake-api migrate --database-url postgres://intake@db/intake
  INTAKE_DATABASE_URL=postgres://intake@db/intake intake-api migrate --log-format json";
    const BIND_VARIABLE: &'static str = "INTAKE_BIND";
    const DEFAULT_BIND: &'static str = "127.0.0.1:8082";
    const ADMIN_BIND_VARIABLE: &'static str = "INTAKE_ADMIN_BIND";
    const DATABASE_VARIABLE: &'static str = "INTAKE_DATABASE_URL";
    const DEFAULT_DATABASE_URL: &'static str = "sqlite://data/intake.db?mode=rwc";
    const MIGRATE_VARIABLE: &'static str = "INTAKE_MIGRATE";
    const ACTOR_VARIABLE: &'static str = "INTAKE_ACTOR";
    const KEK_VARIABLE: &'static str = KEK_VARIABLE;
    const SECRET_ARGUMENTS: &'static [&'static str] =
        &["key_encryption_key", "revocations_client_secret"];
    const KEK_HELP: &'static str =
        "Base64 of the 32 bytes webhook signing secrets are sealed with at rest: the servers'";
}

/// The server's settings (`intake-api serve`); every one has a default that runs locally.
#[derive(Debug, Clone, Args)]
pub struct Config {
    #[command(flatten)]
    pub listen: Listen<IntakeApiNames>,
    #[command(flatten)]
    pub database: ServedDatabase<IntakeApiNames>,
    /// Most database connections the server holds (PostgreSQL's `max_connections` must
    /// cover every replica's pool).
    #[arg(
        long,
        env = "INTAKE_DATABASE_MAX_CONNECTIONS",
        default_value_t = 10,
        value_parser = clap::value_parser!(u32).range(1..=1000)
    )]
    pub database_max_connections: u32,
    #[command(flatten)]
    pub auth_server: AuthServerSettings,
    /// The `iss` every access token must carry.
    #[arg(long, env = "INTAKE_ISSUER", default_value = "http://127.0.0.1:8081")]
    pub issuer: String,
    /// The `aud` every access token must carry.
    #[arg(long, env = "INTAKE_AUDIENCE", default_value = "partner-intake")]
    pub audience: String,
    /// Seconds between a case's creation and its activation.
    #[arg(long, env = "INTAKE_ACTIVATION_DELAY_SECS", default_value_t = 900)]
    pub activation_delay_secs: u64,
    /// Seconds between a sandbox case's creation and its activation.
    #[arg(
        long,
        env = "INTAKE_SANDBOX_ACTIVATION_DELAY_SECS",
        default_value_t = 30
    )]
    pub sandbox_activation_delay_secs: u64,
    /// The two brands as `id=customer-portal-URL` pairs, comma-separated.
    #[arg(
        long,
        env = "INTAKE_BRANDS",
        default_value = "brand_a=https://portal.brand-a.example/continue,brand_b=https://portal.brand-b.example/continue"
    )]
    pub brands: String,
    /// Lifetime of a customer redirect link, in seconds.
    #[arg(long, env = "INTAKE_REDIRECT_TTL_SECS", default_value_t = 86_400)]
    pub redirect_ttl_secs: u64,
    /// Base64 of 32 random bytes (`openssl rand -base64 32`), the same for every replica:
    /// the answers kept for `Idempotency-Key`s and the webhook signing secrets are sealed,
    /// and keyed requests digested, with keys derived from it. Required by `serve`,
    /// `webhook set` and `webhook rotate-secret`. From the environment only: as a flag
    /// `ps` would show it to every user (refused).
    #[arg(
        long,
        env = "INTAKE_KEY_ENCRYPTION_KEY",
        hide = true,
        hide_env_values = true
    )]
    pub key_encryption_key: Option<Secret<String>>,
    /// Redis URL for limits shared between replicas; in-process limits without it.
    #[arg(long, env = "REDIS_URL", hide_env_values = true)]
    pub redis_url: Option<Secret<String>>,
    /// Proxies whose `X-Forwarded-For` names a request's source address (for the logs):
    /// comma-separated CIDR blocks or addresses; none by default.
    #[arg(long, env = "INTAKE_TRUSTED_PROXIES", default_value = "")]
    pub trusted_proxies: TrustedProxies,
    /// The FAPI 2.0 Security Profile for client credentials: partners' tokens are taken
    /// only DPoP-bound with a proof (never as `Bearer`), proofs signed PS256, ES256 or
    /// EdDSA; the intake-api's own client uses private_key_jwt and DPoP, as the
    /// auth-server then requires. Off by default.
    #[arg(
        long,
        env = "INTAKE_FAPI2",
        default_value_t = false,
        action = clap::ArgAction::Set
    )]
    pub fapi2: bool,
    /// DPoP server nonces (RFC 9449 section 9): every answer carries a `DPoP-Nonce`, and a
    /// proof must carry a current one (given at most 60 seconds before); replicas with the
    /// same INTAKE_KEY_ENCRYPTION_KEY accept each other's. On by default under
    /// INTAKE_FAPI2, off otherwise.
    #[arg(long, env = "INTAKE_DPOP_NONCE", action = clap::ArgAction::Set)]
    pub dpop_nonce: Option<bool>,
    /// The URL partners call this service at (`https://intake.example`), behind the TLS
    /// proxy: a DPoP proof must name it (`htu`). Unset, the proof must name
    /// `http://` and the request's `Host`, as a service called directly is.
    #[arg(long, env = "INTAKE_PUBLIC_URL")]
    pub public_url: Option<Url>,
    #[command(flatten)]
    pub logs: Logs,
    /// Intake requests allowed per partner (client id) per window.
    #[arg(long, env = "INTAKE_RATE_LIMIT", default_value_t = 1200)]
    pub rate_limit: u32,
    /// The rate-limit window, in seconds.
    #[arg(long, env = "INTAKE_RATE_WINDOW_SECS", default_value_t = 60)]
    pub rate_window_secs: u64,
    /// How often the activation worker looks for due cases, in milliseconds.
    #[arg(long, env = "INTAKE_ACTIVATION_POLL_MS", default_value_t = 1000)]
    pub activation_poll_ms: u64,
    /// Days the submissions' bodies as sent are kept; older ones are emptied in the
    /// background (each case records it). Unset: kept for ever.
    #[arg(long, env = "INTAKE_SUBMISSION_RETENTION_DAYS", value_parser = clap::value_parser!(u32).range(1..))]
    pub submission_retention_days: Option<u32>,
    /// Days a sandbox client's case is kept before it is deleted, with all about it.
    #[arg(long, env = "INTAKE_SANDBOX_RETENTION_DAYS", default_value_t = 7, value_parser = clap::value_parser!(u32).range(1..))]
    pub sandbox_retention_days: u32,
    #[command(flatten)]
    pub webhooks: WebhookSettings,
}

/// How long a partner's webhook endpoint has to answer.
pub const WEBHOOK_SEND_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

impl Config {
    /// Where a partner may point its webhook endpoints through the API.
    pub fn webhook_reach(&self) -> service_kit::outbound::Reach {
        self.webhooks.insecure.reach()
    }

    /// The HTTP client webhook events are sent with (the worker's deliveries and partners'
    /// test events): no redirects, no proxy, and, unless this deployment allows otherwise,
    /// https to public addresses only, each name checked as it is resolved.
    pub fn webhook_client(&self) -> anyhow::Result<reqwest::Client> {
        let user_agent = concat!("partner-intake-webhooks/", env!("CARGO_PKG_VERSION"));
        service_kit::outbound::client(
            user_agent,
            WEBHOOK_SEND_TIMEOUT,
            self.webhooks.insecure.allow,
        )
    }

    /// The server's settings from the environment alone, as `intake-api` with no command
    /// reads them.
    pub fn from_env() -> Result<Self, clap::Error> {
        service_kit::command_line::server_settings::<IntakeApiNames, Self>()
    }

    /// Every default, on the given database: for tests and embedding.
    pub fn with_database(database_url: impl Into<String>) -> Self {
        let mut config = Self::from_env().unwrap_or_else(|e| e.exit());
        config.database.set(database_url);
        config
    }

    /// How long cases wait to activate and redirect links last.
    pub fn timing(&self) -> Timing {
        Timing {
            activation_delay: Duration::from_secs(self.activation_delay_secs),
            redirect_ttl: Duration::from_secs(self.redirect_ttl_secs),
            sandbox_activation_delay: Duration::from_secs(self.sandbox_activation_delay_secs),
        }
    }

    /// The deployment profile the switch names.
    pub fn profile(&self) -> Profile {
        Profile::from_switch(self.fapi2)
    }

    /// Whether DPoP proofs must carry a server nonce: `INTAKE_DPOP_NONCE`, or the
    /// profile's default.
    pub fn dpop_nonces(&self) -> bool {
        self.dpop_nonce.unwrap_or(self.fapi2)
    }

    /// The credentials the revocation list is read with: there is no serving without them,
    /// as the auth-server lists disabled clients only to resource servers.
    pub fn revocations_credentials(&self) -> anyhow::Result<Credentials> {
        let own = &self.auth_server;
        let id = own.client_id.as_deref().filter(|id| !id.is_empty());
        let secret = own
            .client_secret
            .as_ref()
            .filter(|s| !s.expose().is_empty());
        match (id, secret, &own.client_key_file) {
            (Some(_), Some(_), Some(_)) => anyhow::bail!(
                "INTAKE_REVOCATIONS_CLIENT_SECRET and INTAKE_REVOCATIONS_CLIENT_KEY_FILE are \
                 both set: the intake-api's client authenticates with one of them"
            ),
            (Some(id), None, Some(path)) => {
                Ok(Credentials::with_key(id, self.assertion_key(path)?))
            }
            (Some(_), Some(_), None) if self.fapi2 => anyhow::bail!(
                "INTAKE_FAPI2 needs INTAKE_REVOCATIONS_CLIENT_KEY_FILE instead of \
                 INTAKE_REVOCATIONS_CLIENT_SECRET: under FAPI 2.0 the auth-server takes \
                 private_key_jwt only (auth-server client create --name intake-api --scopes \
                 revocations:read --auth-method private-key-jwt --jwks-file ...)"
            ),
            (Some(id), Some(secret), None) => Ok(Credentials::new(id, secret.expose().clone())),
            _ => anyhow::bail!(
                "INTAKE_REVOCATIONS_CLIENT_ID and INTAKE_REVOCATIONS_CLIENT_SECRET (or \
                 INTAKE_REVOCATIONS_CLIENT_KEY_FILE) must be set: the intake-api reads the list \
                 of disabled clients with a token of its own client (auth-server client create \
                 intake-api --scopes revocations:read)"
            ),
        }
    }

    /// The private key in `path`, read as INTAKE_REVOCATIONS_CLIENT_KEY_ALG says.
    fn assertion_key(&self, path: &std::path::Path) -> anyhow::Result<AssertionKey> {
        let algorithm = self.auth_server.client_key_alg;
        let alg = algorithm.name();
        anyhow::ensure!(
            self.profile().algorithms().contains(&alg),
            "INTAKE_REVOCATIONS_CLIENT_KEY_ALG is {alg} and INTAKE_FAPI2 is on: FAPI 2.0 \
             allows PS256, ES256 or EdDSA only"
        );
        let pem = std::fs::read(path).map_err(|e| {
            anyhow::anyhow!(
                "INTAKE_REVOCATIONS_CLIENT_KEY_FILE {} cannot be read: {e}",
                path.display()
            )
        })?;
        AssertionKey::from_pem(algorithm, &pem).map_err(|e| {
            anyhow::anyhow!(
                "INTAKE_REVOCATIONS_CLIENT_KEY_FILE {} is not a {alg} private key: {e}",
                path.display()
            )
        })
    }

    /// The key-encryption key: there is no serving without one, as answers holding links
    /// are never stored in clear.
    pub fn kek(&self) -> anyhow::Result<KeyEncryptionKey> {
        KeyEncryptionKey::required(
            KEK_VARIABLE,
            self.key_encryption_key.as_ref(),
            "the answers kept for Idempotency-Keys and the webhook signing secrets are never \
             stored in clear",
        )
    }

    /// The issuer as tokens carry it (no trailing slash).
    pub fn issuer(&self) -> &str {
        self.issuer.trim_end_matches('/')
    }
}

/// A brand and where its customers continue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrandConfig {
    /// Lower-case identifier partners send as `brand`.
    pub id: String,
    /// Base URL of the brand's customer portal; a redirect link cannot be made without it.
    pub portal_url: Option<Url>,
}

/// Parses `INTAKE_BRANDS`: exactly two `id=url` pairs with distinct lower-case ids. A pair
/// with an empty URL configures a brand whose redirect links cannot be made yet.
pub fn parse_brands(raw: &str) -> anyhow::Result<Vec<BrandConfig>> {
    let mut brands: Vec<BrandConfig> = Vec::new();
    for pair in raw.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (id, url) = pair.split_once('=').unwrap_or((pair, ""));
        let id = id.trim();
        if id.is_empty()
            || !id
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
        {
            anyhow::bail!(
                "INTAKE_BRANDS: brand id {id:?} must be lower-case letters, digits, '_' or '-'"
            );
        }
        if brands.iter().any(|b| b.id == id) {
            anyhow::bail!("INTAKE_BRANDS: brand {id:?} is listed twice");
        }
        let url = url.trim();
        let portal_url = if url.is_empty() {
            None
        } else {
            let parsed = Url::parse(url).map_err(|e| {
                anyhow::anyhow!("INTAKE_BRANDS: portal URL of {id:?} is invalid: {e}")
            })?;
            if !matches!(parsed.scheme(), "http" | "https") {
                anyhow::bail!("INTAKE_BRANDS: portal URL of {id:?} must be http or https");
            }
            Some(parsed)
        };
        brands.push(BrandConfig {
            id: id.to_owned(),
            portal_url,
        });
    }
    if brands.len() != 2 {
        anyhow::bail!(
            "INTAKE_BRANDS must name exactly two brands, found {}",
            brands.len()
        );
    }
    Ok(brands)
}

/// A group of settings read from `args` alone, as `serve` reads it: for the groups' tests.
#[cfg(test)]
fn read_group<A: clap::Args + clap::FromArgMatches>(args: &[&str]) -> Result<A, clap::Error> {
    let command = A::augment_args(clap::Command::new("intake-api"));
    let matches =
        command.try_get_matches_from(std::iter::once("intake-api").chain(args.iter().copied()))?;
    A::from_arg_matches(&matches)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_brands_parse() {
        let brands = parse_brands(&Config::with_database("sqlite::memory:").brands).unwrap();
        assert_eq!(brands[0].id, "brand_a");
        assert_eq!(
            brands[1].portal_url.as_ref().unwrap().as_str(),
            "https://portal.brand-b.example/continue"
        );
    }

    #[test]
    fn brand_lists_are_checked() {
        assert!(parse_brands("a=https://a.example").is_err(), "one brand");
        assert!(
            parse_brands("a=https://a.example,a=https://b.example").is_err(),
            "twice"
        );
        assert!(
            parse_brands("A=https://a.example,b=https://b.example").is_err(),
            "upper case"
        );
        assert!(
            parse_brands("a=ftp://a.example,b=https://b.example").is_err(),
            "scheme"
        );
        let ok = parse_brands("a=https://a.example, b=").unwrap();
        assert_eq!(ok[1].portal_url, None);
    }
}
