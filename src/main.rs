//! The whole stack in one process for local use: `cargo run --release`.
//!
//! Both services run as they do in production (the intake-api fetches the auth-server's
//! JWKS over loopback HTTP), on SQLite files under `./data/`, with no Redis. On first start
//! a demo partner client is created and its credentials written to `data/demo-client.json`,
//! and the intake-api's own client, which reads the revocation list, to
//! `data/intake-revocations-client.json`. Under the FAPI 2.0 profile (`AUTH_FAPI2` and
//! `INTAKE_FAPI2` both on) both clients authenticate with keys made beside them instead
//! of secrets, as that profile takes no secret.

use std::io::Write;
use std::path::Path;

use anyhow::Context;
use auth_server::commands::ClientCommand;
use base64::Engine;
use serde_json::{Value, json};
use service_kit::http::Server;

const DEMO_FILE: &str = "data/demo-client.json";
const RESOURCE_CLIENT_FILE: &str = "data/intake-revocations-client.json";
const KEY_ENCRYPTION_KEY_FILE: &str = "data/key-encryption-key";
const INTAKE_KEY_ENCRYPTION_KEY_FILE: &str = "data/intake-key-encryption-key";
const DEMO_SCOPE: &str = "enquiry:case:intake:create";
/// What the demo partner is granted: enquiries, and referrals and the webhook calls to try
/// from the docs page.
const DEMO_GRANTED: &str = "enquiry:case:intake:create enquiry:referral:create webhooks:manage";
const DEMO_EMAIL: &str = "jane.doe@example.com";
/// Under FAPI 2.0: the demo partner's private key (PEM, and as a JWK for the libraries
/// that read one) and the intake-api's client's.
const DEMO_KEY_FILE: &str = "data/demo-client-key.pem";
const DEMO_JWK_FILE: &str = "data/demo-client-key.jwk.json";
const RESOURCE_KEY_FILE: &str = "data/intake-revocations-client-key.pem";

/// A P-256 key the launcher keeps in `pem_file` (made on first use, readable only by its
/// owner): its private JWK, whose public half is what the client is registered with.
fn kept_key(pem_file: &str) -> anyhow::Result<Value> {
    use aws_lc_rs::encoding::AsBigEndian;
    use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};
    let pem = match std::fs::read_to_string(pem_file) {
        Ok(pem) => pem,
        Err(_) => {
            let rng = aws_lc_rs::rand::SystemRandom::new();
            let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
                .map_err(|_| anyhow::anyhow!("no P-256 key could be made"))?;
            let body = base64::engine::general_purpose::STANDARD.encode(pkcs8.as_ref());
            let lines: Vec<String> = body
                .as_bytes()
                .chunks(64)
                .map(|c| String::from_utf8_lossy(c).into_owned())
                .collect();
            let pem = format!(
                "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n",
                lines.join("\n")
            );
            write_private(Path::new(pem_file), pem.as_bytes())?;
            pem
        }
    };
    let der: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
    let der = base64::engine::general_purpose::STANDARD
        .decode(der)
        .with_context(|| format!("{pem_file} is not a PEM file"))?;
    let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &der)
        .map_err(|_| anyhow::anyhow!("{pem_file} is not a P-256 private key"))?;
    let b64 = |bytes: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
    let point = pair.public_key().as_ref();
    let d = pair
        .private_key()
        .as_be_bytes()
        .map_err(|_| anyhow::anyhow!("{pem_file}: the private key cannot be read"))?;
    let (x, y) = (b64(&point[1..33]), b64(&point[33..]));
    // Its RFC 7638 thumbprint names it: libraries put a `kid` in the assertions they sign.
    let members = format!(r#"{{"crv":"P-256","kty":"EC","x":"{x}","y":"{y}"}}"#);
    let kid =
        b64(aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, members.as_bytes()).as_ref());
    Ok(json!({
        "kty": "EC", "crv": "P-256", "alg": "ES256", "kid": kid,
        "x": x, "y": y, "d": b64(d.as_ref()),
    }))
}

/// The public half of a private JWK, as a JWKS file `client create --jwks-file` reads.
fn public_jwks_file(private: &Value, file: &Path) -> anyhow::Result<()> {
    let mut public = private.clone();
    if let Some(members) = public.as_object_mut() {
        members.remove("d");
    }
    write_private(file, json!({"keys": [public]}).to_string().as_bytes())
}

/// A client the launcher keeps in `file`: the one of an earlier start while it still
/// exists and is enabled; otherwise a new one named `name` (numbered after any earlier
/// ones), granted `scopes`, with a secret, or with the public half of `key` (a private
/// JWK) for private_key_jwt.
async fn kept_client(
    config: &auth_server::config::Config,
    file: &str,
    name: &str,
    scopes: &str,
    key: Option<&Value>,
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
    let jwks_file = match key {
        Some(key) => {
            let path = Path::new(file).with_extension("jwks.json");
            public_jwks_file(key, &path)?;
            Some(path)
        }
        None => None,
    };
    let created = auth_server::cli::client(
        config,
        ClientCommand::Create {
            name,
            scopes: scopes.into(),
            brands: None,
            auth_method: match key {
                Some(_) => auth_server::store::AuthMethod::PrivateKeyJwt,
                None => Default::default(),
            },
            jwks_file: jwks_file.clone(),
            jwks_uri: None,
            sandbox: false,
        },
    )
    .await;
    if let Some(path) = jwks_file {
        let _ = std::fs::remove_file(path);
    }
    let created = created?;
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

/// Under FAPI 2.0 every call needs a fresh DPoP proof, which curl cannot make: the banner
/// names the key files for a library to use instead.
fn fapi2_banner(demo: &Value, auth_url: &str, intake_url: &str) -> String {
    format!(
        r#"
Partner Intake is running, FAPI 2.0 profile (private_key_jwt and DPoP only).
  auth-server: {auth_url}   (docs: {auth_url}/docs)
  intake-api:  {intake_url}   (docs: {intake_url}/docs)

Demo partner (saved in {DEMO_FILE}):
  client_id:   {id}
  private key: {DEMO_KEY_FILE} (PEM), {DEMO_JWK_FILE} (JWK), ES256

Every token request and call needs a DPoP proof: use a library (README, "A FAPI 2.0
deployment"), e.g. requests-oauth2client with PrivateKeyJwt and dpop_bound_access_tokens=True.
"#,
        id = demo["client_id"].as_str().unwrap_or_default(),
    )
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
    if auth_config.key_encryption_key.is_none() && auth_config.key_encryption_key_file.is_none() {
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

    anyhow::ensure!(
        auth_config.fapi2 == intake_config.fapi2,
        "AUTH_FAPI2 and INTAKE_FAPI2 differ: the two services run one profile, so set both"
    );
    let fapi2 = auth_config.fapi2;
    let auth = auth_server::startup::Application::build(auth_config.clone()).await?;
    let demo_key = fapi2.then(|| kept_key(DEMO_KEY_FILE)).transpose()?;
    if let Some(key) = &demo_key {
        write_private(Path::new(DEMO_JWK_FILE), &serde_json::to_vec_pretty(key)?)?;
    }
    let demo = kept_client(
        &auth_config,
        DEMO_FILE,
        "Demo partner",
        DEMO_GRANTED,
        demo_key.as_ref(),
    )
    .await?;
    if intake_config.auth_server.client_id.is_none() {
        let own_key = fapi2.then(|| kept_key(RESOURCE_KEY_FILE)).transpose()?;
        let own = kept_client(
            &auth_config,
            RESOURCE_CLIENT_FILE,
            "Intake API revocation reader",
            shared::claims::scopes::REVOCATIONS_READ,
            own_key.as_ref(),
        )
        .await?;
        intake_config.auth_server.client_id = own["client_id"].as_str().map(str::to_owned);
        if fapi2 {
            intake_config.auth_server.client_key_file = Some(RESOURCE_KEY_FILE.into());
            intake_config.auth_server.client_key_alg =
                "ES256".parse().map_err(anyhow::Error::msg)?;
        } else {
            intake_config.auth_server.client_secret =
                Some(own["client_secret"].as_str().unwrap_or_default().parse()?);
        }
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
    if fapi2 {
        println!("{}", fapi2_banner(&demo, &auth_url, &intake_url));
    } else {
        println!("{}", banner(&demo, &auth_url, &intake_url));
    }

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
