//! Submits one enquiry, attaches a product to its case, prints the customer's link, and reads
//! the case back.
//!
//! ```sh
//! PARTNER_CLIENT_ID=... PARTNER_CLIENT_SECRET=... \
//! PARTNER_TOKEN_URL=http://127.0.0.1:8081/oauth/token PARTNER_INTAKE_URL=http://127.0.0.1:8082 \
//!   cargo run -p partner-client --example submit
//! ```
//!
//! A client registered with its public keys (`private_key_jwt`) names its private key
//! instead of a secret: `PARTNER_KEY_FILE=partner-key.pem` (PKCS#8 PEM),
//! `PARTNER_KEY_ALG=ES256` (or RS256, PS256, EdDSA; ES256 by default) and, when its JWKS
//! names the key, `PARTNER_KEY_ID`.

use partner_client::uuid::Uuid;
use partner_client::{
    Address, ApplicationType, AssertionAlgorithm, AssertionKey, AttachRequest, Client, Credentials,
    EmploymentStatus, Enquiry, Error, IdempotencyKey, MortgageScheme, Purchase, PurchaseType,
    Purpose, Stage,
};

/// An environment variable, or `default` when there is one.
fn setting(name: &str, default: Option<&str>) -> Result<String, String> {
    match (std::env::var(name), default) {
        (Ok(value), _) => Ok(value),
        (Err(_), Some(default)) => Ok(default.to_owned()),
        (Err(_), None) => Err(format!("{name} is not set")),
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let client_id = setting("PARTNER_CLIENT_ID", None)?;
    let credentials = match std::env::var("PARTNER_KEY_FILE") {
        Ok(file) => {
            let algorithm: AssertionAlgorithm = setting("PARTNER_KEY_ALG", Some("ES256"))?
                .parse()
                .map_err(|e| format!("PARTNER_KEY_ALG: {e}"))?;
            let mut key = AssertionKey::from_pem(algorithm, &std::fs::read(&file)?)?;
            if let Ok(kid) = std::env::var("PARTNER_KEY_ID") {
                key = key.with_kid(kid);
            }
            Credentials::with_key(client_id, key)
        }
        Err(_) => Credentials::new(client_id, setting("PARTNER_CLIENT_SECRET", None)?),
    };
    let token_url = setting(
        "PARTNER_TOKEN_URL",
        Some("http://127.0.0.1:8081/oauth/token"),
    )?;
    let intake_url = setting("PARTNER_INTAKE_URL", Some("http://127.0.0.1:8082"))?;
    let brand = setting("PARTNER_BRAND", Some("brand_a"))?;
    let email = setting("PARTNER_EMAIL", Some("jane.doe@example.com"))?;
    let client = Client::builder(credentials, token_url, intake_url).build()?;

    let enquiry = Enquiry {
        brand,
        first_name: "Jane".into(),
        last_name: "Doe".into(),
        email: email.clone(),
        mobile_number: "+44 7700 900123".into(),
        date_of_birth: "1990-05-17".parse()?,
        terms_agreement: true,
        stage: Stage::OfferAccepted,
        application_type: ApplicationType::Single,
        employment_status: EmploymentStatus::Employed,
        total_annual_income: 52_000.0,
        purpose: Purpose::Purchase(Purchase {
            purchase_type: PurchaseType::FirstTimeBuyer,
            mortgage_scheme: Some(MortgageScheme::SharedOwnership),
            new_property_value: 250_000.0,
            deposit_amount: 25_000.0,
        }),
        has_credit_issues: false,
        credit_issues: None,
        product_uuid: None,
        credit_check_consent: Some(true),
        addresses: Some(vec![Address {
            line_1: "1 High Street".into(),
            line_2: None,
            line_3: None,
            town_city: Some("Leeds".into()),
            county: None,
            country: None,
            postcode: "LS1 1AA".into(),
            date_moved_in: Some("2015-01-01".parse()?),
            date_moved_out: None,
        }]),
    };
    // One key per enquiry, kept with it: a retry after a timeout sends the same key.
    let key = IdempotencyKey::random();
    let case = match client.submit(&enquiry, Some(&key)).await {
        Ok(case) => case,
        Err(Error::Invalid(body)) => {
            for (field, messages) in &body.errors {
                eprintln!("{field}: {}", messages.join(" "));
            }
            return Err(body.message.into());
        }
        Err(e) => return Err(e.into()),
    };
    let outcome = if case.created() { "created" } else { "updated" };
    println!("case {} {outcome}", case.body.reference);

    let product = "67e55044-10b1-426f-9247-bb680e5fe0c8".parse::<Uuid>()?;
    let attach = AttachRequest {
        email,
        product_uuid: product,
    };
    match client
        .attach(&attach, Some(&IdempotencyKey::random()))
        .await
    {
        Ok(link) => println!("{}", link.body.redirect),
        Err(Error::CaseNotFound { .. }) => println!("no case: send the customer to the form"),
        Err(Error::Server { .. }) => println!("no link: send the customer to the dashboard"),
        Err(e) => return Err(e.into()),
    }

    let read = client.case(&case.body.reference).await?;
    let activates = read.activates_at.map(|t| t.to_rfc3339());
    let product = read.product_uuid.map(|p| p.to_string());
    println!(
        "case {}: {:?}, active from {}, product {}",
        read.reference,
        read.status,
        activates.as_deref().unwrap_or("(once the enquiry comes)"),
        product.as_deref().unwrap_or("none")
    );
    Ok(())
}
