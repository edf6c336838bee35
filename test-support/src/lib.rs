//! Test helpers shared by the services' integration tests: a fresh database per test on
//! SQLite or PostgreSQL, and the real services started in-process on port 0.

mod db;
pub mod document;
pub mod proxy;
pub mod softhsm;

use std::future::Future;
use std::time::{Duration, Instant};

use service_kit::http::Server;
use tokio::sync::oneshot;

pub use db::{Backend, Schema, TestDb, postgres_admin_url};

/// Runs each named async test body (taking a [`Backend`]) once on SQLite and once on
/// PostgreSQL, as `NAME::sqlite` and `NAME::postgres`.
#[macro_export]
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn sqlite() {
                    super::$name($crate::Backend::Sqlite).await
                }
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn postgres() {
                    super::$name($crate::Backend::Postgres).await
                }
            }
        )*
    };
}

/// Runs each named async test body on SQLite only: for behaviour that never touches the
/// database.
#[macro_export]
macro_rules! on_sqlite {
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn sqlite() {
                    super::$name($crate::Backend::Sqlite).await
                }
            }
        )*
    };
}

/// A running in-process server that stops when told or dropped.
pub struct Running {
    /// The port it listens on.
    pub port: u16,
    stop: Option<oneshot::Sender<()>>,
    handle: Option<tokio::task::JoinHandle<anyhow::Result<()>>>,
}

impl Running {
    /// Spawns `serve(shutdown)` on the current runtime.
    pub fn spawn<F, Fut>(port: u16, serve: F) -> Self
    where
        F: FnOnce(oneshot::Receiver<()>) -> Fut,
        Fut: Future<Output = anyhow::Result<()>> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        let handle = tokio::spawn(serve(rx));
        Self {
            port,
            stop: Some(tx),
            handle: Some(handle),
        }
    }

    /// Serves `app` on a free port of 127.0.0.1 until stopped or dropped: for the stand-ins
    /// tests put where another party would answer (a JWKS, a partner's webhook receiver).
    pub async fn serve_locally(app: impl poem::Endpoint + 'static) -> Self {
        use poem::listener::{Acceptor, Listener, TcpListener};
        let acceptor = TcpListener::bind("127.0.0.1:0")
            .into_acceptor()
            .await
            .expect("bind a local server");
        let port = acceptor
            .local_addr()
            .first()
            .and_then(|a| a.as_socket_addr().map(|s| s.port()))
            .expect("the local server's port");
        Self::spawn(port, move |rx| async move {
            poem::Server::new_with_acceptor(acceptor)
                .run_with_graceful_shutdown(
                    app,
                    async {
                        let _ = rx.await;
                    },
                    None,
                )
                .await?;
            Ok(())
        })
    }

    /// `http://127.0.0.1:PORT`.
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Stops the server and waits until it has shut down.
    pub async fn stop(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(h) = self.handle.take() {
            let _ = tokio::time::timeout(Duration::from_secs(30), h).await;
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(h) = self.handle.take() {
            h.abort();
        }
    }
}

/// Sends the services' logs to stderr when `TEST_LOG` is set (e.g. `TEST_LOG=debug`), to
/// see why a test failed; quiet otherwise.
fn init_test_logging() {
    if let Ok(filter) = std::env::var("TEST_LOG") {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_writer(std::io::stderr)
            .try_init();
    }
}

/// The key-encryption key test auth-servers seal their signing keys with (32 bytes, base64).
pub const TEST_KEY_ENCRYPTION_KEY: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";

/// The key-encryption key test intake-apis seal their stored answers with (32 bytes,
/// base64): another than the auth-server's, as in production.
pub const TEST_INTAKE_KEY_ENCRYPTION_KEY: &str = "ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8=";

/// A real auth-server on port 0 over a database of its own (or a shared one).
pub struct AuthServer {
    /// The server.
    pub server: Running,
    /// The admin listener's port, when the configuration asked for one.
    pub admin_port: Option<u16>,
    /// Its configuration (the CLI commands use it too).
    pub config: auth_server::config::Config,
    /// What the running server's requests share, to look inside it.
    pub state: std::sync::Arc<auth_server::state::AppState>,
    /// The resource servers' client (`revocations:read`), made on first use.
    resource_client: tokio::sync::OnceCell<(String, String)>,
}

impl AuthServer {
    /// Starts an auth-server on `database_url`, with `configure` applied to the defaults.
    pub async fn start(
        database_url: &str,
        configure: impl FnOnce(&mut auth_server::config::Config),
    ) -> anyhow::Result<Self> {
        init_test_logging();
        let mut config = auth_server::config::Config::with_database(database_url);
        config.listen.bind = "127.0.0.1:0".into();
        config.key_encryption_key = Some(TEST_KEY_ENCRYPTION_KEY.parse().expect("infallible"));
        configure(&mut config);
        let app = auth_server::startup::Application::build(config.clone()).await?;
        let (port, admin_port, state) = (app.port(), app.admin_port(), app.state());
        let server = Running::spawn(port, move |rx| async move {
            app.run_until(async {
                let _ = rx.await;
            })
            .await
        });
        Ok(Self {
            server,
            admin_port,
            config,
            state,
            resource_client: tokio::sync::OnceCell::new(),
        })
    }

    /// The server's base URL.
    pub fn base_url(&self) -> String {
        self.server.base_url()
    }

    /// `(client_id, client_secret)` of a client granted `revocations:read`, as an
    /// intake-api reads the revocation list with; one per server, shared by its intake-apis.
    pub async fn resource_client(&self) -> (String, String) {
        self.resource_client
            .get_or_init(|| self.create_client(shared::claims::scopes::REVOCATIONS_READ))
            .await
            .clone()
    }

    /// Runs an operator `client` command against the same database; returns its output.
    pub async fn client_cmd(
        &self,
        command: auth_server::commands::ClientCommand,
    ) -> anyhow::Result<serde_json::Value> {
        auth_server::cli::client(&self.config, command).await
    }

    /// Runs an operator `key` command against the same database; returns its output.
    pub async fn key_cmd(
        &self,
        command: auth_server::commands::KeyCommand,
    ) -> anyhow::Result<serde_json::Value> {
        auth_server::cli::key(&self.config, command).await
    }

    /// Runs `key list` against the same database; panics unless it succeeds.
    pub async fn key_list(&self) -> serde_json::Value {
        self.key_cmd(auth_server::commands::KeyCommand::List {
            rotation_interval_secs: None,
        })
        .await
        .expect("key list")
    }

    /// Runs `key rotate` against the same database, to `alg` (the current algorithm when
    /// `None`) with the standby published at least `publish_ahead_secs` before it signs (the
    /// JWKS max-age when `None`); panics unless it succeeds, and returns its output.
    pub async fn rotate_key(
        &self,
        alg: Option<shared::claims::TokenAlgorithm>,
        publish_ahead_secs: Option<u64>,
    ) -> serde_json::Value {
        self.key_cmd(auth_server::commands::KeyCommand::Rotate {
            alg,
            publish_ahead_secs,
            move_key_store: false,
        })
        .await
        .expect("key rotate")
    }

    /// Runs an operator `audit` command against the same database; returns its output.
    pub async fn audit_cmd(
        &self,
        command: auth_server::commands::AuditCommand,
    ) -> anyhow::Result<serde_json::Value> {
        auth_server::cli::audit(&self.config, command).await
    }

    /// Registers a client with `scopes`; returns `(client_id, client_secret)`.
    pub async fn create_client(&self, scopes: &str) -> (String, String) {
        self.create_client_with(scopes, None).await
    }

    /// Registers a brand's customer-portal client bound to `brands` (comma-separated);
    /// returns `(client_id, client_secret)`.
    pub async fn create_portal(&self, brands: &str) -> (String, String) {
        self.create_client_with("portal:redirect:redeem", Some(brands))
            .await
    }

    /// Binds existing portal client `client_id` to `brands` (comma-separated).
    pub async fn set_brands(&self, client_id: &str, brands: &str) {
        self.client_cmd(auth_server::commands::ClientCommand::SetBrands {
            client_id: client_id.into(),
            brands: brands.into(),
        })
        .await
        .expect("client set-brands");
    }

    async fn create_client_with(&self, scopes: &str, brands: Option<&str>) -> (String, String) {
        create_client_at(&self.config, scopes, brands, false).await
    }

    /// Registers a sandbox partner (`client create --sandbox`) with `scopes`; returns
    /// `(client_id, client_secret)`.
    pub async fn create_sandbox_client(&self, scopes: &str) -> (String, String) {
        create_client_at(&self.config, scopes, None, true).await
    }

    /// Gets an access token with client_secret_post; panics unless it is issued.
    pub async fn token(&self, client_id: &str, client_secret: &str, scope: &str) -> String {
        let resp = reqwest::Client::new()
            .post(format!("{}/oauth/token", self.base_url()))
            .json(&serde_json::json!({
                "grant_type": "client_credentials",
                "client_id": client_id,
                "client_secret": client_secret,
                "scope": scope,
            }))
            .send()
            .await
            .expect("token request");
        assert_eq!(resp.status(), 200, "token request refused");
        let body: serde_json::Value = resp.json().await.expect("token body");
        body["access_token"]
            .as_str()
            .expect("access_token")
            .to_owned()
    }
}

/// Registers a client with `scopes` in the auth database at `database_url`, as an operator
/// does before any auth-server runs there; returns `(client_id, client_secret)`.
pub async fn create_client_offline(database_url: &str, scopes: &str) -> (String, String) {
    let mut config = auth_server::config::Config::with_database(database_url);
    config.key_encryption_key = Some(TEST_KEY_ENCRYPTION_KEY.parse().expect("infallible"));
    create_client_at(&config, scopes, None, false).await
}

async fn create_client_at(
    config: &auth_server::config::Config,
    scopes: &str,
    brands: Option<&str>,
    sandbox: bool,
) -> (String, String) {
    // Client names are unique.
    let name = format!("Test Partner {}", uuid::Uuid::new_v4().simple());
    let out = auth_server::cli::client(
        config,
        auth_server::commands::ClientCommand::Create {
            name,
            scopes: scopes.into(),
            brands: brands.map(str::to_owned),
            auth_method: Default::default(),
            jwks_file: None,
            jwks_uri: None,
            sandbox,
        },
    )
    .await
    .expect("client create");
    (
        out["client_id"].as_str().expect("client_id").to_owned(),
        out["client_secret"]
            .as_str()
            .expect("client_secret")
            .to_owned(),
    )
}

/// A real intake-api on port 0, verifying tokens against `jwks_url`.
pub struct IntakeServer {
    /// The server.
    pub server: Running,
    /// The admin listener's port, when the configuration asked for one.
    pub admin_port: Option<u16>,
    /// Its configuration.
    pub config: intake_api::config::Config,
}

impl IntakeServer {
    /// Starts an intake-api on `database_url`, with `configure` applied to the defaults
    /// (which include the JWKS URL, issuer and audience of `auth`).
    pub async fn start(
        database_url: &str,
        auth: &AuthServer,
        configure: impl FnOnce(&mut intake_api::config::Config),
    ) -> anyhow::Result<Self> {
        let jwks_url = format!("{}/.well-known/jwks.json", auth.base_url());
        let (id, secret) = auth.resource_client().await;
        Self::start_with_jwks(database_url, &jwks_url, |config| {
            config.issuer = auth.config.issuer().to_owned();
            config.audience = auth.config.audience.clone();
            config.auth_server.client_id = Some(id);
            config.auth_server.client_secret = Some(secret.parse().expect("infallible"));
            // Straight to the auth-server, whatever relay a test puts in front of the keys.
            let token_url = format!("{}/oauth/token", auth.base_url());
            config.auth_server.token_url = Some(token_url.parse().expect("a token URL"));
            configure(config);
        })
        .await
    }

    /// Starts an intake-api whose keys come from `jwks_url` (nothing needs to answer there
    /// yet), with the default issuer and audience and `configure` applied. Its revocation
    /// client is one no auth-server knows, unless `configure` names one.
    pub async fn start_with_jwks(
        database_url: &str,
        jwks_url: &str,
        configure: impl FnOnce(&mut intake_api::config::Config),
    ) -> anyhow::Result<Self> {
        init_test_logging();
        let mut config = intake_api::config::Config::with_database(database_url);
        config.listen.bind = "127.0.0.1:0".into();
        config.auth_server.jwks_url = jwks_url.parse().expect("a JWKS URL");
        config.key_encryption_key =
            Some(TEST_INTAKE_KEY_ENCRYPTION_KEY.parse().expect("infallible"));
        config.auth_server.client_id = Some("unregistered-resource-server".into());
        config.auth_server.client_secret = Some("unregistered".parse().expect("infallible"));
        configure(&mut config);
        let app = intake_api::startup::Application::build(config.clone()).await?;
        let (port, admin_port) = (app.port(), app.admin_port());
        let server = Running::spawn(port, move |rx| async move {
            app.run_until(async {
                let _ = rx.await;
            })
            .await
        });
        Ok(Self {
            server,
            admin_port,
            config,
        })
    }

    /// The server's base URL.
    pub fn base_url(&self) -> String {
        self.server.base_url()
    }

    /// Waits until `/readyz` answers 200 (JWKS loaded, database reachable).
    pub async fn wait_ready(&self) -> bool {
        let url = format!("{}/readyz", self.base_url());
        eventually(Duration::from_secs(10), || async {
            let r = reqwest::get(&url).await.ok()?;
            (r.status() == 200).then_some(())
        })
        .await
        .is_some()
    }
}

/// Polls `check` until it returns `Some` or `timeout` passes.
pub async fn eventually<T, F, Fut>(timeout: Duration, mut check: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let start = Instant::now();
    loop {
        if let Some(v) = check().await {
            return Some(v);
        }
        if start.elapsed() > timeout {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The `kid` in a JWT's header.
pub fn kid_of(jwt: &str) -> String {
    header_member(jwt, "kid")
}

/// The `alg` in a JWT's header.
pub fn alg_of(jwt: &str) -> String {
    header_member(jwt, "alg")
}

fn header_member(jwt: &str, name: &str) -> String {
    let header = jwt.split('.').next().unwrap_or_default();
    let bytes = base64_url_decode(header);
    let v: serde_json::Value = serde_json::from_slice(&bytes).expect("JWT header JSON");
    v[name].as_str().expect(name).to_owned()
}

fn base64_url_decode(s: &str) -> Vec<u8> {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(s)
        .expect("base64url")
}
