//! The operators' listener: `GET /snapshots` (and `/metrics`).

use std::sync::Arc;

use bytes::Bytes;
use serde::Serialize;
use warp::Filter;
use warp::filters::BoxedFilter;
use warp::http::{Method, StatusCode};
use warp::reply::Response;

use crate::api::json;
use crate::loader::{FileStatus, Snapshots};

#[derive(Serialize)]
struct SnapshotsBody {
    files: Vec<FileStatus>,
}

/// The filter of the admin listener.
pub fn routes(snapshots: Arc<Snapshots>) -> BoxedFilter<(Response,)> {
    warp::method()
        .and(warp::path::full())
        .map(move |method: Method, path: warp::path::FullPath| {
            if method != Method::GET && method != Method::HEAD {
                return json(
                    StatusCode::METHOD_NOT_ALLOWED,
                    Bytes::from_static(b"{\"error\":\"Method not allowed\"}"),
                );
            }
            match path.as_str() {
                "/snapshots" => {
                    let body = SnapshotsBody {
                        files: snapshots.statuses(),
                    };
                    match serde_json::to_vec(&body) {
                        Ok(bytes) => json(StatusCode::OK, bytes.into()),
                        Err(_) => json(
                            StatusCode::INTERNAL_SERVER_ERROR,
                            Bytes::from_static(b"{\"error\":\"Internal error\"}"),
                        ),
                    }
                }
                _ => json(
                    StatusCode::NOT_FOUND,
                    Bytes::from_static(b"{\"error\":\"Not found\"}"),
                ),
            }
        })
        .boxed()
}
