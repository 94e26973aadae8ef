//! JSON replies, shared by both listeners (the API and the admin one).

use bytes::Bytes;
use warp::http::StatusCode;
use warp::http::header::{CONTENT_TYPE, HeaderValue};
use warp::reply::Response;

/// The `Content-Type` of every JSON answer.
pub const JSON: &str = "application/json";

/// A response with `Content-Type: application/json`.
pub fn json(status: StatusCode, body: Bytes) -> Response {
    let mut response = Response::new(body.into());
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(JSON));
    response
}
