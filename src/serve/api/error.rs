//! API errors as replies: a status and `{"error": "<message>"}`.

use warp::http::StatusCode;

/// An error a client caused or can act on. The message is for humans and
/// never carries internal detail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
}

impl ApiError {
    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError {
            status: StatusCode::BAD_REQUEST,
            message: message.into(),
        }
    }

    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError {
            status: StatusCode::NOT_FOUND,
            message: message.into(),
        }
    }

    /// The JSON body, exactly `{"error":"..."}`.
    pub fn body(&self) -> Vec<u8> {
        error_body(&self.message)
    }
}

pub fn error_body(message: &str) -> Vec<u8> {
    let mut out = b"{\"error\":".to_vec();
    // A string always serializes.
    let _ = serde_json::to_writer(&mut out, message);
    out.push(b'}');
    out
}
