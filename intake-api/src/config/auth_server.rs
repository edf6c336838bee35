//! How the intake-api reaches the auth-server: where its keys and its list of disabled
//! clients are, the intake-api's own client that reads the list, and how often and how old
//! both may be. Read once, into URLs, durations and an algorithm.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use service_kit::Secret;
use service_kit::command_line::{millis, seconds, within};
use token_client::AssertionAlgorithm;
use url::Url;

/// The auth-server, as the intake-api reads it.
#[derive(Debug, Clone, Args)]
pub struct AuthServerSettings {
    /// Where the auth-server publishes its signing keys.
    #[arg(
        id = "jwks_url",
        long = "jwks-url",
        env = "INTAKE_JWKS_URL",
        default_value = "http://127.0.0.1:8081/.well-known/jwks.json"
    )]
    pub jwks_url: Url,
    /// A PEM file of certificates to trust, besides the system's, when fetching from the
    /// auth-server (a private or self-signed certificate on its https URLs).
    #[arg(
        id = "auth_ca_file",
        long = "auth-ca-file",
        env = "INTAKE_AUTH_CA_FILE"
    )]
    pub ca_file: Option<PathBuf>,
    /// Where the auth-server lists disabled clients; by default `/revocations` beside the
    /// JWKS.
    #[arg(
        id = "revocations_url",
        long = "revocations-url",
        env = "INTAKE_REVOCATIONS_URL"
    )]
    pub revocations_url: Option<Url>,
    /// The intake-api's own client at the auth-server, granted `revocations:read`
    /// (`auth-server client create intake-api --scopes revocations:read`): the revocation
    /// list is read with its tokens. Required by `serve`.
    #[arg(
        id = "revocations_client_id",
        long = "revocations-client-id",
        env = "INTAKE_REVOCATIONS_CLIENT_ID"
    )]
    pub client_id: Option<String>,
    /// That client's secret, when it authenticates with one. Required by `serve` unless
    /// INTAKE_REVOCATIONS_CLIENT_KEY_FILE is set instead. From the environment only (a
    /// flag is refused: `ps` would show it).
    #[arg(
        id = "revocations_client_secret",
        long = "revocations-client-secret",
        env = "INTAKE_REVOCATIONS_CLIENT_SECRET",
        hide = true,
        hide_env_values = true
    )]
    pub client_secret: Option<Secret<String>>,
    /// Instead of a secret: a PEM file (PKCS#8) of the private key that client signs its
    /// client assertions with (private_key_jwt; register its public key with
    /// `client create --auth-method private-key-jwt`). Required under INTAKE_FAPI2.
    #[arg(
        id = "revocations_client_key_file",
        long = "revocations-client-key-file",
        env = "INTAKE_REVOCATIONS_CLIENT_KEY_FILE"
    )]
    pub client_key_file: Option<PathBuf>,
    /// The algorithm of that key: ES256 (P-256), PS256 or RS256 (RSA), or EdDSA (Ed25519);
    /// not RS256 under INTAKE_FAPI2.
    #[arg(
        id = "revocations_client_key_alg",
        long = "revocations-client-key-alg",
        env = "INTAKE_REVOCATIONS_CLIENT_KEY_ALG",
        default_value = "ES256"
    )]
    pub client_key_alg: AssertionAlgorithm,
    /// Where that client gets its tokens; by default `/oauth/token` beside the JWKS.
    #[arg(id = "token_url", long = "token-url", env = "INTAKE_TOKEN_URL")]
    pub token_url: Option<Url>,
    /// How old the revocation list may grow, in seconds since it was last fetched (or
    /// confirmed unchanged), before this replica stops vetting tokens: past it, it is not
    /// ready and answers 503 rather than admit a client disabled in the meantime. At least
    /// 5, at most a day, and two INTAKE_KEYS_POLL_MS periods or more.
    #[arg(
        id = "revocations_max_age_secs",
        long = "revocations-max-age-secs",
        env = "INTAKE_REVOCATIONS_MAX_AGE_SECS",
        value_name = "SECONDS",
        default_value = "300",
        value_parser = max_age
    )]
    pub revocations_max_age: Duration,
    /// How often the signing keys and the revocation list are checked for changes, in
    /// milliseconds (a conditional request: a 304 when nothing changed); 100 to 60,000.
    #[arg(
        id = "keys_poll_ms",
        long = "keys-poll-ms",
        env = "INTAKE_KEYS_POLL_MS",
        value_name = "MILLISECONDS",
        default_value = "1000",
        value_parser = keys_poll
    )]
    pub keys_poll: Duration,
}

impl AuthServerSettings {
    /// The rules between these settings: a list that may grow only one poll old would be
    /// stale between two polls.
    pub fn check(&self) -> anyhow::Result<()> {
        anyhow::ensure!(
            self.revocations_max_age >= 2 * self.keys_poll,
            "INTAKE_REVOCATIONS_MAX_AGE_SECS must be at least two INTAKE_KEYS_POLL_MS periods"
        );
        Ok(())
    }

    /// Where disabled clients are listed: as configured, or `/revocations` on the JWKS's
    /// server.
    pub fn revocations_url(&self) -> Url {
        self.revocations_url
            .clone()
            .unwrap_or_else(|| beside_jwks(&self.jwks_url, "/revocations"))
    }

    /// Where the intake-api's own client gets its tokens: as configured, or `/oauth/token`
    /// on the JWKS's server.
    pub fn token_url(&self) -> Url {
        self.token_url
            .clone()
            .unwrap_or_else(|| beside_jwks(&self.jwks_url, "/oauth/token"))
    }
}

/// `path` on the JWKS's server.
fn beside_jwks(jwks: &Url, path: &str) -> Url {
    let mut url = jwks.clone();
    url.set_path(path);
    url.set_query(None);
    url.set_fragment(None);
    url
}

fn max_age(value: &str) -> Result<Duration, String> {
    within(
        seconds(value)?,
        Duration::from_secs(5)..=Duration::from_secs(86_400),
    )
}

fn keys_poll(value: &str) -> Result<Duration, String> {
    within(
        millis(value)?,
        Duration::from_millis(100)..=Duration::from_secs(60),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<AuthServerSettings, clap::Error> {
        crate::config::read_group(args)
    }

    #[test]
    fn the_lists_and_tokens_are_beside_the_jwks_unless_set() {
        let read = parse(&[
            "--jwks-url",
            "https://auth.example:8443/.well-known/jwks.json?x=1",
        ])
        .expect("a URL");
        assert_eq!(
            read.revocations_url().as_str(),
            "https://auth.example:8443/revocations"
        );
        assert_eq!(
            read.token_url().as_str(),
            "https://auth.example:8443/oauth/token"
        );
        let set = parse(&["--token-url", "https://tokens.example/t"]).expect("a URL");
        assert_eq!(set.token_url().as_str(), "https://tokens.example/t");
        assert_eq!(set.client_key_alg, AssertionAlgorithm::ES256);
    }

    #[test]
    fn what_cannot_be_used_is_refused_when_read_naming_the_setting() {
        for (flag, value) in [
            ("--jwks-url", "not a url"),
            ("--token-url", "/oauth/token"),
            ("--revocations-client-key-alg", "HS256"),
            ("--revocations-max-age-secs", "4"),
            ("--keys-poll-ms", "99"),
        ] {
            let refused = parse(&[flag, value]).expect_err(flag).to_string();
            assert!(refused.contains(flag), "{flag}: {refused}");
        }
        let slow = parse(&[
            "--keys-poll-ms",
            "60000",
            "--revocations-max-age-secs",
            "60",
        ])
        .expect("each alone is good");
        assert!(slow.check().is_err());
    }
}
