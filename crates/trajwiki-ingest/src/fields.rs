//! Typed access to the fields of a JSON object, with errors that say where.

use std::path::Path;

use serde_json::{Map, Value};

use crate::error::{describe, IngestError, Location, Result};

/// A JSON object being read, together with where it came from.
pub(crate) struct Record<'a> {
    pub file: &'a Path,
    pub at: Location,
    pub prefix: String,
    pub obj: &'a Map<String, Value>,
}

impl<'a> Record<'a> {
    /// Views `value` as an object, or fails naming `field`.
    pub fn new(file: &'a Path, at: Location, prefix: &str, value: &'a Value) -> Result<Self> {
        match value.as_object() {
            Some(obj) => Ok(Record {
                file,
                at,
                prefix: prefix.to_string(),
                obj,
            }),
            None => Err(IngestError::Field {
                file: file.to_path_buf(),
                at,
                field: if prefix.is_empty() {
                    "(record)".into()
                } else {
                    prefix.to_string()
                },
                expected: "an object".into(),
                found: describe(Some(value)),
            }),
        }
    }

    /// The full name of a field of this record.
    pub fn name(&self, field: &str) -> String {
        if self.prefix.is_empty() {
            field.to_string()
        } else {
            format!("{}.{field}", self.prefix)
        }
    }

    /// An error about `field`.
    pub fn error(&self, field: &str, expected: &str, found: impl Into<String>) -> IngestError {
        IngestError::Field {
            file: self.file.to_path_buf(),
            at: self.at.clone(),
            field: self.name(field),
            expected: expected.to_string(),
            found: found.into(),
        }
    }

    /// `Ok` when `got` is within `limit`, else the error naming this record and the limit.
    pub fn limit(&self, limit: trajwiki_core::limits::Limit, got: usize) -> Result<()> {
        limit.check(got).map_err(|limit| IngestError::Limit {
            file: self.file.to_path_buf(),
            at: self.at.clone(),
            limit,
        })
    }

    /// A raw field.
    pub fn get(&self, field: &str) -> Option<&'a Value> {
        self.obj.get(field)
    }

    fn wrong(&self, field: &str, expected: &str) -> IngestError {
        self.error(field, expected, describe(self.get(field)))
    }

    /// A required string.
    pub fn str(&self, field: &str) -> Result<&'a str> {
        self.get(field)
            .and_then(Value::as_str)
            .ok_or_else(|| self.wrong(field, "a string"))
    }

    /// A string naming someone (a speaker): any text but NUL, which SQLite's text functions
    /// take for the string's end (a claim, which starts with its speaker's name, would read as
    /// empty).
    pub fn name_str(&self, field: &str) -> Result<&'a str> {
        let name = self.str(field)?;
        if name.contains('\0') {
            return Err(self.error(
                field,
                "a name without NUL characters (U+0000)",
                crate::error::quote(name),
            ));
        }
        Ok(name)
    }

    /// An optional string (missing or null is `None`).
    pub fn opt_str(&self, field: &str) -> Result<Option<&'a str>> {
        match self.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(_) => Err(self.wrong(field, "a string or null")),
        }
    }

    /// A required integer from `lo` to `hi`; anything else is an error expecting "`what` from
    /// `lo` to `hi`", so that the range said is the range taken.
    pub fn u32_in(&self, field: &str, lo: u32, hi: u32, what: &str) -> Result<u32> {
        self.get(field)
            .and_then(Value::as_u64)
            .and_then(|n| u32::try_from(n).ok())
            .filter(|n| (lo..=hi).contains(n))
            .ok_or_else(|| self.wrong(field, &format!("{what} from {lo} to {hi}")))
    }

    /// An optional (missing or null) integer from `lo` to `hi` (see [`Record::u32_in`]).
    pub fn opt_u32_in(&self, field: &str, lo: u32, hi: u32, what: &str) -> Result<Option<u32>> {
        match self.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(_) => self.u32_in(field, lo, hi, what).map(Some),
        }
    }

    /// A required non-negative integer that fits in u32.
    pub fn u32(&self, field: &str) -> Result<u32> {
        self.u32_in(field, 0, u32::MAX, "an integer")
    }

    /// An optional boolean.
    pub fn opt_bool(&self, field: &str) -> Result<Option<bool>> {
        match self.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(_) => Err(self.wrong(field, "a boolean or null")),
        }
    }

    /// An optional finite number.
    pub fn opt_f64(&self, field: &str) -> Result<Option<f64>> {
        match self.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Number(n)) => n
                .as_f64()
                .filter(|x| x.is_finite())
                .map(Some)
                .ok_or_else(|| self.wrong(field, "a finite number")),
            Some(_) => Err(self.wrong(field, "a number or null")),
        }
    }

    /// An optional array (missing or null is empty).
    pub fn opt_array(&self, field: &str) -> Result<&'a [Value]> {
        match self.get(field) {
            None | Some(Value::Null) => Ok(&[]),
            Some(Value::Array(a)) => Ok(a),
            Some(_) => Err(self.wrong(field, "an array or null")),
        }
    }

    /// A nested record.
    pub fn child(&self, field: &str, value: &'a Value) -> Result<Record<'a>> {
        Record::new(self.file, self.at.clone(), &self.name(field), value)
    }
}
