//! The Portfolio API over HTTP (the admin listener is `crate::serve::ops`).
//!
//! [`ApiService`], a hyper service, hands what a request carries (method,
//! path, query, headers) to [`respond`], a plain function that applies the
//! contract's order of checks: method (405), readiness (503), key (401),
//! the workspace's limits (429, `limits.rs`), path and query (400), a load
//! on demand (503), lookup (404). Routing is a `match` on path segments rather
//! than a tree of warp filters, because the order of checks cuts across
//! routes (a bad id on an unknown key is a 401, not a 400) and warp's
//! rejection merging would blur it. Handlers return replies; nothing rejects.

mod auth;
mod buffers;
mod cors;
mod error;
mod http;
pub mod limits;
mod query;
mod routes;

use std::convert::Infallible;
use std::future::{Future, Ready, ready};
use std::ops::Range;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures_util::future::Either;

use bytes::Bytes;
use warp::http::header::{ALLOW, HeaderName, HeaderValue, RETRY_AFTER, WWW_AUTHENTICATE};
use warp::http::{HeaderMap, Method, Request, StatusCode};
use warp::reply::Response;

pub use auth::bearer_key_hash;
pub use cors::Cors;
pub use error::ApiError;
pub use query::Query;

use crate::metrics::Metrics;
use crate::serve::reply::json;
use crate::serve::residency::{Resident, Unavailable};
use portfolio_domain::store::id::parse_id;
use portfolio_domain::store::{Body, Dataset, OffsetPage, Store};
pub use routes::Route;

/// The OpenAPI 3.1 document of exactly what this server does.
pub const OPENAPI: &[u8] = include_bytes!("openapi.json");

/// The message of every 401, the public service's own text.
pub const UNAUTHORIZED_MESSAGE: &str = "Invalid or missing API key";

/// The message of the 503 for a workspace whose version this replica
/// refused (for memory, or for its signature) while knowing its keys.
pub const UNAVAILABLE_MESSAGE: &str = "The workspace's data is not available on this replica";

/// What the API needs to answer requests.
pub struct ApiState {
    pub store: Arc<Store>,
    /// Keys are `<key_prefix>_<secret>`.
    pub key_prefix: String,
    /// Set once the first scan of the snapshots (a directory or an object
    /// store) has finished.
    pub ready: Arc<AtomicBool>,
    /// Set once the datasets of the first scan are precompressed for gzip
    /// answers: until then `/readyz` still says `starting`, so that a new
    /// replica takes traffic only when it can answer it at full speed.
    /// Datasets published later precompress in the background.
    pub warm: AtomicBool,
    /// Set when shutdown begins: `/readyz` answers 503 so the balancer
    /// drains this replica, while requests still being sent are answered.
    pub draining: Arc<AtomicBool>,
    pub metrics: Arc<Metrics>,
    /// Whether bodies may be gzipped for clients that ask.
    pub compression: bool,
    /// `/readyz` answers 503 while fewer workspaces than this serve.
    pub require_workspaces: usize,
    /// Cross-origin access for browser clients, when allowed.
    pub cors: Option<Cors>,
    /// With a memory budget: the workspaces in memory, and loads on
    /// demand of the others (the catalog holds them hollow).
    pub resident: Option<Arc<Resident>>,
    /// Each workspace's rate and requests in flight: its snapshot's
    /// limits, else the flags' (`--rate-limit`, `--max-in-flight`). Always
    /// there, as a snapshot's own limits hold whatever the flags say;
    /// without either, a request is admitted at the cost of a look at its
    /// policy (`Limits::new(None)`).
    pub limits: Arc<limits::Limits>,
}

/// The Portfolio API, `/healthz` and `/readyz`, as a hyper service: each
/// request is answered by [`respond`] in the poll that received its head,
/// but for one whose workspace is loaded on demand first (a memory
/// budget), answered once the load is done.
///
/// Not a warp filter: a request passed through warp's filters (method,
/// full path, raw query, headers) cost a clone of the header map, the query
/// as a `String`, a boxed request body, a boxed future and warp's route
/// state, about 5% of the server's CPU on a company's notes (BENCHMARKS.md,
/// "The request path against the bare server"); [`respond`] reads them
/// where hyper put them. Answers are still warp's `Response`,
/// and the admin listener still warp's filters (`crate::serve::ops`).
#[derive(Clone)]
pub struct ApiService {
    state: Arc<ApiState>,
}

impl ApiService {
    pub fn new(state: Arc<ApiState>) -> ApiService {
        ApiService { state }
    }

    /// Answers `request` now, or, when its workspace must be loaded on
    /// demand first, once it is; counted in the metrics and traced.
    fn answer<B: Send + 'static>(&self, request: Request<B>) -> Answering {
        let state = &self.state;
        let started = std::time::Instant::now();
        state.metrics.start();
        let (method, uri, headers) = (request.method(), request.uri(), request.headers());
        let (path, query) = (uri.path(), uri.query().unwrap_or(""));
        let (route, id) = Route::classify(path);
        match step(state, method, route, path, id, query, headers) {
            Step::Answer(response) => {
                Either::Left(ready(Ok(self.finish(&request, route, response, started))))
            }
            // Held back a moment: a runaway client's connections then
            // wait instead of costing the core a 429 each microsecond.
            Step::Throttled(response, hold) => {
                let service = self.clone();
                Either::Right(Box::pin(async move {
                    tokio::time::sleep(hold).await;
                    Ok(service.finish(&request, route, response, started))
                }))
            }
            Step::Load(hollow, resident) => {
                // The future owns the request: it finds the id again by
                // where it is in the path, classified once.
                let id = span_in(path, id);
                let service = self.clone();
                Either::Right(Box::pin(async move {
                    let mut loaded = resident.load(&hollow).await;
                    if loaded.is_err()
                        && let Some(newer) = service.serving_now(&request, &hollow)
                    {
                        // Its version stopped serving between the catalog
                        // this request read and its load (a reload
                        // published a newer one and forgot this one): the
                        // version serving now answers, as it would a
                        // request a moment later, rather than a 503 that a
                        // replica without a budget would not give.
                        loaded = if !newer.is_hollow() {
                            Ok(newer)
                        } else if let Some(full) = resident.get(&newer) {
                            Ok(full)
                        } else {
                            resident.load(&newer).await
                        };
                    }
                    let response = service.answer_loaded(&request, route, id, loaded);
                    Ok(service.finish(&request, route, response, started))
                }))
            }
        }
    }

    /// The dataset serving `request`'s key now, if it is another version
    /// than `hollow`.
    fn serving_now<B>(&self, request: &Request<B>, hollow: &Dataset) -> Option<Arc<Dataset>> {
        let state = &self.state;
        let key_hash = auth::bearer_key_hash(request.headers(), &state.key_prefix)?;
        let catalog = state.store.load();
        let now = catalog.by_key(&key_hash)?;
        (now.fingerprint != hollow.fingerprint).then(|| Arc::clone(now))
    }

    /// The answer from a workspace loaded on demand, or the 503 of a load
    /// that failed; `id` is where the route's id is in the path.
    fn answer_loaded<B>(
        &self,
        request: &Request<B>,
        route: Route,
        id: Range<usize>,
        loaded: Result<Arc<Dataset>, Unavailable>,
    ) -> Response {
        match loaded {
            Ok(dataset) => {
                let (uri, headers) = (request.uri(), request.headers());
                let (path, query) = (uri.path(), uri.query().unwrap_or(""));
                let id = &path[id];
                from_dataset(&self.state, &dataset, route, path, id, query, headers)
            }
            // Why is in the log and /snapshots: it names files and objects
            // of the replica, none of the client's business.
            Err(Unavailable(_)) => json_error_with(
                StatusCode::SERVICE_UNAVAILABLE,
                "The workspace's data cannot be loaded now; try again shortly",
                (RETRY_AFTER, "1"),
            ),
        }
    }

    /// Counts and traces an answered request, with CORS headers added.
    fn finish<B>(
        &self,
        request: &Request<B>,
        route: Route,
        mut response: Response,
        started: std::time::Instant,
    ) -> Response {
        let state = &self.state;
        if let Some(cors) = &state.cors {
            cors.decorate(request.headers(), &mut response);
        }
        let elapsed = started.elapsed();
        let status = response.status().as_u16();
        state.metrics.finish(route.index(), status, elapsed);
        // Never the query's values or a header: only what identifies
        // the endpoint. Keys travel in a header and are never logged.
        tracing::debug!(
            method = %request.method(),
            route = route.label(),
            status,
            elapsed_us = elapsed.as_micros() as u64,
            "request"
        );
        response
    }
}

/// Where `id`, a part of `path` or `""`, is in `path`.
fn span_in(path: &str, id: &str) -> Range<usize> {
    if id.is_empty() {
        return 0..0;
    }
    let start = id.as_ptr() as usize - path.as_ptr() as usize;
    debug_assert_eq!(path.get(start..start + id.len()), Some(id));
    start..start + id.len()
}

/// The future of an answer: ready at once, after a 429's hold, or after
/// a load on demand.
type Answering = Either<
    Ready<Result<Response, Infallible>>,
    Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>,
>;

impl<B: Send + 'static> hyper::service::Service<Request<B>> for ApiService {
    type Response = Response;
    type Error = Infallible;
    type Future = Answering;

    fn call(&self, request: Request<B>) -> Self::Future {
        self.answer(request)
    }
}

/// What answering a request takes.
pub enum Step {
    Answer(Response),
    /// The data of this hollow dataset's workspace, loaded on demand. The
    /// request waiting for it counts against nothing but its connection:
    /// the load is shared by every request for the version and counts
    /// against the byte bound of loads in flight (docs/operations.md,
    /// "What a load counts against").
    Load(Arc<Dataset>, Arc<Resident>),
    /// A 429, answered after a short hold ([`limits::hold`]).
    Throttled(Response, std::time::Duration),
}

impl From<Response> for Step {
    fn from(response: Response) -> Step {
        Step::Answer(response)
    }
}

impl Step {
    /// The answer, unless a load on demand must come first.
    pub fn answered(self) -> Option<Response> {
        match self {
            Step::Answer(response) | Step::Throttled(response, _) => Some(response),
            Step::Load(..) => None,
        }
    }
}

/// Answers one request, or says which workspace must be loaded first;
/// also says which route it is, for the metrics. (What [`ApiService`]
/// does for each request, less the metrics, the trace and CORS headers.)
pub fn respond(
    state: &ApiState,
    method: &Method,
    path: &str,
    query: &str,
    headers: &HeaderMap,
) -> (Step, Route) {
    let (route, id) = Route::classify(path);
    (step(state, method, route, path, id, query, headers), route)
}

/// The contract's order of checks for a request to `path`, of `route`
/// with `id` (`Route::classify`).
fn step(
    state: &ApiState,
    method: &Method,
    route: Route,
    path: &str,
    id: &str,
    query: &str,
    headers: &HeaderMap,
) -> Step {
    // A browser's preflight carries no key: it is answered before anything
    // else, when cross-origin access is on.
    if let Some(cors) = &state.cors
        && method == Method::OPTIONS
    {
        return cors.preflight(headers).into();
    }
    if method != Method::GET && method != Method::HEAD {
        return json_error_with(
            StatusCode::METHOD_NOT_ALLOWED,
            "Method not allowed: this API is read-only",
            (ALLOW, "GET, HEAD"),
        )
        .into();
    }
    let ready = state.ready.load(Ordering::Acquire);
    match route {
        Route::Health => {
            return json(StatusCode::OK, Bytes::from_static(b"{\"status\":\"ok\"}")).into();
        }
        Route::OpenApi => return json(StatusCode::OK, Bytes::from_static(OPENAPI)).into(),
        Route::Ready if state.draining.load(Ordering::Acquire) => {
            return json(
                StatusCode::SERVICE_UNAVAILABLE,
                Bytes::from_static(b"{\"status\":\"draining\"}"),
            )
            .into();
        }
        Route::Ready if ready => return readiness(state).into(),
        Route::Ready => {
            return json(
                StatusCode::SERVICE_UNAVAILABLE,
                Bytes::from_static(b"{\"status\":\"starting\"}"),
            )
            .into();
        }
        _ => {}
    }
    if !ready {
        return json_error_with(
            StatusCode::SERVICE_UNAVAILABLE,
            "Service is starting: snapshots are still loading",
            (RETRY_AFTER, "1"),
        )
        .into();
    }
    let Some(key_hash) = auth::bearer_key_hash(headers, &state.key_prefix) else {
        return unauthorized().into();
    };
    // The one load of the catalog for this request; the guard lives until
    // the body is built, and the body comes from this one dataset.
    let catalog = state.store.load();
    let Some(dataset) = catalog.by_key(&key_hash) else {
        return unauthorized().into();
    };
    // The workspace's limits: after the key, before anything else
    // (docs/api.md#rate-limits). Held until the answer is made.
    let admitted = match state
        .limits
        .admit(&dataset.workspace_id, dataset.limits.as_ref())
    {
        Ok(admitted) => admitted,
        Err(over) => {
            state.metrics.throttled(over.why.reason());
            return Step::Throttled(limits::too_many(over), limits::hold(over.why));
        }
    };
    if !dataset.is_hollow() {
        return from_dataset(state, dataset, route, path, id, query, headers).into();
    }
    // Its records are elsewhere. The contract's 400s (and an unknown
    // path's 404) come before a load on demand: the endpoint checks them
    // on the hollow dataset.
    if let Err(err) = endpoint(dataset, route, id, &Query::parse(query))
        && (err.status == StatusCode::BAD_REQUEST || route == Route::Other)
    {
        return json(err.status, err.body().into()).into();
    }
    let resident = match &state.resident {
        Some(resident) if !dataset.is_refused() => resident,
        // A version refused (for memory, or for its signature) whose keys
        // are known: its records are not here, and a load would not make
        // them so. Why is in the log and /snapshots (it names the
        // replica's files and limits); the client learns only that its
        // key is right and the data unavailable for now. (Without a
        // budget, every hollow dataset is one.)
        _ => {
            return json_error_with(
                StatusCode::SERVICE_UNAVAILABLE,
                UNAVAILABLE_MESSAGE,
                (RETRY_AFTER, "30"),
            )
            .into();
        }
    };
    match resident.get(dataset) {
        Some(full) => from_dataset(state, &full, route, path, id, query, headers).into(),
        None => {
            // Admitted (its rate counted), then out of the workspace's
            // requests in flight while it waits: waiting for the one
            // shared load is not work of its own, and counting it made a
            // cold workspace's ordinary parallelism a burst of 429s. It is
            // answered from memory the moment the load ends.
            drop(admitted);
            Step::Load(Arc::clone(dataset), Arc::clone(resident))
        }
    }
}

/// The answer from `dataset`, the workspace's data.
fn from_dataset(
    state: &ApiState,
    dataset: &Dataset,
    route: Route,
    path: &str,
    id: &str,
    query: &str,
    headers: &HeaderMap,
) -> Response {
    match endpoint(dataset, route, id, &Query::parse(query)) {
        Ok(body) => http::ok(dataset, path, query, headers, body, state.compression),
        Err(err) => json(err.status, err.body().into()),
    }
}

/// Answers an authenticated request from one dataset.
fn endpoint<'d>(
    ds: &'d Dataset,
    route: Route,
    id: &str,
    q: &Query<'_>,
) -> Result<Body<'d>, ApiError> {
    let company = || path_id(id, "company");
    // A company's body, or its 404; `of_company_paged` checks the id before
    // the page, as the contract orders a 400's causes.
    let of_company = |body: fn(&'d Dataset, u128) -> Option<Body<'d>>| {
        body(ds, company()?).ok_or_else(company_not_found)
    };
    let of_company_paged = |body: fn(&'d Dataset, u128, OffsetPage) -> Option<Body<'d>>| {
        let id = company()?;
        body(ds, id, q.offset_page(100, 50)?).ok_or_else(company_not_found)
    };
    match route {
        Route::Portfolio => {
            let priority = q.filter("filter[priority]")?;
            Ok(ds.portfolio_body(priority.as_deref(), q.offset_page(100, 50)?))
        }
        Route::Company => of_company(Dataset::company_body),
        Route::CompanyTasks => of_company_paged(Dataset::company_tasks_body),
        Route::CompanyRoles => of_company(Dataset::company_roles_body),
        Route::CompanyNotes => of_company_paged(Dataset::company_notes_body),
        Route::CompanyMetrics => of_company(Dataset::company_metrics_body),
        Route::CompanyMeetings => of_company_paged(Dataset::company_meetings_body),
        Route::Tasks => {
            let status = q.filter("filter[status]")?;
            let priority = q.filter("filter[priority]")?;
            let page = q.offset_page(100, 50)?;
            Ok(ds.tasks_body(status.as_deref(), priority.as_deref(), page))
        }
        Route::Task => ds
            .task_body(path_id(id, "task")?)
            .ok_or_else(|| ApiError::not_found("Task not found")),
        Route::Roles => Ok(ds.roles_body()),
        Route::Note => ds
            .note_body(path_id(id, "note")?)
            .ok_or_else(|| ApiError::not_found("Note not found")),
        Route::Feed => {
            let mut kind = None;
            Ok(ds.feed_body(q.feed(&mut kind)?))
        }
        Route::Meeting => {
            let id = path_id(id, "meeting")?;
            let include_notes = q.include_notes()?;
            ds.meeting_body(id, include_notes)
                .ok_or_else(|| ApiError::not_found("Meeting not found"))
        }
        Route::Health | Route::Ready | Route::OpenApi | Route::Other => {
            Err(ApiError::not_found("Not found"))
        }
    }
}

/// `/readyz` once the first scan is done: 200, unless the first scan's
/// datasets are still being precompressed, or `--require-workspaces` asks
/// for more workspaces than serve now.
fn readiness(state: &ApiState) -> Response {
    let catalog = state.store.load();
    if !state.warm.load(Ordering::Acquire) {
        if !catalog.workspaces().all(|d| d.warming_done()) {
            return json(
                StatusCode::SERVICE_UNAVAILABLE,
                Bytes::from_static(b"{\"status\":\"starting\"}"),
            );
        }
        state.warm.store(true, Ordering::Release);
    }
    // A refused version's claims are in the catalog for their keys' 503,
    // but serve nothing.
    let serving = catalog.workspaces().filter(|d| !d.is_refused()).count();
    drop(catalog);
    if serving >= state.require_workspaces {
        return json(
            StatusCode::OK,
            Bytes::from_static(b"{\"status\":\"ready\"}"),
        );
    }
    let body = format!(
        "{{\"status\":\"waiting for workspaces\",\"serving\":{serving},\"required\":{}}}",
        state.require_workspaces
    );
    json(StatusCode::SERVICE_UNAVAILABLE, body.into())
}

fn path_id(text: &str, what: &str) -> Result<u128, ApiError> {
    parse_id(text)
        .ok_or_else(|| ApiError::bad_request(format!("Invalid {what} id: must be a UUID")))
}

fn company_not_found() -> ApiError {
    ApiError::not_found("Company not found")
}

fn unauthorized() -> Response {
    json_error_with(
        StatusCode::UNAUTHORIZED,
        UNAUTHORIZED_MESSAGE,
        (WWW_AUTHENTICATE, "Bearer"),
    )
}

/// An error answer with the one header its status calls for (`Allow` on a
/// 405, `Retry-After` on a 503, `WWW-Authenticate` on a 401).
fn json_error_with(
    status: StatusCode,
    message: &str,
    (name, value): (HeaderName, &'static str),
) -> Response {
    let mut response = json_error(status, message);
    response
        .headers_mut()
        .insert(name, HeaderValue::from_static(value));
    response
}

fn json_error(status: StatusCode, message: &str) -> Response {
    json(status, error::error_body(message).into())
}
