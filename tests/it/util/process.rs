//! The `portfolio-replica` binary run as a child process: `cli` runs one
//! command to its end (`hash-key`, `check`, `generate`, `--help`), and
//! `Binary` is a server on free loopback ports, for what needs a real
//! process (signals, exit codes, logs, CPU time), killed if a test fails.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;

use super::{CHANGE_TIMEOUT, CLI_TIMEOUT, POLL, get_from, tempdir};

// ---------------------------------------------------------------------------
// One command run to its end.
// ---------------------------------------------------------------------------

/// What one run of the binary did.
#[derive(Debug)]
pub struct CliOutput {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `portfolio-replica args...` and waits for it, failing after `CLI_TIMEOUT`.
pub async fn cli<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> CliOutput {
    cli_env(args, &[]).await
}

/// Runs `portfolio-replica publish FILE... --to URL` with `env` added.
pub async fn publish_to<P: AsRef<std::path::Path>>(
    url: &str,
    files: &[P],
    env: &[(&str, String)],
) -> CliOutput {
    let mut args: Vec<std::ffi::OsString> = vec!["publish".into()];
    args.extend(files.iter().map(|f| f.as_ref().as_os_str().to_owned()));
    args.extend(["--to".into(), url.into()]);
    cli_env(&args, env).await
}

/// Runs `portfolio-replica args...` with `env` added to the environment.
pub async fn cli_env<S: AsRef<std::ffi::OsStr>>(args: &[S], env: &[(&str, String)]) -> CliOutput {
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    cli_with(args, None, &env).await
}

/// Runs `portfolio-replica args...` with `stdin` as its input (none: empty)
/// and `env` added to an environment without `PORTFOLIO_*` and `RUST_LOG`,
/// so what the test runner was started with does not leak into the command.
pub async fn cli_with<S: AsRef<std::ffi::OsStr>>(
    args: &[S],
    stdin: Option<&[u8]>,
    env: &[(&str, &str)],
) -> CliOutput {
    let args: Vec<std::ffi::OsString> = args.iter().map(|a| a.as_ref().to_os_string()).collect();
    let stdin = stdin.map(<[u8]>::to_vec);
    let env: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    tokio::task::spawn_blocking(move || run_cli(&args, stdin, &env))
        .await
        .expect("the command-line runner panicked")
}

/// The `portfolio-replica` binary, without the test runner's `PORTFOLIO_*`,
/// `AWS_*` and `RUST_LOG` variables: a test says what it sets.
pub fn binary() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_portfolio-replica"));
    for (k, _) in std::env::vars_os() {
        if k.to_str().is_some_and(|k| {
            k.starts_with("PORTFOLIO_") || k.starts_with("AWS_") || k == "RUST_LOG"
        }) {
            cmd.env_remove(k);
        }
    }
    cmd
}

fn run_cli(
    args: &[std::ffi::OsString],
    stdin: Option<Vec<u8>>,
    env: &[(String, String)],
) -> CliOutput {
    use std::io::{Read, Write};
    let mut child = binary()
        .args(args)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start portfolio-replica");
    if let Some(bytes) = stdin {
        let mut pipe = child.stdin.take().expect("stdin");
        // A thread of its own: a command that does not read all of its
        // input must not block the test on a full pipe.
        std::thread::spawn(move || {
            let _ = pipe.write_all(&bytes);
        });
    }
    let mut out = child.stdout.take().expect("stdout");
    let mut err = child.stderr.take().expect("stderr");
    let out_reader = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = out.read_to_end(&mut s);
        s
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = err.read_to_end(&mut s);
        s
    });
    let deadline = Instant::now() + CLI_TIMEOUT;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for portfolio-replica") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("portfolio-replica {args:?} did not finish within {CLI_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    CliOutput {
        code: status.code(),
        stdout: String::from_utf8_lossy(&out_reader.join().expect("stdout reader")).into_owned(),
        stderr: String::from_utf8_lossy(&err_reader.join().expect("stderr reader")).into_owned(),
    }
}

// ---------------------------------------------------------------------------
// The server as a child process.
// ---------------------------------------------------------------------------

/// Returns a loopback address that was free a moment ago.
pub fn free_port() -> SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind a free port")
        .local_addr()
        .expect("local address")
}

/// The `portfolio-replica` binary serving a directory, killed when dropped.
pub struct Binary {
    child: Child,
    pub api: SocketAddr,
    pub admin: SocketAddr,
    stdout: PathBuf,
    stderr: PathBuf,
    _logs: TempDir,
}

impl Drop for Binary {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

impl Binary {
    /// Starts the binary on free ports serving `snapshots` (a directory or
    /// an object store URL) with `args` and `env`, and waits until
    /// `/readyz` answers 200. `RUST_LOG`, `PORTFOLIO_*` and `AWS_*` of the
    /// test's own environment are not passed on.
    pub async fn start(
        snapshots: impl AsRef<std::ffi::OsStr>,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Binary {
        let dir = snapshots.as_ref();
        for attempt in 1..=3 {
            let logs = tempdir();
            let stdout = logs.path().join("stdout.log");
            let stderr = logs.path().join("stderr.log");
            let (api, admin) = (free_port(), free_port());
            let mut cmd = binary();
            cmd.arg("--snapshots")
                .arg(dir)
                .args(["--listen", &api.to_string()])
                .args(["--admin-listen", &admin.to_string()])
                .args(args)
                .envs(env.iter().copied())
                .stdin(Stdio::null())
                .stdout(std::fs::File::create(&stdout).expect("stdout file"))
                .stderr(std::fs::File::create(&stderr).expect("stderr file"));
            let child = cmd.spawn().expect("start portfolio-replica");
            let mut bin = Binary {
                child,
                api,
                admin,
                stdout,
                stderr,
                _logs: logs,
            };
            let deadline = Instant::now() + CHANGE_TIMEOUT;
            loop {
                if let Some(status) = bin.child.try_wait().expect("poll the child") {
                    let log = bin.stderr_text();
                    if attempt < 3 && log.contains("cannot listen") {
                        break; // another test took the port meanwhile: retry
                    }
                    panic!("portfolio-replica exited with {status}:\n{log}");
                }
                if let Ok(resp) = get_from(api, "/readyz", None).await
                    && resp.status == 200
                {
                    return bin;
                }
                assert!(
                    Instant::now() < deadline,
                    "portfolio-replica was not ready within {CHANGE_TIMEOUT:?}:\n{}",
                    bin.stderr_text()
                );
                tokio::time::sleep(POLL).await;
            }
        }
        unreachable!("three attempts either return or panic")
    }

    pub fn stderr_text(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    pub fn stdout_text(&self) -> String {
        std::fs::read_to_string(&self.stdout).unwrap_or_default()
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends the signal `name` (`HUP`, `INT`, `TERM`).
    pub fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .arg(format!("-{name}"))
            .arg(self.child.id().to_string())
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -{name}: {status}");
    }

    /// The exit status, if the process has exited.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().expect("poll the child")
    }

    /// Waits up to `within` for the process to exit.
    pub async fn wait_exit(&mut self, within: Duration) -> ExitStatus {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.exited() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "portfolio-replica did not exit within {within:?}:\n{}",
                self.stderr_text()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// `generate --scale SCALE --workspaces N` into `dir`, its `keys.tsv`
/// removed: file name → key.
pub async fn generate_fleet(
    dir: &std::path::Path,
    scale: &str,
    n: usize,
) -> std::collections::BTreeMap<String, String> {
    let out = cli(&[
        "generate",
        "--out",
        &dir.display().to_string(),
        "--scale",
        scale,
        "--workspaces",
        &n.to_string(),
    ])
    .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let tsv = dir.join("keys.tsv");
    let keys = std::fs::read_to_string(&tsv).expect("keys.tsv");
    std::fs::remove_file(&tsv).expect("keys.tsv is not a snapshot");
    keys.lines()
        .skip(1)
        .map(|line| {
            let fields: Vec<&str> = line.split('\t').collect();
            (fields[1].to_owned(), fields[2].to_owned())
        })
        .collect()
}
