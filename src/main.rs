//! The `portfolio-replica` binary: parse the command line, set up logging,
//! and hand over to the library.

use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;
use portfolio_replica::config::{Cli, Command, LogFormat, ServeArgs};
use portfolio_replica::{ServeConfig, commands, generate};

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command.unwrap_or(Command::Serve(cli.serve)) {
        Command::Serve(args) => match run_server(&args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(err) => {
                eprintln!("error: {err:#}");
                ExitCode::FAILURE
            }
        },
        Command::Check { files } => {
            let ok = commands::check(&files, &mut std::io::stdout(), &mut std::io::stderr());
            if ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Command::HashKey { key, key_prefix } => hash_key(key.as_deref(), &key_prefix),
        Command::Generate { out, scale, seed } => match generate::generate(&out, scale, seed) {
            Ok(files) => {
                for f in files {
                    println!(
                        "{}: workspace {}, {} records, {} bytes, key {}",
                        f.path.display(),
                        f.workspace_id,
                        f.records,
                        f.bytes,
                        f.api_key
                    );
                }
                ExitCode::SUCCESS
            }
            Err(err) => {
                eprintln!(
                    "error: cannot write snapshots into {}: {err}",
                    out.display()
                );
                ExitCode::FAILURE
            }
        },
    }
}

/// `hash-key`: exit 2 for a key that could never authenticate, 1 when
/// stdin cannot be read.
fn hash_key(key: Option<&str>, prefix: &str) -> ExitCode {
    let key = match key {
        Some(key) if key != "-" => key.to_owned(),
        _ => {
            let stdin = std::io::stdin();
            let terminal = std::io::IsTerminal::is_terminal(&stdin);
            if terminal {
                eprint!("key (then Enter): ");
            }
            match commands::read_key(stdin.lock(), terminal) {
                Ok(key) => key,
                Err(err) => {
                    eprintln!("error: cannot read the key from stdin: {err}");
                    return ExitCode::FAILURE;
                }
            }
        }
    };
    match commands::hash_key(&key, prefix) {
        Ok(hex) => {
            println!("{hex}");
            ExitCode::SUCCESS
        }
        Err(why) => {
            eprintln!("error: {why}");
            ExitCode::from(2)
        }
    }
}

fn init_tracing(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

fn run_server(args: &ServeArgs) -> anyhow::Result<()> {
    init_tracing(args.log_format);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let api = tokio::net::TcpListener::bind(&args.listen)
            .await
            .with_context(|| format!("cannot listen on {}", args.listen))?;
        let admin = tokio::net::TcpListener::bind(&args.admin_listen)
            .await
            .with_context(|| format!("cannot listen on {} (admin)", args.admin_listen))?;
        tracing::info!(
            listen = %api.local_addr()?,
            admin_listen = %admin.local_addr()?,
            snapshots = %args.snapshots.display(),
            "serving"
        );
        portfolio_replica::serve(ServeConfig::from(args), api, admin, shutdown_signal()).await
    })
}

/// Completes on SIGINT or SIGTERM.
async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => {
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}
