//! Small pieces every HTTP service here shares: error bodies, wall-clock time, location paths.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use crate::field::ErrorBody;

/// An error answer: the status and a sentence saying what went wrong.
pub(crate) fn error(status: StatusCode, error: String) -> Response {
    (status, Json(ErrorBody { error })).into_response()
}

/// A duration as the core's nanoseconds, the longest ones held at the largest (never wrapped).
pub(crate) fn nanos(d: Duration) -> switchyard_core::Nanos {
    switchyard_core::Nanos(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// Now, in milliseconds since the Unix epoch (the sensing times services exchange).
pub(crate) fn unix_ms() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64() * 1e3)
}

/// The location a path segment names, in a field of `n`; or the sentence a 404 carries.
pub(crate) fn location(raw: &str, n: usize) -> Result<u32, String> {
    raw.parse::<u32>()
        .ok()
        .filter(|l| (*l as usize) < n)
        .ok_or_else(|| format!("no location `{raw}`: the field has locations 0 to {}", n.saturating_sub(1)))
}
