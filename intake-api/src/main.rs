// mimalloc: its thread-local free lists keep the many small per-request allocations cheap.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = intake_api::cli::Cli::parse();
    match intake_api::run(cli).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::from(service_kit::command_line::operator::exit_code(&e))
        }
    }
}
