//! The engine is the faces' one door (ARCHITECTURE.md, "One door into the engine"): the root
//! crate (CLI, server, MCP) and the Python crate depend on no workspace crate but the engine and
//! the records, and write a namespace only through the engine's operations.

use std::path::{Path, PathBuf};

/// The workspace crates a face may name: the engine, and the records it takes and gives.
const DOOR: [&str; 2] = ["trajwiki-engine", "trajwiki-core"];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The workspace crates `manifest`'s `[dependencies]` and `[features]` name.
fn workspace_crates_named(manifest: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(manifest).unwrap();
    let doc: toml::Table = text.parse().unwrap();
    let mut named = Vec::new();
    if let Some(deps) = doc.get("dependencies").and_then(|d| d.as_table()) {
        named.extend(deps.keys().filter(|k| k.starts_with("trajwiki")).cloned());
    }
    if let Some(features) = doc.get("features").and_then(|f| f.as_table()) {
        for enabled in features.values().filter_map(|v| v.as_array()) {
            for item in enabled.iter().filter_map(|i| i.as_str()) {
                if let Some((krate, _)) = item.split_once('/') {
                    if krate.starts_with("trajwiki") {
                        named.push(krate.to_string());
                    }
                }
            }
        }
    }
    named
}

#[test]
fn the_faces_depend_on_the_engine_and_the_records_alone() {
    for manifest in ["Cargo.toml", "python/Cargo.toml"] {
        let named = workspace_crates_named(&root().join(manifest));
        assert!(
            named.iter().any(|n| n == "trajwiki-engine"),
            "{manifest} does not name the engine: {named:?}"
        );
        let around: Vec<_> = named
            .iter()
            .filter(|n| !DOOR.contains(&n.as_str()))
            .collect();
        assert!(
            around.is_empty(),
            "{manifest} names {around:?}: a face reaches the crates under the engine through \
             `trajwiki_engine::layers` (a feature of theirs through an engine feature)"
        );
    }
}

/// The `.rs` files under `dir`, recursively.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The store's writes, called as methods: a face calls the engine's operation of that name
/// (`engine.ingest_runs(store, …)`), never the store's.
const STORE_WRITES: [&str; 14] = [
    "append_messages",
    "append_vectors",
    "append_vectors_caching",
    "apply",
    "clear_memory",
    "commit_compilation",
    "commit_memory",
    "delete_namespace",
    "ingest_messages",
    "ingest_runs",
    "put_embeddings",
    "put_llm_response",
    "reset_vectors",
    "set_ann_rows",
];

/// The engine's own steps of a write, which its operations call under the writer lock.
const ENGINE_STEPS: [&str; 8] = [
    "build_namespace(",
    "build_namespace_driven(",
    "build_namespace_kept_driven(",
    "prefill_messages(",
    "refresh_segment(",
    "write_segment(",
    "compile_namespace(",
    "compile_runs(",
];

/// Where `line` writes around the door, if it does.
fn around_the_door(line: &str) -> Option<String> {
    let code = line.split("//").next().unwrap_or("");
    for step in ENGINE_STEPS {
        // A face's own function of that name (Python's `compile_runs`) is not a call of it.
        if code.contains(step) && !code.contains(&format!("fn {step}")) {
            return Some(step.trim_end_matches('(').to_string());
        }
    }
    for write in STORE_WRITES {
        let call = format!(".{write}(");
        let mut from = 0;
        while let Some(at) = code[from..].find(&call) {
            let at = from + at;
            let receiver: String = code[..at]
                .chars()
                .rev()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            if receiver != "engine" {
                return Some(format!("{receiver}.{write}"));
            }
            from = at + call.len();
        }
    }
    None
}

#[test]
fn the_faces_write_only_through_the_engine() {
    let mut files = Vec::new();
    sources(&root().join("src"), &mut files);
    sources(&root().join("python/rust"), &mut files);
    assert!(files.len() > 20, "the faces' sources were not found");
    let mut found = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for (i, line) in text.lines().enumerate() {
            if let Some(what) = around_the_door(line) {
                let shown = file.strip_prefix(root()).unwrap_or(file).display();
                found.push(format!("{shown}:{}: {what}", i + 1));
            }
        }
    }
    assert!(
        found.is_empty(),
        "faces writing around the engine's operations:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_check_sees_a_write_around_the_door() {
    assert_eq!(
        around_the_door("    let r = store.append_messages(source, &parsed)?;").as_deref(),
        Some("store.append_messages")
    );
    assert_eq!(
        around_the_door("    let r = self.engine.append(store, source, &parsed)?;"),
        None
    );
    assert_eq!(
        around_the_door("|s| engine.ingest_runs(s, source, r)"),
        None
    );
    assert_eq!(
        around_the_door("compile_namespace(&mut store, ns, &compiler)").as_deref(),
        Some("compile_namespace")
    );
    assert_eq!(around_the_door("// store.apply(x) is not called"), None);
}

/// The names of `Store`'s public methods: every `pub fn` of an `impl Store` block of the store
/// crate.
fn store_methods() -> Vec<String> {
    let mut files = Vec::new();
    sources(&root().join("crates/trajwiki-store/src"), &mut files);
    let mut names = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let mut in_store = false;
        for line in text.lines() {
            if line.starts_with("impl") || line.starts_with('}') {
                in_store = line.starts_with("impl Store {");
            } else if let Some(rest) = line.strip_prefix("    pub fn ").filter(|_| in_store) {
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                names.push(name);
            }
        }
    }
    names.sort();
    names.dedup();
    names
}

/// The `Store` methods `code` calls on a value named `store` (the chain may go over lines).
fn store_calls(code: &str, methods: &[String]) -> Vec<String> {
    let bytes = code.as_bytes();
    let ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(at) = code[from..].find("store") {
        let at = from + at;
        from = at + "store".len();
        // A value of that name, not a field (`args.store`) nor a longer name (`with_store`).
        if at > 0 && (ident(bytes[at - 1]) || bytes[at - 1] == b'.') {
            continue;
        }
        let after = code[from..].trim_start();
        let Some(call) = after.strip_prefix('.') else {
            continue;
        };
        let name: String = call
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if call[name.len()..].starts_with('(') && methods.contains(&name) {
            found.push(name);
        }
    }
    found
}

#[test]
fn the_faces_read_only_through_the_engine() {
    let methods = store_methods();
    assert!(
        ["pages", "namespaces", "message_by_ref", "append_messages"]
            .iter()
            .all(|m| methods.iter().any(|n| n == m)),
        "the store's methods were not found: {methods:?}"
    );
    let mut files = Vec::new();
    sources(&root().join("src"), &mut files);
    sources(&root().join("python/rust"), &mut files);
    let mut found = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let code: Vec<&str> = text
            .lines()
            .map(|l| l.split("//").next().unwrap_or(""))
            .collect();
        for call in store_calls(&code.join("\n"), &methods) {
            let shown = file.strip_prefix(root()).unwrap_or(file).display();
            found.push(format!("{shown}: store.{call}"));
        }
    }
    assert!(
        found.is_empty(),
        "faces reading the store around the engine's operations (see its `reads`):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_check_sees_a_read_around_the_door() {
    let methods: Vec<String> = ["pages", "message_by_ref"].map(String::from).to_vec();
    assert_eq!(
        store_calls("let p = store.pages(&ns)?;", &methods),
        ["pages"]
    );
    assert_eq!(
        store_calls("let m = store\n    .message_by_ref(&ns, id)?", &methods),
        ["message_by_ref"]
    );
    assert!(store_calls("engine.namespace(&ns).pages(store)", &methods).is_empty());
    assert!(store_calls("let s = args.store.pages();", &methods).is_empty());
    assert!(store_calls("self.with_store(|store| x)", &methods).is_empty());
    assert!(store_calls("let d = store.display();", &methods).is_empty());
}
