//! The settings both services' command lines share, as clap arguments each service names
//! with its own environment variables.

use std::marker::PhantomData;
use std::time::Duration;

use clap::Args;

use super::Service;
use crate::Secret;
use crate::db::Schema;
use crate::telemetry::LogFormat;

/// `--database-url`: every command has a database.
#[derive(Debug, Clone, Args)]
pub struct Database<S: Service> {
    /// Database URL: `sqlite://PATH?mode=rwc` or `postgres://USER@HOST/DB`.
    #[arg(
        id = "database_url",
        long = "database-url",
        value_name = "DATABASE_URL",
        env = S::DATABASE_VARIABLE,
        default_value = S::DEFAULT_DATABASE_URL,
        hide_env_values = true
    )]
    pub url: Secret<String>,
    #[arg(skip)]
    service: PhantomData<S>,
}

impl<S: Service> Database<S> {
    /// The database at `url`.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: Secret::new(url.into()),
            service: PhantomData,
        }
    }
}

/// The service's default database, as the flag's default names it.
impl<S: Service> Default for Database<S> {
    fn default() -> Self {
        Self::new(S::DEFAULT_DATABASE_URL)
    }
}

/// `--log-format`, for the commands that log as a server does (`serve`, `migrate`).
#[derive(Debug, Clone, Copy, Args)]
pub struct Logs {
    /// Log format.
    #[arg(long, env = "LOG_FORMAT", value_enum, default_value_t = LogFormat::Pretty)]
    pub log_format: LogFormat,
}

/// `--actor`, for the commands that change something.
#[derive(Debug, Clone, Args)]
pub struct Actor<S: Service> {
    /// Who makes the change, for the record it leaves; the operating-system user when
    /// unset.
    #[arg(long, env = S::ACTOR_VARIABLE)]
    pub actor: Option<String>,
    #[arg(skip)]
    service: PhantomData<S>,
}

/// `--key-encryption-key`, for the operator commands that seal something with the servers'
/// key or check what it sealed. A service that lists it among its
/// [`Service::SECRET_ARGUMENTS`] takes it from the environment only: the flag is refused,
/// and left out of the help.
#[derive(Debug, Clone, Args)]
pub struct KeyEncryptionKeyArg<S: Service> {
    /// The key, base64. Its help is the service's [`Service::KEK_HELP`], as each seals other
    /// things with it.
    #[arg(
        long,
        env = S::KEK_VARIABLE,
        hide = S::SECRET_ARGUMENTS.contains(&"key_encryption_key"),
        hide_env_values = true,
        help = S::KEK_HELP
    )]
    pub key_encryption_key: Option<Secret<String>>,
    #[arg(skip)]
    service: PhantomData<S>,
}

/// Where a server listens, and where it may be scraped apart from its traffic.
#[derive(Debug, Clone, Args)]
pub struct Listen<S: Service> {
    /// Address and port to listen on.
    #[arg(long, env = S::BIND_VARIABLE, default_value = S::DEFAULT_BIND)]
    pub bind: String,
    /// Address and port of a separate listener for `/metrics` (and `/healthz`, `/readyz`);
    /// unset, `/metrics` is served on the main listener.
    #[arg(long, env = S::ADMIN_BIND_VARIABLE)]
    pub admin_bind: Option<String>,
    #[arg(skip)]
    service: PhantomData<S>,
}

/// A server's database: where it is, and whether the server migrates it first.
#[derive(Debug, Clone, Args)]
pub struct ServedDatabase<S: Service> {
    #[command(flatten)]
    pub database: Database<S>,
    /// Apply pending migrations before serving (`--migrate`, `--migrate=false`). Unset: yes
    /// for SQLite, no for PostgreSQL, where `migrate` runs once before a release's replicas
    /// start and `serve` only checks that the schema has what it needs.
    #[arg(
        long,
        env = S::MIGRATE_VARIABLE,
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true"
    )]
    pub migrate: Option<bool>,
}

impl<S: Service> ServedDatabase<S> {
    /// The database URL, which can carry a password.
    pub fn url(&self) -> &str {
        self.database.url.expose()
    }

    /// Points the server at `url`, migrating it first: for tests and embedding.
    pub fn set(&mut self, url: impl Into<String>) {
        self.database = Database::new(url);
        self.migrate = Some(true);
    }

    /// Whether `serve` migrates the database before it serves.
    pub fn migrates(&self) -> bool {
        self.migrate
            .unwrap_or_else(|| crate::db::migrates_by_default(self.url()))
    }
}

/// `migrate`'s settings.
#[derive(Debug, Clone, Args)]
pub struct Migrate<S: Service> {
    #[command(flatten)]
    pub database: Database<S>,
    #[command(flatten)]
    pub logs: Logs,
}

impl<S: Service> Migrate<S> {
    /// Applies `schema`'s pending migrations, logging as the server does.
    pub async fn run<M: sea_orm_migration::MigratorTrait>(
        &self,
        schema: &Schema<M>,
    ) -> anyhow::Result<()> {
        let _logs = crate::telemetry::init_tracing(self.logs.log_format);
        let db = crate::db::connect(self.database.url.expose(), 1).await?;
        schema.migrate(&db).await?;
        tracing::info!("migrations applied");
        Ok(())
    }
}

/// A whole number of seconds, as a setting gives it, read as the duration it is.
pub fn seconds(value: &str) -> Result<Duration, String> {
    whole(value).map(Duration::from_secs)
}

/// A whole number of milliseconds, as a setting gives it, read as the duration it is.
pub fn millis(value: &str) -> Result<Duration, String> {
    whole(value).map(Duration::from_millis)
}

/// `value` when it lies in `range`; otherwise what the setting must be, in milliseconds.
pub fn within(
    value: Duration,
    range: impl std::ops::RangeBounds<Duration>,
) -> Result<Duration, String> {
    use std::ops::Bound::{Included, Unbounded};
    if range.contains(&value) {
        return Ok(value);
    }
    let ms = |d: &Duration| d.as_millis();
    Err(match (range.start_bound(), range.end_bound()) {
        (Included(least), Included(most)) => {
            format!("must be from {} to {} ms", ms(least), ms(most))
        }
        (Included(least), Unbounded) => format!("must be at least {} ms", ms(least)),
        (Unbounded, Included(most)) => format!("must be at most {} ms", ms(most)),
        _ => "is out of range".to_owned(),
    })
}

fn whole(value: &str) -> Result<u64, String> {
    value
        .trim()
        .parse()
        .map_err(|_| format!("`{value}` is not a whole number"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_duration_outside_its_range_is_refused_with_the_range() {
        let s = Duration::from_secs;
        assert_eq!(within(s(5), s(5)..=s(9)), Ok(s(5)));
        assert_eq!(
            within(s(10), s(5)..=s(9)),
            Err("must be from 5000 to 9000 ms".to_owned())
        );
        assert_eq!(
            within(s(4), s(5)..),
            Err("must be at least 5000 ms".to_owned())
        );
        assert_eq!(within(s(4), s(5)..), within(s(0), s(5)..));
        assert_eq!(seconds("7"), Ok(s(7)));
        assert!(millis("-1").is_err() && seconds("1.5").is_err());
    }
}
