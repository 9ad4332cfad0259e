//! The stable codes of the server's errors (`{"error": {"code", "message"}}`): what a client
//! may match on, whatever the message says. Every failure the server answers is made with one
//! of these ([`Failure::new`](super::Failure) takes a [`Code`], not text), README's table of
//! codes lists them (a test here holds the two to each other), and the OpenAPI document gives
//! them as the values of `code`.

use serde::{Serialize, Serializer};

/// Declares [`Code`] with every code's name as clients see it, and the list of them all.
macro_rules! codes {
    ($($(#[doc = $doc:literal])+ $variant:ident = $name:literal,)+) => {
        /// A failure's stable code.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub(crate) enum Code {
            $($(#[doc = $doc])+ $variant,)+
        }

        impl Code {
            /// Every code, in the order of README's table.
            pub(crate) const ALL: &'static [Code] = &[$(Code::$variant,)+];

            /// The code as clients see it.
            pub(crate) fn name(self) -> &'static str {
                match self {
                    $(Code::$variant => $name,)+
                }
            }
        }
    };
}

codes! {
    /// A request that cannot be read: its JSON, a field, a query string, a path segment, or
    /// the request line or a header (400, 415 or 422).
    BadRequest = "bad_request",
    /// A namespace name or record id that is not one (400).
    BadId = "bad_id",
    /// A body or a text over its limit (413).
    TooLarge = "too_large",
    /// More headers or head bytes than the server reads (431).
    HeadersTooLarge = "headers_too_large",
    /// A request target over the longest the server reads (414).
    UriTooLong = "uri_too_long",
    /// A route that needs the server's bearer token asked without it (401).
    Unauthorized = "unauthorized",
    /// A `Host` that does not name this server (403).
    ForbiddenHost = "forbidden_host",
    /// An `Origin` that is neither the request's own nor an allowed one (403).
    ForbiddenOrigin = "forbidden_origin",
    /// A write to a store opened read only (403).
    ReadOnly = "read_only",
    /// No such route (404).
    NoRoute = "no_route",
    /// A route asked with a method it does not take (405).
    MethodNotAllowed = "method_not_allowed",
    /// A namespace without messages (404).
    UnknownNamespace = "unknown_namespace",
    /// No record, job or message with that id in the namespace (404).
    NotFound = "not_found",
    /// A namespace without agent runs asked for runs (404).
    NoRuns = "no_runs",
    /// A namespace not built yet (409).
    NotBuilt = "not_built",
    /// Runs not compiled yet (409).
    NotCompiled = "not_compiled",
    /// The history of a record that has none (400).
    NoHistory = "no_history",
    /// A namespace built with another embedding model than the server's (409).
    ModelMismatch = "model_mismatch",
    /// A namespace whose memory was built with another model or configuration (409).
    Stale = "stale",
    /// A record with a stored one's identity and other content (409).
    Conflict = "conflict",
    /// A session that holds a message at its last position (409).
    SessionFull = "session_full",
    /// A build of the namespace is running (409).
    Busy = "busy",
    /// A request not done within its deadline (503).
    Timeout = "timeout",
    /// The store was moved or replaced while the server held it open: writes are refused
    /// until it is served at its new place (503).
    StoreMoved = "store_moved",
    /// The disk holding the store is full (507).
    StorageFull = "storage_full",
    /// A failure of the server's own (500).
    Internal = "internal",
}

impl std::fmt::Display for Code {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl Serialize for Code {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

/// The OpenAPI schema of a code: a string, one of [`Code::ALL`].
pub(super) fn schema() -> utoipa::openapi::Schema {
    use utoipa::openapi::schema::{ObjectBuilder, Type};
    ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(Code::ALL.iter().map(|c| c.name())))
        .into()
}

#[cfg(test)]
mod tests {
    use super::Code;

    /// The codes README's table of error codes lists, in its order: the first cell of each row
    /// of the table headed `| code | status | when |`.
    fn readme_codes() -> Vec<String> {
        let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
            .expect("README.md reads");
        let mut lines = readme
            .lines()
            .skip_while(|l| l.trim() != "| code | status | when |")
            .skip(2);
        let mut out = Vec::new();
        for line in lines.by_ref().take_while(|l| l.starts_with('|')) {
            let cell = line.split('|').nth(1).expect("a table row").trim();
            out.push(cell.trim_matches('`').to_string());
        }
        out
    }

    #[test]
    fn readme_lists_every_code_the_server_sends() {
        let listed = readme_codes();
        let sent: Vec<String> = Code::ALL.iter().map(|c| c.name().to_string()).collect();
        assert!(!listed.is_empty(), "README has no table of error codes");
        for code in &sent {
            assert!(
                listed.contains(code),
                "README's table of error codes misses `{code}`"
            );
        }
        for code in &listed {
            assert!(
                sent.contains(code),
                "README lists `{code}`, which the server never sends"
            );
        }
        assert_eq!(
            listed, sent,
            "README's table lists the codes in another order"
        );
    }

    #[test]
    fn names_are_distinct_snake_case() {
        let mut names: Vec<&str> = Code::ALL.iter().map(|c| c.name()).collect();
        assert!(names
            .iter()
            .all(|n| n.chars().all(|c| c.is_ascii_lowercase() || c == '_')));
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Code::ALL.len());
    }
}
