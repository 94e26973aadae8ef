//! The HTTP server: our own accept loop around hyper, so that every limit a
//! replica facing the internet needs is set, and shutdown is graceful.
//!
//! The request handling is a hyper service (the API's own, or warp's for
//! the admin listener); this module supplies connections: a cap on concurrent connections (accepting pauses
//! at the cap, so the kernel's backlog absorbs bursts), a header-size limit
//! (which bounds the request line too), a header-read timeout against
//! slowloris clients, a keep-alive idle timeout, and on shutdown: stop
//! accepting, let in-flight requests finish, close idle connections, and
//! give up on the rest after a grace period.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};
use warp::filters::BoxedFilter;
use warp::reply::Response;

/// Limits of the HTTP layer. The defaults suit a replica behind a load
/// balancer whose idle timeout is 60 s (the server's must be longer, or the
/// balancer may reuse a connection the server is closing).
#[derive(Clone, Copy, Debug)]
pub struct HttpLimits {
    /// Connections served at once; accepting pauses at the cap.
    pub max_connections: usize,
    /// Largest request head (request line plus headers), in bytes; larger
    /// is answered 431.
    pub max_header_bytes: usize,
    /// Time a client has to send a request's head once it has started.
    pub header_read_timeout: Duration,
    /// Time a keep-alive connection may sit idle between requests.
    pub keep_alive_timeout: Duration,
    /// Time in-flight requests get to finish after shutdown begins.
    pub shutdown_grace: Duration,
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            max_connections: 10_000,
            max_header_bytes: 16 * 1024,
            header_read_timeout: Duration::from_secs(10),
            keep_alive_timeout: Duration::from_secs(75),
            shutdown_grace: Duration::from_secs(10),
        }
    }
}

/// Serves `filter` on `listener` until `shutdown` turns true, then drains.
pub async fn serve(
    listener: TcpListener,
    filter: BoxedFilter<(Response,)>,
    limits: HttpLimits,
    shutdown: watch::Receiver<bool>,
) {
    let service = TowerToHyperService::new(warp::service(filter));
    serve_service(listener, service, limits, shutdown).await;
}

/// Serves `service` (a clone per connection) on `listener` until
/// `shutdown` turns true, then drains.
pub async fn serve_service<S>(
    listener: TcpListener,
    service: S,
    limits: HttpLimits,
    mut shutdown: watch::Receiver<bool>,
) where
    S: hyper::service::Service<hyper::Request<hyper::body::Incoming>, Response = Response>
        + Clone
        + Send
        + 'static,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    S::Future: Send + 'static,
{
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    loop {
        let permit = tokio::select! {
            permit = Arc::clone(&permits).acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break,
            },
            _ = stopped(&mut shutdown) => break,
        };
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(err) => {
                    accept_error(err).await;
                    continue;
                }
            },
            _ = stopped(&mut shutdown) => break,
        };
        let service = service.clone();
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            connection(stream, service, limits, shutdown).await;
            drop(permit);
        });
    }
    drop(listener);
    // Every connection holds a permit until it has closed.
    let all = u32::try_from(limits.max_connections).unwrap_or(u32::MAX);
    if tokio::time::timeout(limits.shutdown_grace, permits.acquire_many(all))
        .await
        .is_err()
    {
        tracing::warn!(
            grace_ms = limits.shutdown_grace.as_millis() as u64,
            open = limits.max_connections - permits.available_permits(),
            "grace period over; closing the remaining connections"
        );
    }
}

/// Serves one connection until it closes, it idles too long, a request
/// head takes too long to arrive, or shutdown.
///
/// hyper's own header-read timer also runs while a keep-alive connection is
/// idle, which would make the idle timeout and the slowloris timeout one and
/// the same; so both are kept here instead, from what the socket and the
/// service see. A request costs them no clock read and no timer: the socket
/// and the service only bump counters ([`Activity`]), and a tick of a quarter
/// of the shorter timeout reads the clock and the counters. A change seen at
/// a tick is dated to that tick, never earlier than it happened, so neither
/// timeout fires early, and each fires at most half a timeout late.
async fn connection<S>(
    stream: TcpStream,
    service: S,
    limits: HttpLimits,
    mut shutdown: watch::Receiver<bool>,
) where
    S: hyper::service::Service<hyper::Request<hyper::body::Incoming>, Response = Response> + Send,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    S::Future: Send + 'static,
{
    let _ = stream.set_nodelay(true);
    let activity = Arc::new(Activity::default());
    let io = Tracked {
        inner: stream,
        activity: Arc::clone(&activity),
    };
    let dispatched = {
        let activity = Arc::clone(&activity);
        hyper::service::service_fn(move |request| {
            // The head is complete: the slowloris timer stops.
            activity.head_done();
            service.call(request)
        })
    };
    let conn = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(None)
        .max_buf_size(limits.max_header_bytes.max(8192))
        .max_header_size(limits.max_header_bytes)
        .serve_connection(TokioIo::new(io), dispatched);
    tokio::pin!(conn);
    let started = Instant::now();
    let now = || millis(started.elapsed());
    let mut ticks = tokio::time::interval(tick(&limits));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // What the last tick saw, and since when (ms since accepted).
    let (mut moved, mut idle_since) = (activity.moved(), 0);
    let (mut head, mut head_since) = (activity.head(), 0);
    // When the connection was asked to close (idle, or shutdown): a response
    // in progress may still finish, for one more idle period at most, so a
    // client that stopped reading cannot hold the connection forever.
    let mut closing_since: Option<u64> = None;
    loop {
        tokio::select! {
            result = conn.as_mut() => {
                if let Err(err) = result {
                    tracing::debug!(error = %err, "connection closed with an error");
                }
                return;
            }
            _ = ticks.tick() => {
                let now = now();
                if activity.moved() != moved {
                    (moved, idle_since) = (activity.moved(), now);
                }
                match activity.head() {
                    h if !reading(h) => {}
                    h if h != head => (head, head_since) = (h, now),
                    _ if now >= head_since + millis(limits.header_read_timeout) => {
                        tracing::debug!("request head too slow; closing the connection");
                        return;
                    }
                    _ => {}
                }
                match closing_since {
                    Some(since) if now >= since + millis(limits.keep_alive_timeout) => {
                        tracing::debug!("client stopped reading; closing the connection");
                        return;
                    }
                    Some(_) => {}
                    None if now >= idle_since + millis(limits.keep_alive_timeout) => {
                        // Finishes a response in progress, then closes.
                        conn.as_mut().graceful_shutdown();
                        closing_since = Some(now);
                    }
                    None => {}
                }
            }
            _ = stopped(&mut shutdown), if closing_since.is_none() => {
                conn.as_mut().graceful_shutdown();
                closing_since = Some(now());
            }
        }
    }
}

fn millis(d: Duration) -> u64 {
    d.as_millis() as u64
}

/// How often a connection's timers look: a quarter of the shorter timeout
/// (2.5 s by default), so that each fires at most half a timeout late.
fn tick(limits: &HttpLimits) -> Duration {
    let shorter = limits.header_read_timeout.min(limits.keep_alive_timeout);
    (shorter / 4).max(Duration::from_millis(1))
}

/// What a connection's timers need to know, as counters that the socket
/// and the service bump without reading the clock. Atomics because the
/// service closure must be `Sync`; only the connection's task touches
/// them, so loads and stores suffice (no read-modify-write).
#[derive(Default)]
struct Activity {
    /// Bumped whenever bytes move either way.
    moved: AtomicU64,
    /// Odd while a request head is being read: bumped when its first bytes
    /// arrive and again when it is complete.
    head: AtomicU64,
}

/// Whether `head` (an [`Activity::head`] count) says a head is being read.
fn reading(head: u64) -> bool {
    head % 2 == 1
}

impl Activity {
    fn moved(&self) -> u64 {
        self.moved.load(Ordering::Relaxed)
    }

    fn head(&self) -> u64 {
        self.head.load(Ordering::Relaxed)
    }

    fn touch(&self) {
        self.moved.store(self.moved() + 1, Ordering::Relaxed);
    }

    /// Bytes arrived: unless a head is being read already, they begin one.
    /// Bytes of a request body that arrive after its head count too, as
    /// the start of the next head: a connection left idle after them is
    /// closed by the header-read timeout rather than the keep-alive one.
    fn read(&self) {
        self.touch();
        let head = self.head();
        if !reading(head) {
            self.head.store(head + 1, Ordering::Relaxed);
        }
    }

    fn head_done(&self) {
        let head = self.head();
        if reading(head) {
            self.head.store(head + 1, Ordering::Relaxed);
        }
    }
}

/// Completes once shutdown has begun.
async fn stopped(shutdown: &mut watch::Receiver<bool>) {
    let _ = shutdown.wait_for(|stop| *stop).await;
}

/// Accept errors: a client that gave up is nothing; running out of file
/// descriptors passes, so wait a moment instead of spinning.
async fn accept_error(err: std::io::Error) {
    use std::io::ErrorKind::*;
    if matches!(
        err.kind(),
        ConnectionAborted | ConnectionReset | ConnectionRefused | Interrupted
    ) {
        return;
    }
    tracing::warn!(error = %err, "accept failed; pausing 100 ms");
    tokio::time::sleep(Duration::from_millis(100)).await;
}

/// A socket that tells its connection's [`Activity`] when bytes move.
struct Tracked {
    inner: TcpStream,
    activity: Arc<Activity>,
}

impl AsyncRead for Tracked {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let poll = Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.activity.read();
        }
        poll
    }
}

impl AsyncWrite for Tracked {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write(cx, data);
        if matches!(poll, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        poll
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if matches!(poll, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        poll
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
