//! Configuration: environment variables with matching command-line flags.

use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use service_kit::Secret;
use service_kit::source::TrustedProxies;
use service_kit::telemetry::LogFormat;
use url::Url;

use crate::store::Timing;

/// The intake-api's settings; every one has a default that runs locally.
#[derive(Debug, Clone, Args)]
pub struct Config {
    /// Address and port to listen on.
    #[arg(
        long,
        env = "INTAKE_BIND",
        default_value = "127.0.0.1:8082",
        global = true
    )]
    pub bind: String,
    /// Address and port of a separate listener for `/metrics` (and `/healthz`, `/readyz`);
    /// unset, `/metrics` is served on the main listener.
    #[arg(long, env = "INTAKE_ADMIN_BIND", global = true)]
    pub admin_bind: Option<String>,
    /// Database URL: `sqlite://PATH?mode=rwc` or `postgres://USER@HOST/DB`.
    #[arg(
        long,
        env = "INTAKE_DATABASE_URL",
        default_value = "sqlite://data/intake.db?mode=rwc",
        hide_env_values = true,
        global = true
    )]
    pub database_url: String,
    /// Most database connections the server holds (PostgreSQL's `max_connections` must
    /// cover every replica's pool).
    #[arg(
        long,
        env = "INTAKE_DATABASE_MAX_CONNECTIONS",
        default_value_t = 10,
        value_parser = clap::value_parser!(u32).range(1..=1000),
        global = true
    )]
    pub database_max_connections: u32,
    /// Where the auth-server publishes its signing keys.
    #[arg(
        long,
        env = "INTAKE_JWKS_URL",
        default_value = "http://127.0.0.1:8081/.well-known/jwks.json",
        global = true
    )]
    pub jwks_url: String,
    /// A PEM file of certificates to trust, besides the system's, when fetching from the
    /// auth-server (a private or self-signed certificate on its https URLs).
    #[arg(long, env = "INTAKE_AUTH_CA_FILE", global = true)]
    pub auth_ca_file: Option<std::path::PathBuf>,
    /// Where the auth-server lists disabled clients; by default `/revocations` beside the
    /// JWKS.
    #[arg(long, env = "INTAKE_REVOCATIONS_URL", global = true)]
    pub revocations_url: Option<String>,
    /// How often the signing keys and the revocation list are checked for changes, in
    /// milliseconds (a conditional request: a 304 when nothing changed).
    #[arg(
        long,
        env = "INTAKE_KEYS_POLL_MS",
        default_value_t = 1000,
        value_parser = clap::value_parser!(u64).range(100..=60_000),
        global = true
    )]
    pub keys_poll_ms: u64,
    /// The `iss` every access token must carry.
    #[arg(
        long,
        env = "INTAKE_ISSUER",
        default_value = "http://127.0.0.1:8081",
        global = true
    )]
    pub issuer: String,
    /// The `aud` every access token must carry.
    #[arg(
        long,
        env = "INTAKE_AUDIENCE",
        default_value = "partner-intake",
        global = true
    )]
    pub audience: String,
    /// Seconds between a case's creation and its activation.
    #[arg(
        long,
        env = "INTAKE_ACTIVATION_DELAY_SECS",
        default_value_t = 900,
        global = true
    )]
    pub activation_delay_secs: u64,
    /// The two brands as `id=customer-portal-URL` pairs, comma-separated.
    #[arg(
        long,
        env = "INTAKE_BRANDS",
        default_value = "brand_a=https://portal.brand-a.example/continue,brand_b=https://portal.brand-b.example/continue",
        global = true
    )]
    pub brands: String,
    /// Lifetime of a customer redirect link, in seconds.
    #[arg(
        long,
        env = "INTAKE_REDIRECT_TTL_SECS",
        default_value_t = 86_400,
        global = true
    )]
    pub redirect_ttl_secs: u64,
    /// Redis URL for limits shared between replicas; in-process limits without it.
    #[arg(long, env = "REDIS_URL", hide_env_values = true, global = true)]
    pub redis_url: Option<Secret<String>>,
    /// Proxies whose `X-Forwarded-For` names a request's source address (for the logs):
    /// comma-separated CIDR blocks or addresses; none by default.
    #[arg(
        long,
        env = "INTAKE_TRUSTED_PROXIES",
        default_value = "",
        global = true
    )]
    pub trusted_proxies: TrustedProxies,
    /// Log format.
    #[arg(long, env = "LOG_FORMAT", value_enum, default_value_t = LogFormat::Pretty, global = true)]
    pub log_format: LogFormat,
    /// Intake requests allowed per partner (client id) per window.
    #[arg(long, env = "INTAKE_RATE_LIMIT", default_value_t = 1200, global = true)]
    pub rate_limit: u32,
    /// The rate-limit window, in seconds.
    #[arg(
        long,
        env = "INTAKE_RATE_WINDOW_SECS",
        default_value_t = 60,
        global = true
    )]
    pub rate_window_secs: u64,
    /// How often the activation worker looks for due cases, in milliseconds.
    #[arg(
        long,
        env = "INTAKE_ACTIVATION_POLL_MS",
        default_value_t = 1000,
        global = true
    )]
    pub activation_poll_ms: u64,
    /// Lets webhooks go to http URLs and to private, loopback and link-local addresses:
    /// for local use and tests only.
    #[arg(
        long,
        env = "INTAKE_WEBHOOK_ALLOW_INSECURE",
        default_value_t = false,
        action = clap::ArgAction::Set,
        global = true
    )]
    pub webhook_allow_insecure: bool,
    /// How long an event is retried before it is marked failed, in seconds.
    #[arg(
        long,
        env = "INTAKE_WEBHOOK_RETRY_SECS",
        default_value_t = 86_400,
        global = true
    )]
    pub webhook_retry_secs: u64,
    /// The first wait before an event is tried again, in milliseconds; it doubles with each
    /// try, up to an hour.
    #[arg(
        long,
        env = "INTAKE_WEBHOOK_BACKOFF_MS",
        default_value_t = 5_000,
        global = true
    )]
    pub webhook_backoff_ms: u64,
    /// How often the webhook worker looks for due events, in milliseconds.
    #[arg(
        long,
        env = "INTAKE_WEBHOOK_POLL_MS",
        default_value_t = 1000,
        global = true
    )]
    pub webhook_poll_ms: u64,
}

impl Config {
    /// Every default, on the given database: for tests and embedding.
    pub fn with_database(database_url: impl Into<String>) -> Self {
        let mut config = Cli::parse_from(["intake-api"]).config;
        config.database_url = database_url.into();
        config
    }

    /// How long cases wait to activate and redirect links last.
    pub fn timing(&self) -> Timing {
        Timing {
            activation_delay: Duration::from_secs(self.activation_delay_secs),
            redirect_ttl: Duration::from_secs(self.redirect_ttl_secs),
        }
    }

    /// Where disabled clients are listed: as configured, or `/revocations` on the JWKS's
    /// server.
    pub fn revocations_url(&self) -> anyhow::Result<String> {
        if let Some(url) = &self.revocations_url {
            return Ok(url.clone());
        }
        let jwks = Url::parse(&self.jwks_url)
            .map_err(|e| anyhow::anyhow!("INTAKE_JWKS_URL is not a URL: {e}"))?;
        Ok(jwks.join("/revocations")?.into())
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

/// The intake-api: partner enquiry intake.
#[derive(Debug, Parser)]
#[command(name = "intake-api", version, about)]
pub struct Cli {
    /// Settings shared by every command.
    #[command(flatten)]
    pub config: Config,
    /// What to do; `serve` when omitted.
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// Commands of the intake-api binary.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the HTTP server and the activation worker (the default).
    Serve,
    /// Apply database migrations and exit.
    Migrate,
    /// Look at cases.
    #[command(subcommand)]
    Case(CaseCommand),
    /// Manage partners' webhook endpoints and their deliveries.
    #[command(subcommand)]
    Webhook(WebhookCommand),
}

/// `intake-api webhook ...`
#[derive(Debug, Subcommand)]
pub enum WebhookCommand {
    /// Send a partner's events to URL (https, public addresses only); prints the signing
    /// secret. Setting it again changes the URL, keeps the secret and re-enables it.
    Set {
        /// The partner's client id.
        client_id: String,
        /// Where its events are POSTed.
        url: String,
    },
    /// List every endpoint (never the secrets).
    List,
    /// Stop sending a partner's events; the ones not yet delivered are dropped.
    Remove {
        /// The partner's client id.
        client_id: String,
    },
    /// Give an endpoint a new signing secret; the old one keeps signing beside it for the
    /// grace period, so the partner can switch without missing a delivery.
    RotateSecret {
        /// The partner's client id.
        client_id: String,
        /// How long the old secret keeps signing, in seconds.
        #[arg(long, default_value_t = 86_400)]
        grace_secs: u64,
    },
    /// A partner's events, newest first.
    Deliveries {
        /// The partner's client id.
        client_id: String,
        /// Only the ones given up on.
        #[arg(long)]
        failed: bool,
        /// How many.
        #[arg(long, default_value_t = 50)]
        limit: u64,
    },
    /// Send an event again, at once, to every partner it went to.
    Redeliver {
        /// The event's id (as `deliveries` lists it, or its `webhook-id`).
        delivery_id: String,
    },
}

/// `intake-api case ...`
#[derive(Debug, Subcommand)]
pub enum CaseCommand {
    /// Print one case as JSON.
    Show {
        /// The case reference.
        reference: String,
    },
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
