//! Gets a DPoP-bound token and prints it, then COUNT proofs for `POST` on URL made with its
//! key, one per line: a load generator's requests, made ahead (bench/run.sh section 7c).
//!
//! ```sh
//! PARTNER_CLIENT_ID=... PARTNER_CLIENT_SECRET=... \
//! PARTNER_TOKEN_URL=http://127.0.0.1:8081/oauth/token \
//!   cargo run -p partner-client --example dpop_proofs -- \
//!   http://127.0.0.1:8082/partners/external/intake 1000 > proofs.txt
//! ```

use std::io::Write;

use partner_client::{AuthMethod, Credentials, DEFAULT_RENEW_BEFORE, DpopKey, TokenSource};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let var = |name: &str| std::env::var(name).map_err(|_| format!("{name} is not set"));
    let mut args = std::env::args().skip(1);
    let usage = "usage: dpop_proofs URL COUNT";
    let url = args.next().ok_or(usage)?;
    let count: usize = args.next().ok_or(usage)?.parse()?;
    let key = DpopKey::generate()?;
    let tokens = TokenSource::new(
        reqwest::Client::new(),
        var("PARTNER_TOKEN_URL")?.parse()?,
        Credentials::new(var("PARTNER_CLIENT_ID")?, var("PARTNER_CLIENT_SECRET")?),
        AuthMethod::Post,
        partner_client::INTAKE_SCOPE.to_owned(),
        DEFAULT_RENEW_BEFORE,
    )
    .with_dpop(key.clone());
    let token = tokens.current().await?;
    let token = token
        .bound_token()
        .ok_or("the token endpoint gave no DPoP-bound token")?;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    writeln!(out, "{token}")?;
    for _ in 0..count {
        writeln!(out, "{}", key.proof("POST", &url, Some(token))?)?;
    }
    out.flush()?;
    Ok(())
}
