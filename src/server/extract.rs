//! What the handlers take from a request, each read once here: the namespace and record id of
//! the route's path, the query string, the JSON body. Every one that cannot be read answers as
//! every other failure does, JSON with a stable code (axum's own rejections are plain text).
//!
//! A JSON body with a key given twice in one object is refused wherever the object is (422, the
//! key and the object's place named): serde refuses a request's own fields given twice, but a
//! field read as a JSON value (a message, a run) would keep the last of the two silently.

use crate::api::ApiError;
use axum::body::Bytes;
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

/// The request's JSON body, as [`Json`] reads it; one that cannot be read (not JSON, a key given
/// twice in an object, a field unknown or of the wrong type, too large) is a JSON failure like
/// every other.
pub(super) struct Body<T>(pub T);

impl<T, S> FromRequest<S> for Body<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = Failure;

    async fn from_request(request: Request, state: &S) -> Result<Self, Failure> {
        if !super::perimeter::is_json(request.headers()) {
            return Err(Failure::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                Code::BadRequest,
                "this route takes a JSON body: send `Content-Type: application/json`",
            ));
        }
        let bytes = Bytes::from_request(request, state).await.map_err(|e| {
            let code = if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
                Code::TooLarge
            } else {
                Code::BadRequest
            };
            Failure::new(e.status(), code, e.body_text())
        })?;
        if let Some(twice) = twice_given(&bytes) {
            return Err(Failure::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                Code::BadRequest,
                twice.to_string(),
            ));
        }
        Json::<T>::from_bytes(&bytes)
            .map(|Json(value)| Body(value))
            .map_err(rejected)
    }
}

/// A key given twice in one object of a JSON document, and where the object is.
#[derive(Debug, PartialEq, Eq)]
struct TwiceGiven {
    /// The object's place: its fields and list positions from the top (`messages[1]`), empty
    /// for the top object.
    place: String,
    /// The key.
    key: String,
}

impl std::fmt::Display for TwiceGiven {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut key: String = self.key.chars().take(100).collect();
        if key.len() < self.key.len() {
            key.push('…');
        }
        if self.place.is_empty() {
            write!(f, "the body gives the key {key:?} twice")?;
        } else {
            write!(f, "field `{}` gives the key {key:?} twice", self.place)?;
        }
        f.write_str(
            ": a key is given once in an object (which of the two was meant is not guessed)",
        )
    }
}

/// The first key given twice in one object of the JSON document `bytes`, at any depth; `None`
/// when there is none, and when `bytes` is not JSON (the body's parse then says why).
fn twice_given(bytes: &[u8]) -> Option<TwiceGiven> {
    let mut found = None;
    let mut place = Vec::new();
    let walk = Walk {
        place: &mut place,
        found: &mut found,
    };
    let _ = serde::de::DeserializeSeed::deserialize(
        walk,
        &mut serde_json::Deserializer::from_slice(bytes),
    );
    found
}

/// One step of an object's place: a field or a list position.
enum Step {
    Field(String),
    Index(usize),
}

/// Reads a JSON value, keeping nothing but the place it is at, and stops at the first object
/// that gives a key twice (noted in `found`).
struct Walk<'a> {
    place: &'a mut Vec<Step>,
    found: &'a mut Option<TwiceGiven>,
}

impl Walk<'_> {
    /// The place as the error names it: `messages[1].steps[0]`.
    fn place(&self) -> String {
        let mut out = String::new();
        for step in self.place.iter() {
            match step {
                Step::Field(name) if out.is_empty() => out.push_str(name),
                Step::Field(name) => {
                    out.push('.');
                    out.push_str(name);
                }
                Step::Index(i) => out.push_str(&format!("[{i}]")),
            }
        }
        out
    }

    /// The walk of the value at `step` below this one.
    fn below(&mut self, step: Step) -> Walk<'_> {
        self.place.push(step);
        Walk {
            place: self.place,
            found: self.found,
        }
    }
}

impl<'de> serde::de::DeserializeSeed<'de> for Walk<'_> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Walk<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }

    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }

    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }

    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }

    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(mut self, mut seq: A) -> Result<(), A::Error> {
        let mut index = 0;
        loop {
            let more = seq.next_element_seed(self.below(Step::Index(index)))?;
            self.place.pop();
            if more.is_none() {
                return Ok(());
            }
            index += 1;
        }
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(mut self, mut map: A) -> Result<(), A::Error> {
        let mut keys = std::collections::HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            if keys.contains(&key) {
                *self.found = Some(TwiceGiven {
                    place: self.place(),
                    key,
                });
                return Err(serde::de::Error::custom("a key given twice"));
            }
            map.next_value_seed(self.below(Step::Field(key.clone())))?;
            self.place.pop();
            keys.insert(key);
        }
        Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;

    fn twice(json: &str) -> Option<(String, String)> {
        twice_given(json.as_bytes()).map(|t| (t.place, t.key))
    }

    #[test]
    fn a_key_given_twice_is_found_with_its_place() {
        let found = |place: &str, key: &str| Some((place.to_string(), key.to_string()));
        assert_eq!(twice(r#"{"a": 1, "a": 2}"#), found("", "a"));
        assert_eq!(
            twice(r#"{"messages": [{"text": "x"}, {"text": "x", "seq": 1, "text": "y"}]}"#),
            found("messages[1]", "text")
        );
        assert_eq!(
            twice(r#"{"runs": [{"steps": [[], {"a": {"b": 1, "b": 1}}]}]}"#),
            found("runs[0].steps[1].a", "b")
        );
        // The same key in sibling objects, or at several depths, is given once in each.
        assert_eq!(twice(r#"[{"a": 1}, {"a": {"a": [{"a": 2}]}}]"#), None);
        // Not JSON before a key comes again: the body's own parse says why.
        assert_eq!(twice(r#"{"a": 1 "a": 2}"#), None);
        assert_eq!(twice(""), None);
        let said = TwiceGiven {
            place: "messages[1]".into(),
            key: "text".into(),
        }
        .to_string();
        assert!(
            said.starts_with(r#"field `messages[1]` gives the key "text" twice"#),
            "{said}"
        );
    }
}
