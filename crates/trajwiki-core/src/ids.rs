//! Stable, content-derived identifiers.
//!
//! Every id is `<prefix>_<16 hex digits>`, where the digits are the start of a SHA-256 over the
//! namespace and an identity key chosen by the record's producer (for a message: its external ref,
//! or its session and position). The prefix tells which kind of record an id names, so a command
//! such as `trajwiki show <id>` can dispatch without a lookup.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::hash::content_hash;

/// A malformed id or namespace.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    /// The string does not have the `<prefix>_<16 hex>` shape of any known id kind.
    #[error(
        "`{id}` is not a trajwiki id (expected <prefix>_<16 hex digits>, prefix one of {prefixes})"
    )]
    Malformed {
        /// The rejected string.
        id: String,
        /// The accepted prefixes, for the message.
        prefixes: &'static str,
    },
    /// The id is well formed but names another kind of record.
    #[error("`{id}` names a {found}, expected a {expected}")]
    WrongKind {
        /// The rejected id.
        id: String,
        /// The kind that was expected.
        expected: IdKind,
        /// The kind the id names.
        found: IdKind,
    },
    /// A namespace name that is empty, too long or contains control characters.
    #[error("invalid namespace `{name}`: {reason}")]
    BadNamespace {
        /// The rejected name (its first 64 characters when longer).
        name: String,
        /// What is wrong with it.
        reason: &'static str,
    },
}

/// The kinds of records that have ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IdKind {
    /// A raw source message.
    Message,
    /// A raw agent run.
    Run,
    /// An immutable snapshot of one exchange.
    Snapshot,
    /// A source-grounded claim.
    Claim,
    /// One entry of the claim op log.
    Op,
    /// A trajectory of snapshots.
    Trajectory,
    /// A Memory Wiki page.
    Page,
    /// A compilation (diagnosis) of an agent run.
    Compilation,
    /// An insight drawn from a compilation.
    Insight,
}

impl IdKind {
    /// Every kind, in a fixed order.
    pub const ALL: [IdKind; 9] = [
        IdKind::Message,
        IdKind::Run,
        IdKind::Snapshot,
        IdKind::Claim,
        IdKind::Op,
        IdKind::Trajectory,
        IdKind::Page,
        IdKind::Compilation,
        IdKind::Insight,
    ];
    const PREFIXES: &'static str = "msg, run, snp, clm, op, trj, pg, cmp, ins";

    /// The id prefix of this kind.
    pub const fn prefix(self) -> &'static str {
        match self {
            IdKind::Message => "msg",
            IdKind::Run => "run",
            IdKind::Snapshot => "snp",
            IdKind::Claim => "clm",
            IdKind::Op => "op",
            IdKind::Trajectory => "trj",
            IdKind::Page => "pg",
            IdKind::Compilation => "cmp",
            IdKind::Insight => "ins",
        }
    }

    /// A human name for the kind.
    pub const fn name(self) -> &'static str {
        match self {
            IdKind::Message => "message",
            IdKind::Run => "run",
            IdKind::Snapshot => "snapshot",
            IdKind::Claim => "claim",
            IdKind::Op => "claim op",
            IdKind::Trajectory => "trajectory",
            IdKind::Page => "wiki page",
            IdKind::Compilation => "compilation",
            IdKind::Insight => "insight",
        }
    }

    /// Which kind of record `id` names, checking its full shape.
    pub fn of(id: &str) -> Result<IdKind, IdError> {
        let malformed = || IdError::Malformed {
            id: excerpt(id),
            prefixes: Self::PREFIXES,
        };
        let (prefix, digits) = id.split_once('_').ok_or_else(malformed)?;
        if digits.len() != 16
            || !digits
                .bytes()
                .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        {
            return Err(malformed());
        }
        Self::ALL
            .into_iter()
            .find(|kind| kind.prefix() == prefix)
            .ok_or_else(malformed)
    }
}

impl fmt::Display for IdKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One memory: a user, an agent, a LoCoMo sample. Nothing crosses namespaces.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Namespace(Arc<str>);

impl Namespace {
    /// Validates a namespace name: 1–128 characters, no control characters, no surrounding
    /// whitespace.
    pub fn new(name: impl Into<String>) -> Result<Self, IdError> {
        let name = name.into();
        let reason = if name.is_empty() {
            Some("it is empty")
        } else if name.chars().count() > 128 {
            Some("it is longer than 128 characters")
        } else if name.chars().any(char::is_control) {
            Some("it contains control characters")
        } else if name.trim() != name {
            Some("it has leading or trailing whitespace")
        } else {
            None
        };
        match reason {
            Some(reason) => Err(IdError::BadNamespace {
                name: excerpt(&name),
                reason,
            }),
            None => Ok(Namespace(Arc::from(name))),
        }
    }

    /// The name as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A rejected name as an error shows it: whole when short, else its first 64 characters and
/// its length.
fn excerpt(name: &str) -> String {
    match name.char_indices().nth(64) {
        Some((cut, _)) => format!("{}… ({} characters)", &name[..cut], name.chars().count()),
        None => name.to_string(),
    }
}

impl TryFrom<String> for Namespace {
    type Error = IdError;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        Namespace::new(value)
    }
}

impl From<Namespace> for String {
    fn from(value: Namespace) -> Self {
        value.0.to_string()
    }
}

impl fmt::Display for Namespace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The longest id: a three-letter prefix, `_` and 16 hex digits.
const ID_MAX: usize = 20;

/// An id's characters, held in place: an id is short and of fixed form ([`IdKind::of`] checks
/// it before one is made), so it needs no allocation of its own — a namespace's records hold
/// millions of them, and a cold load reads them all.
#[derive(Clone, PartialEq, Eq)]
struct Inline {
    len: u8,
    bytes: [u8; ID_MAX],
}

impl Inline {
    /// `id`, which [`IdKind::of`] accepted (ASCII, at most [`ID_MAX`] bytes).
    fn new(id: &str) -> Self {
        let mut bytes = [0u8; ID_MAX];
        bytes[..id.len()].copy_from_slice(id.as_bytes());
        Inline {
            len: id.len() as u8,
            bytes,
        }
    }

    fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len as usize]
    }

    fn as_str(&self) -> &str {
        std::str::from_utf8(self.as_bytes()).expect("an id is ASCII")
    }
}

macro_rules! define_id {
    ($(#[$doc:meta])* $name:ident => $kind:expr) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq)]
        pub struct $name(Inline);

        impl $name {
            /// The kind of record this id names.
            pub const KIND: IdKind = $kind;

            /// Derives the id of the record identified by `key` within `namespace`.
            pub fn derive(namespace: &Namespace, key: &str) -> Self {
                let digest = content_hash([Self::KIND.prefix(), namespace.as_str(), key]);
                $name(Inline::new(&format!("{}_{}", Self::KIND.prefix(), &digest[..16])))
            }

            /// Parses an id, checking that it names this kind of record.
            pub fn parse(id: &str) -> Result<Self, IdError> {
                let found = IdKind::of(id)?;
                if found != Self::KIND {
                    return Err(IdError::WrongKind { id: id.to_string(), expected: Self::KIND, found });
                }
                Ok($name(Inline::new(id)))
            }

            /// The id as a string slice.
            pub fn as_str(&self) -> &str {
                self.0.as_str()
            }
        }

        impl TryFrom<String> for $name {
            type Error = IdError;
            /// [`parse`](Self::parse).
            fn try_from(value: String) -> Result<Self, Self::Error> {
                Self::parse(&value)
            }
        }

        impl From<$name> for String {
            fn from(value: $name) -> Self {
                value.as_str().to_string()
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.debug_tuple(stringify!($name)).field(&self.as_str()).finish()
            }
        }

        // Ordered and hashed as their text, as when they were strings (a `str` compares by
        // its bytes and hashes as its bytes and 0xff), without reading the bytes as text.
        impl Ord for $name {
            fn cmp(&self, other: &Self) -> std::cmp::Ordering {
                self.0.as_bytes().cmp(other.0.as_bytes())
            }
        }

        impl PartialOrd for $name {
            fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
                Some(self.cmp(other))
            }
        }

        impl std::hash::Hash for $name {
            fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
                state.write(self.0.as_bytes());
                state.write_u8(0xff);
            }
        }

        impl Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> Deserialize<'de> for $name {
            /// Read from a borrowed string where the format lends one: no allocation.
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct Text;
                impl serde::de::Visitor<'_> for Text {
                    type Value = $name;
                    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                        write!(f, "a {} id", $kind.name())
                    }
                    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<$name, E> {
                        $name::parse(v).map_err(E::custom)
                    }
                }
                d.deserialize_str(Text)
            }
        }
    };
}

define_id!(
    /// Id of a [`SourceMessage`](crate::SourceMessage).
    MessageId => IdKind::Message
);
define_id!(
    /// Id of a [`Run`](crate::Run).
    RunId => IdKind::Run
);
define_id!(
    /// Id of a [`Snapshot`](crate::Snapshot).
    SnapshotId => IdKind::Snapshot
);
define_id!(
    /// Id of a [`Claim`](crate::Claim).
    ClaimId => IdKind::Claim
);
define_id!(
    /// Id of a [`ClaimOp`](crate::ClaimOp).
    OpId => IdKind::Op
);
define_id!(
    /// Id of a [`Trajectory`](crate::Trajectory).
    TrajectoryId => IdKind::Trajectory
);
define_id!(
    /// Id of a [`WikiPage`](crate::WikiPage).
    PageId => IdKind::Page
);
define_id!(
    /// Id of a [`Compilation`](crate::Compilation).
    CompilationId => IdKind::Compilation
);
define_id!(
    /// Id of an [`Insight`](crate::Insight).
    InsightId => IdKind::Insight
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derive_is_stable_and_kind_checked() {
        let ns = Namespace::new("conv-26").unwrap();
        let a = MessageId::derive(&ns, "ref:D1:3");
        assert_eq!(a, MessageId::derive(&ns, "ref:D1:3"));
        assert_ne!(a, MessageId::derive(&ns, "ref:D1:4"));
        assert_eq!(IdKind::of(a.as_str()).unwrap(), IdKind::Message);
        assert_eq!(MessageId::parse(a.as_str()).unwrap(), a);
        assert!(matches!(
            RunId::parse(a.as_str()),
            Err(IdError::WrongKind {
                found: IdKind::Message,
                ..
            })
        ));
        // Same key, other namespace or other kind: other id.
        let other = Namespace::new("conv-30").unwrap();
        assert_ne!(a, MessageId::derive(&other, "ref:D1:3"));
        assert_ne!(
            a.as_str()[4..],
            RunId::derive(&ns, "ref:D1:3").as_str()[4..]
        );
    }

    #[test]
    fn malformed_ids_are_rejected() {
        for bad in [
            "",
            "msg",
            "msg_",
            "msg_123",
            "xyz_0123456789abcdef",
            "msg_0123456789ABCDEF",
        ] {
            assert!(
                matches!(IdKind::of(bad), Err(IdError::Malformed { .. })),
                "{bad}"
            );
        }
    }

    #[test]
    fn namespace_validation() {
        assert!(Namespace::new("conv-26").is_ok());
        assert!(Namespace::new("").is_err());
        assert!(Namespace::new(" x").is_err());
        assert!(Namespace::new("a\nb").is_err());
        assert!(Namespace::new("x".repeat(129)).is_err());
    }

    #[test]
    fn ids_held_in_place_read_write_order_and_hash_as_their_text() {
        use std::hash::{BuildHasher, RandomState};
        let ns = Namespace::new("conv-26").unwrap();
        let (a, b) = (
            MessageId::derive(&ns, "ref:D1:3"),
            MessageId::derive(&ns, "ref:D1:4"),
        );
        let page = PageId::derive(&ns, "entity:caroline");
        assert_eq!(page.as_str().len(), 19);
        assert_eq!(
            format!("{a:?}"),
            format!("MessageId({:?})", a.as_str().to_string())
        );
        assert_eq!(a.cmp(&b), a.as_str().cmp(b.as_str()));
        let hasher = RandomState::new();
        assert_eq!(hasher.hash_one(&a), hasher.hash_one(a.as_str()));
        let json = serde_json::to_string(&vec![a.clone(), b.clone()]).unwrap();
        assert_eq!(json, format!("[\"{a}\",\"{b}\"]"));
        let back: Vec<MessageId> = serde_json::from_str(&json).unwrap();
        assert_eq!(back, [a.clone(), b]);
        assert_eq!(String::from(page.clone()), page.as_str());
        // Another kind's id, or a malformed one, is refused as before.
        let wrong = serde_json::from_str::<MessageId>(&format!("\"{page}\"")).unwrap_err();
        assert!(
            wrong
                .to_string()
                .starts_with(&format!("`{page}` names a wiki page, expected a message")),
            "{wrong}"
        );
        assert!(serde_json::from_str::<MessageId>("\"msg_12\"").is_err());
        assert!(serde_json::from_str::<MessageId>("17").is_err());
    }
}
