//! The HTTP server: our own accept loop around hyper, so that every limit a
//! replica facing the internet needs is set, and shutdown is graceful.
//!
//! warp supplies the request handling (`warp::service`); this module
//! supplies connections: a cap on concurrent connections (accepting pauses
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
    mut shutdown: watch::Receiver<bool>,
) {
    let service = warp::service(filter);
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
        let service = TowerToHyperService::new(service.clone());
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
/// service see.
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
    let clock = Arc::new(ConnClock {
        started: Instant::now(),
        activity: AtomicU64::new(0),
        head_since: AtomicU64::new(0),
        head_started: tokio::sync::Notify::new(),
    });
    let io = Tracked {
        inner: stream,
        clock: Arc::clone(&clock),
    };
    let dispatched = {
        let clock = Arc::clone(&clock);
        hyper::service::service_fn(move |request| {
            // The head is complete: the slowloris timer stops.
            clock.head_since.store(0, Ordering::Relaxed);
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
    // When the connection was asked to close (idle, or shutdown): a response
    // in progress may still finish, for one more idle period at most, so a
    // client that stopped reading cannot hold the connection forever.
    let mut closing_since: Option<u64> = None;
    loop {
        let now = clock.now();
        let head_since = clock.head_since.load(Ordering::Relaxed);
        let head_deadline =
            (head_since != 0).then(|| head_since + millis(limits.header_read_timeout));
        let idle_deadline = match closing_since {
            None => clock.activity.load(Ordering::Relaxed) + millis(limits.keep_alive_timeout),
            Some(since) => since + millis(limits.keep_alive_timeout),
        };
        let wake = head_deadline.map_or(idle_deadline, |h| h.min(idle_deadline));
        tokio::select! {
            result = conn.as_mut() => {
                if let Err(err) = result {
                    tracing::debug!(error = %err, "connection closed with an error");
                }
                return;
            }
            _ = tokio::time::sleep(Duration::from_millis(wake.saturating_sub(now))) => {
                let now = clock.now();
                let head_since = clock.head_since.load(Ordering::Relaxed);
                if head_since != 0 && now >= head_since + millis(limits.header_read_timeout) {
                    tracing::debug!("request head too slow; closing the connection");
                    return;
                }
                match closing_since {
                    Some(since) if now >= since + millis(limits.keep_alive_timeout) => {
                        tracing::debug!("client stopped reading; closing the connection");
                        return;
                    }
                    Some(_) => {}
                    None if now >= clock.activity.load(Ordering::Relaxed) + millis(limits.keep_alive_timeout) => {
                        // Finishes a response in progress, then closes.
                        conn.as_mut().graceful_shutdown();
                        closing_since = Some(now);
                    }
                    None => {}
                }
            }
            // Re-arm the timer: a head has begun.
            _ = clock.head_started.notified() => {}
            _ = stopped(&mut shutdown), if closing_since.is_none() => {
                conn.as_mut().graceful_shutdown();
                closing_since = Some(clock.now());
            }
        }
    }
}

fn millis(d: Duration) -> u64 {
    d.as_millis() as u64
}

/// What a connection's timers need, in milliseconds since it was accepted.
struct ConnClock {
    started: Instant,
    /// When bytes last moved either way.
    activity: AtomicU64,
    /// When the first byte of a request head arrived, or 0 when no head is
    /// being read.
    head_since: AtomicU64,
    /// Wakes the connection's timer loop when a head starts.
    head_started: tokio::sync::Notify,
}

impl ConnClock {
    fn now(&self) -> u64 {
        // +1: 0 means "not reading a head".
        self.started.elapsed().as_millis() as u64 + 1
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

/// A socket that tells its connection's clock when bytes move.
struct Tracked {
    inner: TcpStream,
    clock: Arc<ConnClock>,
}

impl Tracked {
    fn touch(&self) {
        self.clock
            .activity
            .store(self.clock.now(), Ordering::Relaxed);
    }
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
            self.touch();
            // Bytes while no request is being handled begin a head.
            let clock = &self.clock;
            let began = clock.head_since.compare_exchange(
                0,
                clock.now(),
                Ordering::Relaxed,
                Ordering::Relaxed,
            );
            if began.is_ok() {
                clock.head_started.notify_one();
            }
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
            self.touch();
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
            self.touch();
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
