use clap::Parser;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = intake_api::config::Cli::parse();
    match intake_api::run(cli).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
