//! The committed OpenAPI documents are exactly what the services serve.
//!
//! `UPDATE_OPENAPI=1 cargo test --test openapi` rewrites them from the running services.

use std::path::PathBuf;

use serde_json::Value;
use test_support::{AuthServer, Backend, IntakeServer, TestDb};

fn committed_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("openapi")
        .join(name)
}

async fn served(base: &str) -> Value {
    reqwest::get(format!("{base}/openapi.json"))
        .await
        .expect("openapi.json")
        .json()
        .await
        .expect("openapi.json is JSON")
}

/// The document as block YAML that every loader reads alike: each string double-quoted (as
/// JSON writes it, which YAML reads the same), so no YAML 1.1 loader takes `no`, `on` or a
/// date for a boolean or a timestamp; numbers, booleans and null as JSON writes them.
fn yaml(doc: &Value) -> String {
    let mut out = String::new();
    match doc {
        Value::Object(map) if !map.is_empty() => write_map(&mut out, map, 0, false),
        other => out.push_str(&leaf(other)),
    }
    out
}

fn leaf(value: &Value) -> String {
    match value {
        Value::Array(items) if items.is_empty() => "[]".into(),
        Value::Object(map) if map.is_empty() => "{}".into(),
        other => other.to_string(),
    }
}

fn is_leaf(value: &Value) -> bool {
    match value {
        Value::Array(items) => items.is_empty(),
        Value::Object(map) => map.is_empty(),
        _ => true,
    }
}

/// A mapping key, plain when no loader could read it as anything but that string.
fn key(name: &str) -> String {
    let plain = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        && !YAML_1_1_WORDS.contains(&name.to_ascii_lowercase().as_str());
    if plain {
        name.to_owned()
    } else {
        Value::from(name).to_string()
    }
}

/// Plain scalars a YAML 1.1 loader reads as booleans or null.
const YAML_1_1_WORDS: [&str; 10] = [
    "y", "n", "yes", "no", "on", "off", "true", "false", "null", "~",
];

fn write_map(
    out: &mut String,
    map: &serde_json::Map<String, Value>,
    indent: usize,
    inline_first: bool,
) {
    for (i, (name, value)) in map.iter().enumerate() {
        if i > 0 || !inline_first {
            out.push_str(&" ".repeat(indent));
        }
        out.push_str(&key(name));
        out.push(':');
        match value {
            v if is_leaf(v) => {
                out.push(' ');
                out.push_str(&leaf(v));
                out.push('\n');
            }
            Value::Array(items) => {
                out.push('\n');
                write_seq(out, items, indent);
            }
            Value::Object(inner) => {
                out.push('\n');
                write_map(out, inner, indent + 2, false);
            }
            _ => unreachable!("leaves are handled above"),
        }
    }
}

fn write_seq(out: &mut String, items: &[Value], indent: usize) {
    for item in items {
        out.push_str(&" ".repeat(indent));
        out.push('-');
        match item {
            v if is_leaf(v) => {
                out.push(' ');
                out.push_str(&leaf(v));
                out.push('\n');
            }
            Value::Object(map) => {
                out.push(' ');
                write_map(out, map, indent + 2, true);
            }
            Value::Array(inner) => {
                out.push('\n');
                write_seq(out, inner, indent + 2);
            }
            _ => unreachable!("leaves are handled above"),
        }
    }
}

/// The plain (unquoted) scalars of `text` that a YAML 1.1 loader would read differently from
/// a YAML 1.2 one: a 1.1 float needs a `.`, and words such as `no` are booleans in 1.1.
fn read_differently_under_yaml_1_1(text: &str) -> Vec<String> {
    text.lines()
        .filter(|line| {
            plain_value(line).is_some_and(|value| {
                let number = value.parse::<i64>().is_ok()
                    || (value.contains('.') && value.parse::<f64>().is_ok());
                !number && !matches!(value, "[]" | "{}" | "true" | "false" | "null")
            })
        })
        .map(str::to_owned)
        .collect()
}

/// The plain scalar a line of block YAML holds as a value or a list item, if any.
fn plain_value(line: &str) -> Option<&str> {
    let mut body = line.trim_start();
    if let Some(item) = body.strip_prefix("- ") {
        body = item;
    }
    let rest = if body.starts_with('"') {
        // A quoted key or a quoted item: JSON reads where it ends.
        let mut stream = serde_json::Deserializer::from_str(body).into_iter::<Value>();
        stream.next()?.ok()?;
        &body[stream.byte_offset()..]
    } else {
        match body.find(':') {
            Some(at) => &body[at..],
            None => return Some(body),
        }
    };
    let value = rest.strip_prefix(':')?.trim_start();
    (!value.is_empty() && !value.starts_with('"')).then_some(value)
}

#[test]
fn a_plain_scalar_that_yaml_1_1_reads_otherwise_is_caught() {
    let doc = serde_json::json!({"enum": ["no", "on", "2026-01-01"], "n": 1, "x": 0.5, "y": 1e16});
    let text = yaml(&doc);
    assert_eq!(serde_yaml::from_str::<Value>(&text).ok(), Some(doc));
    // Written by `yaml`, only the exponent without a `.` is read otherwise by YAML 1.1.
    assert_eq!(read_differently_under_yaml_1_1(&text), ["\"y\": 1e+16"]);
    assert_eq!(
        read_differently_under_yaml_1_1("a: no\nb: 2026-01-01\n- on\nc: \"no\"\nd: 3\n"),
        ["a: no", "b: 2026-01-01", "- on"]
    );
}

fn check(name: &str, served: &Value) {
    let path = committed_path(name);
    let written = yaml(served);
    if std::env::var_os("UPDATE_OPENAPI").is_some() {
        std::fs::write(&path, &written).expect("write");
        return;
    }
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{} missing ({e}); run UPDATE_OPENAPI=1 cargo test --test openapi",
            path.display()
        )
    });
    assert_eq!(
        read_differently_under_yaml_1_1(&text),
        Vec::<String>::new(),
        "{} has plain scalars a YAML 1.1 loader reads otherwise",
        path.display()
    );
    let committed: Value = serde_yaml::from_str(&text).expect("committed YAML parses");
    assert!(
        text == written,
        "{} is not written as the tests write it; run UPDATE_OPENAPI=1 cargo test --test openapi",
        path.display()
    );
    assert!(
        committed == *served,
        "{} differs from what the service serves; run UPDATE_OPENAPI=1 cargo test --test openapi and review the diff",
        path.display()
    );
}

/// Both services on fresh SQLite databases, kept alive together.
struct Stack {
    auth: AuthServer,
    intake: IntakeServer,
    _dbs: (TestDb, TestDb),
}

impl Stack {
    async fn start() -> Self {
        let auth_db = TestDb::auth(Backend::Sqlite).await;
        let intake_db = TestDb::intake(Backend::Sqlite).await;
        let auth = AuthServer::start(&auth_db.url, |_| {})
            .await
            .expect("auth-server");
        let intake = IntakeServer::start(&intake_db.url, &auth, |_| {})
            .await
            .expect("intake-api");
        Self {
            auth,
            intake,
            _dbs: (auth_db, intake_db),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_committed_openapi_documents_match_the_served_ones() {
    let stack = Stack::start().await;
    let (auth, intake) = (&stack.auth, &stack.intake);
    let auth_doc = served(&auth.base_url()).await;
    let intake_doc = served(&intake.base_url()).await;
    for (doc, path, op) in [
        (&auth_doc, "/oauth/token", "post"),
        (&auth_doc, "/.well-known/jwks.json", "get"),
        (&intake_doc, "/partners/external/intake", "post"),
        (&intake_doc, "/partners/external/intake/attach", "post"),
    ] {
        assert!(
            doc["paths"][path][op].is_object(),
            "{path} missing from the document"
        );
    }
    check("auth-server.yaml", &auth_doc);
    check("intake-api.yaml", &intake_doc);
}

/// A method a path does not have answers 405 with `Allow` naming the ones it has (RFC 9110
/// 15.5.6), on both services, for the documented paths and the operational ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_method_not_allowed_names_the_allowed_ones() {
    let stack = Stack::start().await;
    let (auth, intake) = (&stack.auth, &stack.intake);
    let http = reqwest::Client::new();
    for (base, method, path, allow) in [
        (auth.base_url(), "DELETE", "/oauth/token", "POST"),
        (
            auth.base_url(),
            "POST",
            "/.well-known/jwks.json",
            "GET, HEAD",
        ),
        (
            intake.base_url(),
            "TRACE",
            "/partners/external/intake",
            "POST",
        ),
        (
            intake.base_url(),
            "GET",
            "/partners/external/intake/attach",
            "POST",
        ),
        (
            intake.base_url(),
            "PUT",
            "/partners/external/cases/418290357116",
            "GET, HEAD",
        ),
        (intake.base_url(), "POST", "/healthz", "GET, HEAD"),
    ] {
        let method = reqwest::Method::from_bytes(method.as_bytes()).expect("method");
        let reply = http
            .request(method.clone(), format!("{base}{path}"))
            .send()
            .await
            .expect("request");
        assert_eq!(reply.status(), 405, "{method} {path}");
        assert_eq!(
            reply.headers().get("allow").and_then(|v| v.to_str().ok()),
            Some(allow),
            "{method} {path}"
        );
    }
    // HEAD is listed wherever GET is, so it must answer there.
    for url in [
        format!("{}/.well-known/jwks.json", auth.base_url()),
        format!("{}/healthz", intake.base_url()),
    ] {
        let reply = http.head(&url).send().await.expect("request");
        assert_eq!(reply.status(), 200, "HEAD {url}");
    }
}
