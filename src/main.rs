//! The whole stack in one process for local use: `cargo run --release`.
//!
//! Both services run as they do in production (the intake-api fetches the auth-server's
//! JWKS over loopback HTTP), on SQLite files under `./data/`, with no Redis. On first start
//! a demo partner client is created and its credentials written to `data/demo-client.json`,
//! and the intake-api's own client, which reads the revocation list, to
//! `data/intake-revocations-client.json`.

use std::io::Write;
use std::path::Path;

use anyhow::Context;
use auth_server::config::ClientCommand;
use base64::Engine;
use serde_json::{Value, json};
use service_kit::http::Server;

const DEMO_FILE: &str = "data/demo-client.json";
const RESOURCE_CLIENT_FILE: &str = "data/intake-revocations-client.json";
const KEY_ENCRYPTION_KEY_FILE: &str = "data/key-encryption-key";
const INTAKE_KEY_ENCRYPTION_KEY_FILE: &str = "data/intake-key-encryption-key";
const DEMO_SCOPE: &str = "enquiry:case:intake:create";
/// What the demo partner is granted: enquiries, and referrals to try from the docs page.
const DEMO_GRANTED: &str = "enquiry:case:intake:create enquiry:referral:create";
const DEMO_EMAIL: &str = "jane.doe@example.com";

/// A client the launcher keeps in `file`: the one of an earlier start while it still
/// exists and is enabled; otherwise a new one named `name` (numbered after any earlier
/// ones), granted `scopes`.
async fn kept_client(
    config: &auth_server::config::Config,
    file: &str,
    name: &str,
    scopes: &str,
) -> anyhow::Result<Value> {
    let clients = auth_server::cli::client(config, ClientCommand::List).await?;
    let clients = clients.as_array().map(Vec::as_slice).unwrap_or_default();
    if let Ok(text) = std::fs::read_to_string(file)
        && let Ok(saved) = serde_json::from_str::<Value>(&text)
    {
        let known = clients
            .iter()
            .any(|c| c["client_id"] == saved["client_id"] && c["disabled"] == false);
        if known {
            return Ok(saved);
        }
    }
    // Names are unique: a client lost or disabled earlier keeps its own.
    let earlier = clients
        .iter()
        .filter(|c| c["name"].as_str().is_some_and(|n| n.starts_with(name)))
        .count();
    let name = match earlier {
        0 => name.to_owned(),
        n => format!("{name} {}", n + 1),
    };
    let created = auth_server::cli::client(
        config,
        ClientCommand::Create {
            name,
            scopes: scopes.into(),
            brands: None,
            auth_method: Default::default(),
            jwks_file: None,
            jwks_uri: None,
            sandbox: false,
        },
    )
    .await?;
    write_private(Path::new(file), &serde_json::to_vec_pretty(&created)?)?;
    Ok(created)
}

/// Writes a file only its owner can read: it holds a client secret.
fn write_private(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        options.mode(0o600);
        // An existing file keeps its mode on open: tighten it too.
        if path.exists() {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
        }
    }
    let mut file = options
        .open(path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    file.write_all(bytes)?;
    Ok(())
}

/// A key-encryption key of the local stack: made once (32 random bytes, base64) and kept
/// in `data/` beside the databases, readable only by its owner, so a first start needs no
/// setting and signing keys and stored answers are still never kept in clear.
fn local_key_encryption_key(file: &str) -> anyhow::Result<String> {
    let path = Path::new(file);
    if let Ok(existing) = std::fs::read_to_string(path) {
        return Ok(existing.trim().to_owned());
    }
    let mut bytes = [0u8; 32];
    aws_lc_rs::rand::fill(&mut bytes).map_err(|_| anyhow::anyhow!("no randomness for a key"))?;
    let encoded = base64::engine::general_purpose::STANDARD.encode(bytes);
    write_private(path, encoded.as_bytes())?;
    Ok(encoded)
}

/// The enquiry the banner's curl command submits: the tests' own purchase fixture.
fn example_enquiry() -> Value {
    intake_api::examples::purchase_enquiry("brand_a", DEMO_EMAIL)
}

fn banner(demo: &Value, auth_url: &str, intake_url: &str) -> String {
    let token_body = json!({
        "grant_type": "client_credentials",
        "client_id": demo["client_id"],
        "client_secret": demo["client_secret"],
        "scope": DEMO_SCOPE,
    });
    let attach = json!({"email": DEMO_EMAIL, "product_uuid": intake_api::examples::PRODUCT_UUID});
    format!(
        r#"
Partner Intake is running.
  auth-server: {auth_url}   (docs: {auth_url}/docs)
  intake-api:  {intake_url}   (docs: {intake_url}/docs)

Demo partner (saved in {DEMO_FILE}):
  client_id:     {id}
  client_secret: {secret}

1. Get a token:
TOKEN=$(curl -s {auth_url}/oauth/token -H 'Content-Type: application/json' -d '{token_body}' | sed -E 's/.*"access_token":"([^"]+)".*/\1/')

2. Submit an enquiry:
curl -s {intake_url}/partners/external/intake -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' -d '{enquiry}'

3. Attach a product:
curl -s {intake_url}/partners/external/intake/attach -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' -d '{attach}'
"#,
        id = demo["client_id"].as_str().unwrap_or_default(),
        secret = demo["client_secret"].as_str().unwrap_or_default(),
        enquiry = example_enquiry(),
    )
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // Each service reads its own environment variables, exactly as its binary does.
    let mut auth_config = auth_server::config::Config::from_env()?;
    if auth_config.key_encryption_key.is_none() {
        auth_config.key_encryption_key =
            Some(local_key_encryption_key(KEY_ENCRYPTION_KEY_FILE)?.parse()?);
    }
    // One process on its own databases: nothing else can be running an earlier release on
    // them, so each service migrates at start unless told otherwise.
    auth_config.database.migrate.get_or_insert(true);
    let mut intake_config = intake_api::config::Config::from_env()?;
    if intake_config.key_encryption_key.is_none() {
        intake_config.key_encryption_key =
            Some(local_key_encryption_key(INTAKE_KEY_ENCRYPTION_KEY_FILE)?.parse()?);
    }
    intake_config.database.migrate.get_or_insert(true);
    let _logs = service_kit::telemetry::init_tracing(auth_config.logs.log_format);

    let auth = auth_server::startup::Application::build(auth_config.clone()).await?;
    let demo = kept_client(&auth_config, DEMO_FILE, "Demo partner", DEMO_GRANTED).await?;
    if intake_config.revocations_client_id.is_none() {
        let own = kept_client(
            &auth_config,
            RESOURCE_CLIENT_FILE,
            "Intake API revocation reader",
            shared::claims::scopes::REVOCATIONS_READ,
        )
        .await?;
        intake_config.revocations_client_id = own["client_id"].as_str().map(str::to_owned);
        intake_config.revocations_client_secret =
            Some(own["client_secret"].as_str().unwrap_or_default().parse()?);
    }
    let intake = intake_api::startup::Application::build(intake_config.clone()).await?;
    let auth_url = format!(
        "http://{}",
        auth_config
            .listen
            .bind
            .replace(":0", &format!(":{}", auth.port()))
    );
    let intake_url = format!(
        "http://{}",
        intake_config
            .listen
            .bind
            .replace(":0", &format!(":{}", intake.port()))
    );
    println!("{}", banner(&demo, &auth_url, &intake_url));

    // One signal stops both services; each finishes its in-flight requests first.
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        service_kit::http::shutdown_signal().await;
        let _ = stop_tx.send(true);
    });
    let stopped = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
    };
    let (a, i) = tokio::join!(
        auth.run_until(stopped(stop_rx.clone())),
        intake.run_until(stopped(stop_rx))
    );
    a.and(i)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_example_enquiry_is_valid() {
        let today = chrono::Utc::now().date_naive();
        let parsed =
            intake_api::domain::parse_enquiry(&example_enquiry(), &["brand_a", "brand_b"], today);
        assert!(parsed.is_ok(), "{parsed:?}");
    }

    #[test]
    fn the_banner_carries_ready_to_paste_commands() {
        let demo = json!({"client_id": "id-1", "client_secret": "s3cret"});
        let text = banner(&demo, "http://127.0.0.1:8081", "http://127.0.0.1:8082");
        assert!(text.contains("\"client_id\":\"id-1\""));
        assert!(text.contains("curl -s http://127.0.0.1:8082/partners/external/intake "));
        assert!(text.contains("/partners/external/intake/attach"));
    }
}
