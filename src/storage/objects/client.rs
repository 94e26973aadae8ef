//! The object store's HTTP client, instrumented. object_store does every
//! request through it (retries included), so it counts them by kind
//! (`portfolio_replica_source_requests_total`: what a fleet costs in
//! requests) and keeps the status of the last failed answer, which tells a
//! throttled request (503 SlowDown) from a failing server (500) once
//! object_store has wrapped both in the same error type. [`classify`] turns
//! an object_store error into one of the [`ErrorKind`]s.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use object_store::ClientOptions;
use object_store::client::{
    HttpClient, HttpConnector, HttpError, HttpErrorKind, HttpRequest, HttpResponse, HttpService,
    ReqwestConnector,
};

use crate::metrics::Metrics;
use crate::storage::error::ErrorKind;

/// What the client saw of its requests.
#[derive(Debug, Default)]
pub struct ClientLog {
    /// The status of the last answer that was an error (4xx, 5xx).
    last_failure: Mutex<Option<u16>>,
}

impl ClientLog {
    /// Forgets the last failure; call before an operation whose failure is
    /// to be classified.
    pub fn clear(&self) {
        *self.last_failure.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }

    fn last_failure(&self) -> Option<u16> {
        *self.last_failure.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn record(&self, status: u16) {
        *self.last_failure.lock().unwrap_or_else(|p| p.into_inner()) = Some(status);
    }
}

/// Makes object_store's own reqwest client, wrapped.
pub struct Connector {
    log: Arc<ClientLog>,
    metrics: Option<Arc<Metrics>>,
}

impl Connector {
    pub fn new(log: Arc<ClientLog>, metrics: Option<Arc<Metrics>>) -> Connector {
        Connector { log, metrics }
    }
}

impl std::fmt::Debug for Connector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Connector")
    }
}

impl HttpConnector for Connector {
    fn connect(&self, options: &ClientOptions) -> object_store::Result<HttpClient> {
        let inner = ReqwestConnector::default().connect(options)?;
        Ok(HttpClient::new(Instrumented {
            inner,
            log: Arc::clone(&self.log),
            metrics: self.metrics.clone(),
        }))
    }
}

struct Instrumented {
    inner: HttpClient,
    log: Arc<ClientLog>,
    metrics: Option<Arc<Metrics>>,
}

impl std::fmt::Debug for Instrumented {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Instrumented")
    }
}

#[async_trait]
impl HttpService for Instrumented {
    async fn call(&self, req: HttpRequest) -> Result<HttpResponse, HttpError> {
        if let Some(metrics) = &self.metrics {
            metrics.source_request(request_kind(&req));
        }
        let result = self.inner.execute(req).await;
        if let Ok(response) = &result {
            let status = response.status().as_u16();
            if status >= 400 {
                self.log.record(status);
            }
        }
        result
    }
}

/// What a request is, as the requests metric labels it.
fn request_kind(req: &HttpRequest) -> &'static str {
    let query = req.uri().query().unwrap_or("");
    match req.method().as_str() {
        // S3 and GCS list with `list-type=2`, Azure with `comp=list`.
        "GET" if query.contains("list-type=") || query.contains("comp=list") => "list",
        "GET" if req.headers().contains_key("if-none-match") => "conditional_get",
        "GET" => "get",
        "HEAD" => "head",
        "PUT" | "POST" => "put",
        "DELETE" => "delete",
        _ => "other",
    }
}

/// The kind of an object_store error, for logs and metrics. A transport
/// failure is found in the error's sources; an error status, in what the
/// client recorded.
pub fn classify(error: &object_store::Error, log: &ClientLog) -> ErrorKind {
    use object_store::Error;
    match error {
        Error::NotFound { .. } => return ErrorKind::NotFound,
        Error::PermissionDenied { .. } | Error::Unauthenticated { .. } => return ErrorKind::Auth,
        _ => {}
    }
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(current) = source {
        if let Some(http) = current.downcast_ref::<HttpError>() {
            match http.kind() {
                HttpErrorKind::Timeout => return ErrorKind::Timeout,
                HttpErrorKind::Connect | HttpErrorKind::Request | HttpErrorKind::Interrupted => {
                    return ErrorKind::Network;
                }
                HttpErrorKind::Decode => return ErrorKind::Incomplete,
                _ => break,
            }
        }
        if let Some(io) = current.downcast_ref::<std::io::Error>()
            && io.kind() == std::io::ErrorKind::TimedOut
        {
            return ErrorKind::Timeout;
        }
        source = current.source();
    }
    match log.last_failure() {
        Some(429 | 503) => ErrorKind::Throttling,
        Some(500..=599) => ErrorKind::ServerError,
        Some(401 | 403) => ErrorKind::Auth,
        Some(404) => ErrorKind::NotFound,
        _ => ErrorKind::Other,
    }
}
