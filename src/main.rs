//! The `portfolio-replica` binary: the command line's front door. It
//! dispatches every subcommand and prints its result; reads the
//! `--trust-key` and `--sign-key` files before anything is written, so a
//! bad key stops a command first; checks the usage clap cannot (listeners
//! that collide, `generate --workspaces` only with the fleet scales); and
//! exits 0, 1, or 2 for a usage error or a key that could never
//! authenticate. For `serve` it fixes glibc's mmap threshold, sets up
//! tracing, builds the runtime and binds both listeners (a hint with each
//! failure), runs until SIGINT or SIGTERM, removes the private directories
//! and logs `stopped`. The server itself is the library's (`serve`).

use std::process::ExitCode;

use portfolio_generate as generate;
use portfolio_replica::ServeConfig;
use portfolio_replica::config::{Cli, Command, LogFormat, ServeArgs, SignArgs, usage_error};
use portfolio_replica::tools::sign::{self, Signer};
use portfolio_replica::tools::{commands, publish};

fn main() -> ExitCode {
    let cli = Cli::parse_with_tips();
    let command = cli.command.unwrap_or(Command::Serve(cli.serve));
    if let Command::Serve(args) = &command
        && let Some(conflict) = args.listeners_conflict()
    {
        usage_error(None, conflict).exit();
    }
    // Every tool reports on the process's own streams.
    let (out, err) = (&mut std::io::stdout(), &mut std::io::stderr());
    match command {
        Command::Serve(args) => serve(&args),
        Command::Check { files, trust_keys } => {
            use portfolio_replica::tools::check;
            let trust = match trust_keys.is_empty() {
                true => None,
                false => match portfolio_replica::storage::Trust::from_files(&trust_keys, None) {
                    Ok(trust) => Some(trust),
                    Err(e) => {
                        eprintln!("error: {e}");
                        return ExitCode::FAILURE;
                    }
                },
            };
            let checked = check::check_with(&files, trust.is_some(), out, err);
            let signed = match (&checked, &trust) {
                (Some(checked), Some(trust)) => check::signatures(checked, trust, out, err),
                _ => true,
            };
            exit(checked.is_some() && signed)
        }
        Command::HashKey { key, key_prefix } => hash_key(key.as_deref(), &key_prefix),
        Command::Probe { url, timeout } => match commands::probe(&url, timeout) {
            Ok(status) => {
                println!("ok: {url} answered {status}");
                ExitCode::SUCCESS
            }
            Err(why) => {
                eprintln!("error: {why}");
                ExitCode::FAILURE
            }
        },
        Command::Publish {
            files,
            to,
            keep,
            dry_run,
            refresh_signatures,
            workspaces,
            signing,
            storage,
        } => {
            // Read before anything is uploaded: a bad key stops it all.
            with_signer(&signing, |signer| match (refresh_signatures, &signer) {
                (true, Some(signer)) => exit(publish::refresh_signatures(
                    &to,
                    &workspaces,
                    signer,
                    &storage.options(None),
                    out,
                    err,
                )),
                _ => {
                    let how = publish::Publishing {
                        keep: keep as usize,
                        dry_run,
                        signer: signer.as_ref(),
                    };
                    exit(publish::publish(
                        &files,
                        &to,
                        &how,
                        &storage.options(None),
                        out,
                        err,
                    ))
                }
            })
        }
        Command::Diff {
            old,
            new,
            json,
            to: None,
            storage: _,
        } => exit(portfolio_replica::tools::diff::files(
            &old, &new, json, out, err,
        )),
        Command::Diff {
            old,
            new,
            json,
            to: Some(to),
            storage,
        } => exit(publish::diff_versions(
            &to,
            [&old, &new],
            json,
            &storage.options(None),
            out,
            err,
        )),
        Command::Rollback {
            workspace,
            to,
            version,
            signing,
            storage,
        } => with_signer(&signing, |signer| {
            exit(publish::rollback(
                &workspace,
                &to,
                version.as_deref(),
                signer.as_ref(),
                &storage.options(None),
                out,
                err,
            ))
        }),
        Command::Keygen { out } => match sign::keygen(&out) {
            Ok(files) => {
                println!("key id {}", files.id);
                println!(
                    "secret key: {} (keep it secret: give it to publish --sign-key)",
                    files.secret.display()
                );
                println!(
                    "public key: {} (give it to the replicas)",
                    files.public.display()
                );
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::FAILURE
            }
        },
        Command::Sign { files, signing } => with_signer(&signing, |signer| match signer {
            Some(signer) => exit(sign::sign(&files, &signer, out, err)),
            None => unreachable!("clap requires --sign-key for sign"),
        }),
        Command::Versions {
            to,
            json,
            workspaces,
            replicas,
            storage,
        } => exit(publish::versions(
            &to,
            json,
            &workspaces,
            &replicas,
            &storage.options(None),
            out,
            err,
        )),
        Command::Migrate { to, storage } => {
            exit(publish::migrate(&to, &storage.options(None), out, err))
        }
        Command::Generate {
            out,
            scale,
            seed,
            workspaces,
            text,
        } => {
            if workspaces.is_some() && !scale.is_fleet() {
                // A usage error (exit 2) of `generate`, like the ones clap
                // reports itself: clap cannot say "only with these values".
                usage_error(
                    Some("generate"),
                    format!(
                        "--workspaces needs --scale micro, tiny or midsize, not --scale {}: the \
                         other scales have fixed workspaces",
                        clap::ValueEnum::to_possible_value(&scale)
                            .map_or_else(String::new, |v| v.get_name().to_owned())
                    ),
                )
                .exit();
            }
            let options = generate::Options {
                scale,
                seed,
                workspaces,
                text,
            };
            match generate::generate_with(&out, &options) {
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

/// Runs `command` with the signer `--sign-key` names, if any; exit 1 once
/// the reason is said if it cannot be read.
fn with_signer(args: &SignArgs, command: impl FnOnce(Option<Signer>) -> ExitCode) -> ExitCode {
    let Some(path) = &args.sign_key else {
        return command(None);
    };
    match Signer::load(path, args.sign_valid_for, &mut std::io::stderr()) {
        Ok(signer) => command(Some(signer)),
        Err(e) => {
            eprintln!("error: {e}; nothing was signed or written");
            ExitCode::FAILURE
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

/// Runs the server. From here on everything goes through tracing, so that
/// with `--log-format json` a fatal error is one JSON line too, and the last
/// line says the process stopped and with what exit status.
fn serve(args: &ServeArgs) -> ExitCode {
    portfolio_os::fix_mmap_threshold();
    init_tracing(args.log_format);
    let (code, exit_code) = match run_server(args) {
        Ok(()) => (ExitCode::SUCCESS, 0),
        Err(err) => {
            tracing::error!(error = %format_args!("{err:#}"), "cannot serve");
            (ExitCode::FAILURE, 1)
        }
    };
    tracing::info!(exit_code, "stopped");
    code
}

fn run_server(args: &ServeArgs) -> anyhow::Result<()> {
    let mut config = ServeConfig::from(args);
    if !args.trust_keys.is_empty() {
        // A key file that is not one stops the start: a replica that
        // meant to verify must not serve unverified.
        let trust = portfolio_replica::storage::Trust::from_files(
            &args.trust_keys,
            args.cache_dir.as_deref(),
        )?;
        config.storage.trust = std::sync::Arc::new(trust);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let api = bind(&args.listen, "the API", "--listen", "PORTFOLIO_LISTEN").await?;
        let admin = bind(
            &args.admin_listen,
            "the admin endpoints",
            "--admin-listen",
            "PORTFOLIO_ADMIN_LISTEN",
        )
        .await?;
        let served = portfolio_replica::serve(config, api, admin, shutdown_signal()).await;
        // The process ends here: its private copies and downloads go with
        // it, even where their owners are still held by a thread that
        // outlives the server (a library user running several servers in
        // one process relies on each owner's own cleanup instead).
        portfolio_replica::storage::scratch_remove_all();
        served
    })
}

/// Binds one listener; a failure says which one, and what to do about it.
async fn bind(
    addr: &str,
    what: &str,
    flag: &str,
    env: &str,
) -> anyhow::Result<tokio::net::TcpListener> {
    use std::io::ErrorKind;
    tokio::net::TcpListener::bind(addr).await.map_err(|err| {
        let hint = match err.kind() {
            ErrorKind::AddrInUse => format!(
                "another process is listening there: stop it, or choose another address with {flag} ({env})"
            ),
            ErrorKind::PermissionDenied => format!(
                "ports below 1024 need privileges: choose a port of 1024 or more with {flag} ({env})"
            ),
            ErrorKind::AddrNotAvailable => format!(
                "no interface of this machine has that address: use 127.0.0.1 (this machine only) \
                 or 0.0.0.0 (every interface) with {flag} ({env})"
            ),
            _ => format!("check the address given with {flag} ({env})"),
        };
        anyhow::anyhow!("cannot listen on {addr} for {what} ({flag}): {err}; {hint}")
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
