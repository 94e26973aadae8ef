//! The `portfolio-replica` binary: parse the command line, set up logging,
//! and hand over to the library.

use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;
use portfolio_replica::config::{self, Cli, Command, LogFormat, ServeArgs};
use portfolio_replica::store::key;
use portfolio_replica::{ServeConfig, commands, generate, publish};

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
        Command::HashKey { key } => {
            println!("{}", key::to_hex(&key::hash_key(&key)));
            ExitCode::SUCCESS
        }
        Command::Publish {
            files,
            to,
            keep,
            storage,
        } => exit(publish::publish(
            &files,
            &to,
            keep as usize,
            &storage.options(None),
            &mut std::io::stdout(),
            &mut std::io::stderr(),
        )),
        Command::Rollback {
            workspace,
            to,
            version,
            storage,
        } => exit(publish::rollback(
            &workspace,
            &to,
            version.as_deref(),
            &storage.options(None),
            &mut std::io::stdout(),
            &mut std::io::stderr(),
        )),
        Command::Versions {
            to,
            json,
            replicas,
            storage,
        } => exit(publish::versions(
            &to,
            json,
            &replicas,
            &storage.options(None),
            &mut std::io::stdout(),
            &mut std::io::stderr(),
        )),
        Command::Generate { out, scale, seed } => {
            match generate::generate(&out, generator_scale(scale), seed) {
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
            }
        }
    }
}

/// Exit 0 when the command did what it was asked, 1 otherwise.
fn exit(ok: bool) -> ExitCode {
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// The generator's scale for the one the command line parsed.
fn generator_scale(scale: config::Scale) -> generate::Scale {
    match scale {
        config::Scale::Small => generate::Scale::Small,
        config::Scale::Medium => generate::Scale::Medium,
        config::Scale::Large => generate::Scale::Large,
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
