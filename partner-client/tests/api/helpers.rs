//! The real auth-server and intake-api started in-process on fresh databases, a partner
//! registered with them, and a relay in front of the token endpoint that counts token
//! requests (and, when a test asks, shortens the lifetime it reports or answers slowly).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use partner_client::{
    Address, ApplicationType, Client, ClientBuilder, Credentials, CreditIssue, EmploymentStatus,
    Enquiry, MortgageScheme, Purchase, PurchaseType, Purpose, Stage,
};
use poem::web::Data;
use poem::{EndpointExt, Request, Response, Route, handler, post};
use serde_json::Value;
pub use test_support::{AuthServer, Backend, IntakeServer, Running, TestDb, eventually, kid_of};

/// The scope partners' calls need.
pub const INTAKE: &str = "enquiry:case:intake:create";
/// The scope of referrals, which does not open the enquiry endpoints.
pub const REFERRAL: &str = "enquiry:referral:create";

/// How the relay in front of the token endpoint behaves.
#[derive(Clone, Copy, Default)]
pub struct RelaySettings {
    /// The `expires_in` it reports instead of the real one: a short token lifetime as the
    /// client sees it (the auth-server's is fixed at 900 s).
    pub expires_in: Option<i64>,
    /// How long it holds each request before forwarding it: a slow token endpoint, so that
    /// concurrent calls surely overlap one token request.
    pub delay: Duration,
}

/// Both services on fresh databases, a partner with the intake and referral scopes, and the
/// token relay the partner's client is pointed at.
pub struct Stack {
    /// The auth-server.
    pub auth: AuthServer,
    /// The intake-api.
    pub intake: IntakeServer,
    /// The relay in front of the auth-server's token endpoint.
    pub relay: TokenRelay,
    /// The partner's client id.
    pub client_id: String,
    /// The partner's client secret.
    pub client_secret: String,
    _auth_db: TestDb,
    _intake_db: TestDb,
}

impl Stack {
    /// Starts everything with default settings.
    pub async fn start(backend: Backend) -> Self {
        Self::start_with(backend, RelaySettings::default(), |_| {}).await
    }

    /// Starts everything with the relay's `settings` and `configure` applied to the
    /// intake-api's configuration.
    pub async fn start_with(
        backend: Backend,
        settings: RelaySettings,
        configure: impl FnOnce(&mut intake_api::config::Config),
    ) -> Self {
        let auth_db = TestDb::auth(backend).await;
        let auth = AuthServer::start(&auth_db.url, |_| {})
            .await
            .expect("auth-server starts");
        let intake_db = TestDb::intake(backend).await;
        let intake = IntakeServer::start(&intake_db.url, &auth, configure)
            .await
            .expect("intake-api starts");
        assert!(intake.wait_ready().await, "intake-api never became ready");
        let (client_id, client_secret) = auth.create_client(&format!("{INTAKE} {REFERRAL}")).await;
        let relay = TokenRelay::start(format!("{}/oauth/token", auth.base_url()), settings).await;
        Self {
            auth,
            intake,
            relay,
            client_id,
            client_secret,
            _auth_db: auth_db,
            _intake_db: intake_db,
        }
    }

    /// Settings for the partner's client, getting its tokens through the relay.
    pub fn builder(&self) -> ClientBuilder {
        self.builder_with_secret(&self.client_secret)
    }

    /// [`Stack::builder`] with another secret.
    pub fn builder_with_secret(&self, secret: &str) -> ClientBuilder {
        Client::builder(
            Credentials::new(&self.client_id, secret),
            self.relay.url.clone(),
            self.intake.base_url(),
        )
    }

    /// The partner's client, with default settings.
    pub fn client(&self) -> Client {
        self.builder().build().expect("the client builds")
    }

    /// A token of the partner's got straight from the auth-server, past the relay.
    pub async fn direct_token(&self) -> String {
        self.auth
            .token(&self.client_id, &self.client_secret, INTAKE)
            .await
    }

    /// The status the intake-api answers an enquiry sent with `token`.
    pub async fn status_with_token(&self, token: &str) -> u16 {
        reqwest::Client::new()
            .post(format!(
                "{}/partners/external/intake",
                self.intake.base_url()
            ))
            .bearer_auth(token)
            .json(&purchase("brand_a", &fresh_email()))
            .send()
            .await
            .expect("the intake-api answers")
            .status()
            .as_u16()
    }

    /// `auth_tokens_issued_total` for the partner, from the auth-server's `/metrics`.
    pub async fn tokens_issued(&self) -> f64 {
        let text = reqwest::get(format!("{}/metrics", self.auth.base_url()))
            .await
            .expect("metrics")
            .text()
            .await
            .expect("metrics text");
        let label = format!("client_id=\"{}\"", self.client_id);
        text.lines()
            .filter(|l| l.starts_with("auth_tokens_issued_total{") && l.contains(&label))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    }
}

/// One token request as the relay saw it.
#[derive(Debug, Clone)]
pub struct Seen {
    /// When it arrived.
    pub at: Instant,
    /// Whether it carried an `Authorization: Basic` header.
    pub basic: bool,
    /// Whether its body held a `client_secret`.
    pub secret_in_body: bool,
    /// The access token it was answered with, if one.
    pub token: Option<String>,
}

/// A token endpoint in front of the auth-server's, counting what passes.
pub struct TokenRelay {
    /// Its token URL.
    pub url: String,
    state: Arc<RelayState>,
    _server: Running,
}

struct RelayState {
    upstream: String,
    settings: RelaySettings,
    http: reqwest::Client,
    arrived: AtomicUsize,
    seen: Mutex<Vec<Seen>>,
}

impl TokenRelay {
    async fn start(upstream: String, settings: RelaySettings) -> Self {
        let state = Arc::new(RelayState {
            upstream,
            settings,
            // The auth-server closes connections idle for 5 s, the time this relay's tests
            // wait between tokens: a pooled one could be closed under the next.
            http: reqwest::Client::builder()
                .pool_idle_timeout(Duration::from_secs(4))
                .build()
                .expect("an HTTP client"),
            arrived: AtomicUsize::new(0),
            seen: Mutex::default(),
        });
        let app = Route::new()
            .at("/oauth/token", post(relay_token))
            .data(state.clone());
        let server = Running::serve_locally(app).await;
        let port = server.port;
        Self {
            url: format!("http://127.0.0.1:{port}/oauth/token"),
            state,
            _server: server,
        }
    }

    /// Token requests received so far, answered or not.
    pub fn requests(&self) -> usize {
        self.state.arrived.load(Ordering::SeqCst)
    }

    /// The token requests answered so far, in the order they arrived.
    pub fn seen(&self) -> Vec<Seen> {
        self.state.seen.lock().expect("relay log").clone()
    }
}

#[handler]
async fn relay_token(req: &Request, body: Vec<u8>, state: Data<&Arc<RelayState>>) -> Response {
    let at = Instant::now();
    state.arrived.fetch_add(1, Ordering::SeqCst);
    let header = |name: &str| req.headers().get(name).and_then(|v| v.to_str().ok());
    let basic = header("authorization").is_some_and(|h| h.starts_with("Basic "));
    let sent: Value = serde_json::from_slice(&body).unwrap_or_default();
    let secret_in_body = sent.get("client_secret").is_some();
    if !state.settings.delay.is_zero() {
        tokio::time::sleep(state.settings.delay).await;
    }
    let mut forward = state.http.post(&state.upstream).body(body);
    for name in ["content-type", "authorization"] {
        if let Some(value) = header(name) {
            forward = forward.header(name, value);
        }
    }
    let answer = forward.send().await.expect("the auth-server answers");
    let status = answer.status().as_u16();
    let retry_after = answer
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let mut json: Value = answer.json().await.expect("a JSON answer");
    if status == 200
        && let Some(expires_in) = state.settings.expires_in
    {
        json["expires_in"] = expires_in.into();
    }
    let token = json["access_token"].as_str().map(str::to_owned);
    state.seen.lock().expect("relay log").push(Seen {
        at,
        basic,
        secret_in_body,
        token,
    });
    let mut response = Response::builder()
        .status(poem::http::StatusCode::from_u16(status).expect("a status"))
        .content_type("application/json");
    if let Some(value) = retry_after {
        response = response.header("retry-after", value);
    }
    response.body(json.to_string())
}

/// A fresh e-mail address, so tests never share a case by accident.
pub fn fresh_email() -> String {
    format!("applicant-{}@example.com", uuid::Uuid::new_v4().simple())
}

/// A product identifier as the eligibility engine hands them out.
pub fn product() -> uuid::Uuid {
    uuid::Uuid::new_v4()
}

/// A complete purchase enquiry by a first-time buyer, with credit issues and an address.
pub fn purchase(brand: &str, email: &str) -> Enquiry {
    let date = |s: &str| s.parse().expect("a date");
    Enquiry {
        brand: brand.to_owned(),
        first_name: "Jane".into(),
        last_name: "Doe".into(),
        email: email.to_owned(),
        mobile_number: "+44 7700 900123".into(),
        date_of_birth: date("1990-05-17"),
        terms_agreement: true,
        stage: Stage::OfferAccepted,
        application_type: ApplicationType::Single,
        employment_status: EmploymentStatus::Employed,
        total_annual_income: 52_000.5,
        purpose: Purpose::Purchase(Purchase {
            purchase_type: PurchaseType::FirstTimeBuyer,
            mortgage_scheme: Some(MortgageScheme::No),
            new_property_value: 250_000.0,
            deposit_amount: 25_000.0,
        }),
        has_credit_issues: true,
        credit_issues: Some(vec![CreditIssue::Ccj, CreditIssue::Default]),
        product_uuid: None,
        credit_check_consent: Some(true),
        addresses: Some(vec![Address {
            line_1: "1 High Street".into(),
            line_2: None,
            line_3: None,
            town_city: Some("Leeds".into()),
            county: None,
            country: Some("United Kingdom".into()),
            postcode: "LS1 1AA".into(),
            date_moved_in: Some(date("2015-01-01")),
            date_moved_out: None,
        }]),
    }
}

/// Waits until `deadline` has passed: for a test whose condition is a moment in time.
pub async fn until(deadline: Instant) {
    tokio::time::sleep_until(deadline.into()).await;
}
