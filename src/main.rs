//! Runs the whole stack in one process for local use: `cargo run --release`.

use clap::Parser;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = auth_server::config::Cli::parse_from(["auth-server"]);
    auth_server::run(cli).await
}
