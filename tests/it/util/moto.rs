//! A real S3 protocol server for the object storage tests: moto's server
//! (`moto_server`), pinned, installed on first use into a venv under
//! target/ (as .ci/schemathesis.sh installs schemathesis), so that a plain
//! `cargo test` on a fresh clone runs these tests. The install takes a file
//! lock, so parallel tests (and test processes) do not race; without
//! python3 or PyPI it fails loudly rather than skip.
//!
//! Each `Moto` is one `moto_server` on 127.0.0.1 at a port the kernel
//! picked, killed (by its PID) when dropped; its data lives in memory and
//! goes with it.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use super::{POLL, exchange};

/// The moto release the tests are written against.
const MOTO_VERSION: &str = "5.2.5";

/// How long installing moto may take (a fresh download of it and its
/// dependencies from PyPI).
const INSTALL_TIMEOUT: Duration = Duration::from_secs(600);

/// How long `moto_server` may take to answer after it starts.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// The venv's `moto_server`, installed if missing.
fn moto_server() -> &'static Path {
    static INSTALLED: OnceLock<PathBuf> = OnceLock::new();
    INSTALLED.get_or_init(|| {
        let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join("moto-venv");
        let server = root.join("bin").join("moto_server");
        let marker = root.join(format!(".installed-moto-{MOTO_VERSION}"));
        std::fs::create_dir_all(env!("CARGO_TARGET_TMPDIR")).expect("create target/tmp");
        let lock =
            std::fs::File::create(root.with_extension("lock")).expect("create the venv lock");
        // flock: held until the file is closed, released if the process dies.
        // SAFETY: flock on a file descriptor this function owns.
        let locked = unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&lock), libc::LOCK_EX) };
        assert_eq!(
            locked,
            0,
            "lock the moto venv: {}",
            std::io::Error::last_os_error()
        );
        if !marker.exists() {
            install(&root);
            std::fs::write(&marker, MOTO_VERSION).expect("mark the venv installed");
        }
        drop(lock);
        server
    })
}

fn install(root: &Path) {
    let _ = std::fs::remove_dir_all(root);
    let python = which("python3").unwrap_or_else(|| {
        panic!(
            "the object storage tests need python3 (with venv and pip) to install moto {MOTO_VERSION} into {}; install python3",
            root.display()
        )
    });
    run(
        Command::new(python).args(["-m", "venv"]).arg(root),
        "python3 -m venv (on Debian: apt-get install python3-venv)",
    );
    run(
        Command::new(root.join("bin").join("python")).args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            &format!("moto[server]=={MOTO_VERSION}"),
        ]),
        "pip install moto[server] (needs PyPI)",
    );
}

fn which(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|dir| Path::new(dir).join(program))
        .find(|p| p.is_file())
}

/// Runs `cmd` to its end within `INSTALL_TIMEOUT`, failing with its output.
fn run(cmd: &mut Command, what: &str) {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{what}: cannot start: {e}"));
    let deadline = Instant::now() + INSTALL_TIMEOUT;
    loop {
        if let Some(status) = child.try_wait().expect("wait for the installer") {
            let output = child.wait_with_output().expect("installer output");
            assert!(
                status.success(),
                "{what} failed with {status}:\n{}\n{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
            return;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} did not finish within {INSTALL_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// One running `moto_server`.
pub struct Moto {
    child: Child,
    pub addr: SocketAddr,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Moto {
    /// Starts a moto server on a free loopback port and waits until it answers.
    pub async fn start() -> Moto {
        let server = tokio::task::spawn_blocking(moto_server)
            .await
            .expect("install moto");
        let dir = super::tempdir();
        let log = dir.path().join("moto.log");
        let child = Command::new(server)
            .args(["-H", "127.0.0.1", "-p", "0"])
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(dir.path().join("moto.out")).expect("moto stdout"))
            .stderr(std::fs::File::create(&log).expect("moto log"))
            .spawn()
            .expect("start moto_server");
        let mut moto = Moto {
            child,
            addr: "127.0.0.1:0".parse().expect("an address"),
            log,
            _dir: dir,
        };
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Some(status) = moto.child.try_wait().expect("poll moto") {
                panic!("moto_server exited with {status}:\n{}", moto.log_text());
            }
            if let Some(addr) = moto.listening_on() {
                moto.addr = addr;
                let probe = format!("GET / HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
                if exchange(addr, "GET", probe.into_bytes()).await.is_ok() {
                    return moto;
                }
            }
            assert!(
                Instant::now() < deadline,
                "moto_server did not answer within {START_TIMEOUT:?}:\n{}",
                moto.log_text()
            );
            tokio::time::sleep(POLL).await;
        }
    }

    fn listening_on(&self) -> Option<SocketAddr> {
        let log = self.log_text();
        let at = log.find("Running on http://")? + "Running on http://".len();
        let end = log[at..].find(|c: char| c.is_whitespace())? + at;
        log[at..end].trim_end_matches('/').parse().ok()
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Creates `bucket` (moto takes an unsigned request).
    pub async fn create_bucket(&self, bucket: &str) {
        let req = format!(
            "PUT /{bucket} HTTP/1.1\r\nHost: {}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            self.addr
        );
        let resp = exchange(self.addr, "PUT", req.into_bytes())
            .await
            .unwrap_or_else(|e| panic!("create bucket {bucket}: {e}"));
        assert_eq!(resp.status, 200, "create bucket {bucket}: {}", resp.text());
    }

    /// Stops the server (its data goes with it).
    pub fn stop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        self.stop();
    }
}
