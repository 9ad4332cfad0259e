//! Conflicts described for people: which fields of a record differ between the stored version
//! and the incoming one, each shown in both as JSON (never as Rust's debug text), so that two
//! versions that differ only in an attachment do not read the same.

use std::collections::BTreeSet;

use serde::Serialize;
use serde_json::Value;

use crate::StoreError;

/// The most characters of one value shown in a conflict.
const SHOWN: usize = 120;

/// How two versions of a record differ: the fields, and each version's values of them.
pub(crate) struct Differences {
    /// The fields whose values differ, by their JSON names.
    pub fields: Vec<String>,
    /// The stored version's values of them, as `name value` pairs.
    pub existing: String,
    /// The incoming version's values of them.
    pub incoming: String,
}

impl Differences {
    /// Compares two versions field by field (their JSON forms), leaving out the fields
    /// `ignored` names. Two values that are not both objects are shown whole.
    pub fn of<A: Serialize + ?Sized, B: Serialize + ?Sized>(
        existing: &A,
        incoming: &B,
        ignored: &[&str],
    ) -> Differences {
        Self::of_values(&json(existing), &json(incoming), ignored)
    }

    /// [`Differences::of`] for JSON values.
    pub fn of_values(existing: &Value, incoming: &Value, ignored: &[&str]) -> Differences {
        let (Value::Object(a), Value::Object(b)) = (existing, incoming) else {
            return Differences {
                fields: Vec::new(),
                existing: show(Some(existing)),
                incoming: show(Some(incoming)),
            };
        };
        let names: BTreeSet<&String> = a
            .keys()
            .chain(b.keys())
            .filter(|k| !ignored.contains(&k.as_str()))
            .collect();
        let fields: Vec<String> = names
            .into_iter()
            .filter(|k| a.get(*k) != b.get(*k))
            .cloned()
            .collect();
        let values = |of: &serde_json::Map<String, Value>| {
            fields
                .iter()
                .map(|f| format!("{f} {}", show(of.get(f))))
                .collect::<Vec<_>>()
                .join(", ")
        };
        Differences {
            existing: values(a),
            incoming: values(b),
            fields,
        }
    }

    /// The conflict of a record `kind` with this `id`; `context` describes each version after
    /// its values (empty for none).
    pub fn conflict(
        self,
        kind: &'static str,
        id: impl Into<String>,
        context: Option<(String, String)>,
    ) -> StoreError {
        let (existing, incoming) = match context {
            Some((a, b)) => (
                format!("{} ({a})", self.existing),
                format!("{} ({b})", self.incoming),
            ),
            None => (self.existing, self.incoming),
        };
        StoreError::Conflict {
            kind,
            id: id.into(),
            fields: self.fields,
            existing,
            incoming,
        }
    }
}

/// The conflict of two versions of a record of `kind`, named by the fields that differ.
pub(crate) fn conflict<A: Serialize + ?Sized, B: Serialize + ?Sized>(
    kind: &'static str,
    id: &str,
    existing: &A,
    incoming: &B,
) -> StoreError {
    Differences::of(existing, incoming, &["id"]).conflict(kind, id, None)
}

fn json<T: Serialize + ?Sized>(value: &T) -> Value {
    // Records serialize to JSON by construction; a failure shows as its message.
    serde_json::to_value(value).unwrap_or_else(|e| Value::String(format!("({e})")))
}

/// A value as compact JSON, cut at [`SHOWN`] characters; a field a version lacks is `(none)`.
fn show(value: Option<&Value>) -> String {
    let Some(value) = value else {
        return "(none)".into();
    };
    let text = value.to_string();
    match text.char_indices().nth(SHOWN) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_each_field_that_differs_with_both_values() {
        let d = Differences::of_values(
            &json!({"id": "a", "text": "hi", "attachments": [{"kind": "image"}]}),
            &json!({"id": "b", "text": "hi"}),
            &["id"],
        );
        assert_eq!(d.fields, ["attachments"]);
        assert_eq!(d.existing, r#"attachments [{"kind":"image"}]"#);
        assert_eq!(d.incoming, "attachments (none)");
        let e = d.conflict("message", "msg_1", None).to_string();
        assert!(e.contains("(field `attachments` differs)"), "{e}");
    }

    #[test]
    fn other_values_are_shown_whole_and_long_ones_cut() {
        let long = "x".repeat(500);
        let d = Differences::of(&"claim", &long, &[]);
        assert!(d.fields.is_empty());
        assert_eq!(d.existing, "\"claim\"");
        assert!(d.incoming.ends_with('…') && d.incoming.chars().count() == SHOWN + 1);
    }
}
