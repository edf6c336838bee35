use clap::Parser;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = auth_server::config::Cli::parse();
    match auth_server::run(cli).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
