//! The `brook` command: `brook serve --config server.properties [--override k=v]...`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use tokio::sync::watch;

use brook::config::BrokerConfig;
use brook::server::Server;

#[derive(Parser)]
#[command(
    name = "brook",
    version,
    about = "A small Kafka-wire-compatible broker"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Runs one broker node.
    Serve {
        /// A Kafka-style server.properties file.
        #[arg(long)]
        config: Option<PathBuf>,
        /// Overrides one property (repeatable), as kafka-server-start's --override.
        #[arg(long = "override", value_name = "KEY=VALUE")]
        overrides: Vec<String>,
    },
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("BROOK_LOG")
                .unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    match cli.command {
        Command::Serve { config, overrides } => serve(config, overrides),
    }
}

fn serve(config: Option<PathBuf>, overrides: Vec<String>) -> ExitCode {
    let config = match BrokerConfig::load(config.as_deref(), &overrides) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("brook: configuration error: {e}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("brook: cannot start runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async move {
        let node_id = config.node_id;
        let server = match Server::start(config).await {
            Ok(s) => s,
            Err(e) => {
                eprintln!("brook: {e}");
                return ExitCode::FAILURE;
            }
        };
        // The one line tests and scripts wait for: an event, so nobody has to sleep.
        println!("READY node.id={node_id} listener={}", server.local_addr);
        let (tx, rx) = watch::channel(false);
        tokio::spawn(async move {
            wait_for_signal().await;
            tracing::info!("signal received");
            let _ = tx.send(true);
        });
        match server.run(rx).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("brook: {e}");
                ExitCode::FAILURE
            }
        }
    })
}

async fn wait_for_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
