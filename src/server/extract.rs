//! What the handlers take from a request, each read once here: the namespace and record id of
//! the route's path, the query string, the JSON body. Every one that cannot be read answers as
//! every other failure does, JSON with a stable code (axum's own rejections are plain text).

use crate::api::ApiError;
use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRequest, FromRequestParts, Path, Query, Request};
use axum::http::request::Parts;
use axum::http::StatusCode;
use axum::Json;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use trajwiki_core::Namespace;
use utoipa::IntoParams;

use super::{Code, Failure};

/// The route's path parameters, as [`Path`] reads them; one that cannot be read (a segment
/// that is not UTF-8 once decoded) is a JSON failure like every other.
pub(super) struct Segments<T>(pub T);

impl<T, S> FromRequestParts<S> for Segments<T>
where
    T: DeserializeOwned + Send,
    S: Send + Sync,
{
    type Rejection = Failure;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Failure> {
        match Path::<T>::from_request_parts(parts, state).await {
            Ok(Path(value)) => Ok(Segments(value)),
            Err(e) => Err(Failure::new(e.status(), Code::BadRequest, e.body_text())),
        }
    }
}

/// The `{ns}` segment of a route, as the OpenAPI document shows it.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub(super) struct NsParam {
    /// The namespace (one user's or agent's memory).
    ns: String,
}

/// The `{id}` segment of a route, as the OpenAPI document shows it.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub(super) struct IdParam {
    /// A record id: its prefix (pg_, trj_, snp_, clm_, op_, msg_, run_, cmp_, ins_, job_)
    /// names its kind.
    id: String,
}

/// The route's namespace (its `{ns}` segment), checked as a namespace name.
pub(super) struct Ns(pub Namespace);

impl<S: Send + Sync> FromRequestParts<S> for Ns {
    type Rejection = Failure;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Failure> {
        let Segments(NsParam { ns }) = Segments::from_request_parts(parts, state).await?;
        Namespace::new(&ns)
            .map(Ns)
            .map_err(|e| Failure::from(ApiError::Id(e)))
    }
}

/// The route's record id (its `{id}` segment), as given: each route parses the kinds it serves.
pub(super) struct Id(pub String);

impl<S: Send + Sync> FromRequestParts<S> for Id {
    type Rejection = Failure;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Failure> {
        let Segments(IdParam { id }) = Segments::from_request_parts(parts, state).await?;
        Ok(Id(id))
    }
}

/// The request's query string, as [`Query`] reads it; one that cannot be read (an unknown
/// parameter, a number that is not one) is a JSON failure like every other.
pub(super) struct Params<T>(pub T);

impl<T, S> FromRequestParts<S> for Params<T>
where
    T: DeserializeOwned + Send,
    S: Send + Sync,
{
    type Rejection = Failure;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Failure> {
        match Query::<T>::from_request_parts(parts, state).await {
            Ok(Query(value)) => Ok(Params(value)),
            Err(e) => Err(Failure::new(e.status(), Code::BadRequest, e.body_text())),
        }
    }
}

/// The request's JSON body, as [`Json`] reads it; one that cannot be read (not JSON, a field
/// unknown or of the wrong type, too large) is a JSON failure like every other.
pub(super) struct Body<T>(pub T);

impl<T, S> FromRequest<S> for Body<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = Failure;

    async fn from_request(request: Request, state: &S) -> Result<Self, Failure> {
        Json::<T>::from_request(request, state)
            .await
            .map(|Json(value)| Body(value))
            .map_err(rejected)
    }
}

/// A body that could not be read as the route's JSON.
fn rejected(e: JsonRejection) -> Failure {
    let code = if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
        Code::TooLarge
    } else {
        Code::BadRequest
    };
    Failure::new(e.status(), code, e.body_text())
}
