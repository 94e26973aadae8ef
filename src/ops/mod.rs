//! The operators' listener: `GET /metrics` (Prometheus text) and
//! `GET /snapshots` (the state of every snapshot file, as JSON).

use std::sync::Arc;

use bytes::Bytes;
use serde::Serialize;
use warp::Filter;
use warp::filters::BoxedFilter;
use warp::http::header::{ALLOW, CONTENT_TYPE, HeaderValue};
use warp::http::{Method, StatusCode};
use warp::reply::Response;

use crate::loader::{FileStatus, Snapshots};
use crate::metrics::{Format, Metrics};
use crate::reply::json;

#[derive(Serialize)]
struct SnapshotsBody {
    files: Vec<FileStatus>,
}

/// The filter of the admin listener.
pub fn routes(snapshots: Arc<Snapshots>, metrics: Arc<Metrics>) -> BoxedFilter<(Response,)> {
    warp::method()
        .and(warp::path::full())
        .map(move |method: Method, path: warp::path::FullPath| {
            if method != Method::GET && method != Method::HEAD {
                let mut response = json(
                    StatusCode::METHOD_NOT_ALLOWED,
                    Bytes::from_static(b"{\"error\":\"Method not allowed\"}"),
                );
                response
                    .headers_mut()
                    .insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
                return response;
            }
            match path.as_str() {
                "/snapshots" => snapshots_status(&snapshots),
                "/metrics" => {
                    let format = Format::Classic;
                    let mut response = Response::new(metrics.encode(format).into());
                    response.headers_mut().insert(
                        CONTENT_TYPE,
                        HeaderValue::from_static(format.content_type()),
                    );
                    response
                }
                _ => json(
                    StatusCode::NOT_FOUND,
                    Bytes::from_static(b"{\"error\":\"Not found\"}"),
                ),
            }
        })
        .boxed()
}

fn snapshots_status(snapshots: &Snapshots) -> Response {
    let body = SnapshotsBody {
        files: snapshots.statuses(),
    };
    match serde_json::to_vec(&body) {
        Ok(bytes) => json(StatusCode::OK, bytes.into()),
        Err(err) => {
            tracing::error!(error = %err, "cannot serialize the snapshot status");
            json(
                StatusCode::INTERNAL_SERVER_ERROR,
                Bytes::from_static(b"{\"error\":\"Internal error\"}"),
            )
        }
    }
}
