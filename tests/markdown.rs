//! `trajwiki wiki export` and `trajwiki trace export`: the folders of markdown files, read back
//! with a CommonMark parser. Every link is relative and resolves (to a file of the folder, and to
//! an anchor in it when it names one), every file is reachable from `index.md`, every record has
//! its file or anchor, outside text never becomes markup, the same memory gives the same bytes,
//! and a refused folder is left as it was.

mod common;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};

use common::{ok, s, trajwiki};
use pulldown_cmark::{Event, Parser, Tag};

/// The folder's markdown files by relative path.
fn files(dir: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let rel = path
                    .strip_prefix(dir)
                    .unwrap()
                    .to_str()
                    .unwrap()
                    .to_string();
                assert!(rel.ends_with(".md"), "{rel} is not markdown");
                out.insert(rel, std::fs::read_to_string(&path).unwrap());
            }
        }
    }
    out
}

/// What a parsed file holds: its link targets, its anchors (`<a id="…"></a>`), and any other
/// HTML, image or autolink in it.
struct Parsed {
    links: Vec<String>,
    anchors: BTreeSet<String>,
    foreign: Vec<String>,
}

fn parse(text: &str) -> Parsed {
    let mut p = Parsed {
        links: Vec::new(),
        anchors: BTreeSet::new(),
        foreign: Vec::new(),
    };
    for event in Parser::new(text) {
        match event {
            Event::Start(Tag::Link {
                dest_url,
                link_type,
                ..
            }) => {
                if link_type != pulldown_cmark::LinkType::Inline {
                    p.foreign.push(format!("{link_type:?} link {dest_url}"));
                }
                p.links.push(dest_url.to_string());
            }
            Event::Start(Tag::Image { dest_url, .. }) => {
                p.foreign.push(format!("image {dest_url}"))
            }
            Event::InlineHtml(html) | Event::Html(html) => {
                let html = html.trim();
                match html
                    .strip_prefix("<a id=\"")
                    .and_then(|r| r.strip_suffix("\">"))
                {
                    Some(id) => {
                        p.anchors.insert(id.to_string());
                    }
                    None if html == "</a>" => {}
                    None => p.foreign.push(format!("html {html}")),
                }
            }
            _ => {}
        }
    }
    p
}

/// `rel` joined to the folder of `from`, normalised (`..` resolved); `None` when it leaves the
/// export folder.
fn resolve(from: &str, rel: &str) -> Option<String> {
    let mut parts: Vec<&str> = from.split('/').collect();
    parts.pop();
    for part in rel.split('/') {
        match part {
            ".." => {
                parts.pop()?;
            }
            "." | "" => {}
            p => parts.push(p),
        }
    }
    Some(parts.join("/"))
}

/// Checks a whole export: links resolve, anchors exist, every file is reachable from the
/// index, nothing foreign. Returns the parsed files.
fn check_folder(dir: &Path) -> BTreeMap<String, Parsed> {
    let texts = files(dir);
    assert!(texts.contains_key("index.md"), "no index.md in {dir:?}");
    let parsed: BTreeMap<String, Parsed> =
        texts.iter().map(|(k, v)| (k.clone(), parse(v))).collect();
    for (file, p) in &parsed {
        assert!(p.foreign.is_empty(), "{file}: {:?}", p.foreign);
        for link in &p.links {
            assert!(
                !link.contains(':') && !link.starts_with('/'),
                "{file}: link {link} is not relative"
            );
            let (path, anchor) = match link.split_once('#') {
                Some((p, a)) => (p, Some(a)),
                None => (link.as_str(), None),
            };
            let target = if path.is_empty() {
                file.clone()
            } else {
                resolve(file, path).unwrap_or_else(|| panic!("{file}: {link} leaves the folder"))
            };
            let Some(t) = parsed.get(&target) else {
                panic!("{file}: link {link} to {target}, which is not in the export");
            };
            if let Some(a) = anchor {
                assert!(
                    t.anchors.contains(a),
                    "{file}: link {link}: no anchor {a} in {target}"
                );
            }
        }
    }
    // Every file is reachable from the index.
    let mut seen = BTreeSet::from(["index.md".to_string()]);
    let mut queue = VecDeque::from(["index.md".to_string()]);
    while let Some(file) = queue.pop_front() {
        for link in &parsed[&file].links {
            let path = link.split('#').next().unwrap();
            if path.is_empty() {
                continue;
            }
            let target = resolve(&file, path).unwrap();
            if seen.insert(target.clone()) {
                queue.push_back(target);
            }
        }
    }
    let unreachable: Vec<&String> = parsed.keys().filter(|f| !seen.contains(*f)).collect();
    assert!(
        unreachable.is_empty(),
        "not reachable from index.md: {unreachable:?}"
    );
    parsed
}

/// The records of one kind in `export --what memory` output.
fn records(memory: &str, kind: &str) -> Vec<serde_json::Value> {
    memory
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|r| r["record"] == kind)
        .map(|r| r["value"].clone())
        .collect()
}

const HOSTILE: &str = "Look [click me](javascript:alert(1)) and ![x](http://example.com/x.png) <img src=x onerror=alert(1)> **loud** `code` &lt; | cell";

#[test]
fn wiki_export_is_a_linked_folder_down_to_the_sources() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    ok(&["ingest", "--store", s(&store), s(&common::demo())]);
    // A message whose text and speaker try to be markup.
    let hostile = dir.path().join("hostile.jsonl");
    let line = serde_json::json!({
        "namespace": "demo", "session": 9, "seq": 1, "speaker": "<b>Mallory</b>",
        "text": HOSTILE, "timestamp": "2024-05-01T09:00:00", "ref": "S9:1",
    });
    std::fs::write(&hostile, format!("{line}\n")).unwrap();
    ok(&["ingest", "--store", s(&store), s(&hostile)]);
    ok(&[
        "build",
        "--store",
        s(&store),
        "--namespace",
        "demo",
        "--model",
        "hashing",
        "--flush",
        "-q",
    ]);
    let out = dir.path().join("wiki");
    ok(&[
        "wiki",
        "export",
        "--store",
        s(&store),
        "--namespace",
        "demo",
        s(&out),
        "-q",
    ]);
    let parsed = check_folder(&out);
    let texts = files(&out);

    // Every trajectory and current page has its file; every snapshot and claim an anchor in
    // its trajectory's file; every message an anchor in its session's file.
    let memory = ok(&[
        "export",
        "--store",
        s(&store),
        "--namespace",
        "demo",
        "--what",
        "memory",
    ]);
    let trajectories = records(&memory, "trajectory");
    assert!(trajectories.len() > 2);
    for t in &trajectories {
        let file = format!("trajectories/{}.md", t["id"].as_str().unwrap());
        let anchors = &parsed
            .get(&file)
            .unwrap_or_else(|| panic!("no {file}"))
            .anchors;
        for sid in t["snapshot_ids"].as_array().unwrap() {
            assert!(
                anchors.contains(sid.as_str().unwrap()),
                "{file}: no snapshot {sid}"
            );
        }
    }
    for snap in records(&memory, "snapshot") {
        let file = format!("trajectories/{}.md", snap["trajectory"].as_str().unwrap());
        for c in snap["claim_ids"].as_array().unwrap() {
            assert!(
                parsed[&file].anchors.contains(c.as_str().unwrap()),
                "{file}: no claim {c}"
            );
        }
    }
    let pages = records(&memory, "page");
    assert!(!pages.is_empty());
    for p in &pages {
        assert!(parsed.contains_key(&format!("pages/{}.md", p["id"].as_str().unwrap())));
    }
    // Each message has its anchor in its session's file, once.
    let message_anchors: Vec<&String> = parsed
        .iter()
        .filter(|(f, _)| f.starts_with("sources/"))
        .flat_map(|(_, p)| &p.anchors)
        .collect();
    assert_eq!(message_anchors.len(), 13, "{message_anchors:?}");
    let sessions = ok(&["export", "--store", s(&store), "--namespace", "demo"])
        .lines()
        .map(|m| {
            let m: serde_json::Value = serde_json::from_str(m).unwrap();
            format!("sources/session-{}.md", m["session"])
        })
        .collect::<BTreeSet<String>>();
    let session_files: BTreeSet<String> = parsed
        .keys()
        .filter(|f| f.starts_with("sources/"))
        .cloned()
        .collect();
    assert_eq!(session_files, sessions);
    // A trajectory's timeline links its snapshots' messages; the session file links back.
    let linked_to_sources = parsed
        .iter()
        .filter(|(f, _)| f.starts_with("trajectories/"))
        .all(|(_, p)| p.links.iter().any(|l| l.starts_with("../sources/session-")));
    assert!(linked_to_sources, "a trajectory without source links");
    assert!(parsed["sources/session-1.md"]
        .links
        .iter()
        .any(|l| l.starts_with("../trajectories/")));
    // Claim edits are shown with their kind.
    assert!(texts.values().any(|t| t.contains("**ADD**")));

    // Outside text stays text: the hostile message is there, escaped, and nothing in the
    // folder became a link, image or HTML of its own (check_folder found none).
    let session9 = &texts["sources/session-9.md"];
    assert!(
        session9.contains("\\[click me\\](javascript:alert(1))"),
        "{session9}"
    );
    assert!(session9.contains("\\<b\\>Mallory\\</b\\>"), "{session9}");
    assert!(session9.contains("\\<img src=x"), "{session9}");

    // The same memory gives the same bytes.
    let again = dir.path().join("again");
    ok(&[
        "wiki",
        "export",
        "--store",
        s(&store),
        "--namespace",
        "demo",
        s(&again),
        "-q",
    ]);
    assert_eq!(files(&again), texts);

    // Refused, exit 2, nothing written: a folder that is not empty, a folder inside the store,
    // a namespace that does not exist, one with no memory.
    let before = files(&out);
    for (target, ns, needle) in [
        (out.clone(), "demo", "not empty"),
        (store.join("md"), "demo", "inside the store"),
        (dir.path().join("x"), "nope", "no messages"),
    ] {
        let (code, _, err) = trajwiki(&[
            "wiki",
            "export",
            "--store",
            s(&store),
            "--namespace",
            ns,
            s(&target),
        ]);
        assert_eq!(code, 2, "{err}");
        assert!(err.contains(needle), "{err}");
        if target != out {
            assert!(!target.exists(), "{target:?} was created");
        }
    }
    assert_eq!(files(&out), before);
    let unbuilt = dir.path().join("unbuilt");
    ok(&["ingest", "--store", s(&unbuilt), s(&common::demo())]);
    let (code, _, err) = trajwiki(&[
        "wiki",
        "export",
        "--store",
        s(&unbuilt),
        "--namespace",
        "demo",
        s(&dir.path().join("y")),
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("build it first"), "{err}");
    // No partial folder is left beside the targets.
    let leftovers: Vec<PathBuf> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".partial"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    // An empty folder is written into.
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    ok(&[
        "wiki",
        "export",
        "--store",
        s(&store),
        "--namespace",
        "demo",
        s(&empty),
        "-q",
    ]);
    assert_eq!(files(&empty), texts);
}

#[test]
fn trace_export_descends_from_insight_to_run_steps() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("s");
    ok(&["ingest", "--store", s(&store), "tests/fixtures/runs.jsonl"]);
    let out = dir.path().join("runs");
    // The runs' `env` names their namespace.
    let ns = "kitchen";
    // Not compiled yet: refused.
    let (code, _, err) = trajwiki(&[
        "trace",
        "export",
        "--store",
        s(&store),
        "--namespace",
        ns,
        s(&out),
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("trace compile"), "{err}");
    assert!(!out.exists());
    ok(&["trace", "compile", "--store", s(&store), "-q"]);
    ok(&[
        "trace",
        "export",
        "--store",
        s(&store),
        "--namespace",
        ns,
        s(&out),
        "-q",
    ]);
    let parsed = check_folder(&out);
    let runs: Vec<&String> = parsed.keys().filter(|f| f.starts_with("runs/")).collect();
    assert_eq!(runs.len(), 3, "{runs:?}");
    let insights: Vec<&String> = parsed
        .keys()
        .filter(|f| f.starts_with("insights/"))
        .collect();
    assert!(!insights.is_empty());
    for file in &insights {
        let links = &parsed[*file].links;
        assert!(
            links.iter().any(|l| l.starts_with("../compilations/")),
            "{file}: {links:?}"
        );
        assert!(
            links.iter().any(|l| l.starts_with("../runs/")),
            "{file}: {links:?}"
        );
    }
    // Every step of every run has its anchor; cited steps link to them (check_folder resolved
    // every such link).
    for file in runs {
        let text = std::fs::read_to_string(out.join(file)).unwrap();
        let steps = text.matches("### Step ").count();
        assert!(steps > 0);
        for n in 1..=steps {
            assert!(
                parsed[file].anchors.contains(&format!("step-{n}")),
                "{file}: step {n}"
            );
        }
    }
    let cited = parsed
        .values()
        .flat_map(|p| &p.links)
        .filter(|l| l.contains("#step-"))
        .count();
    assert!(cited > 0, "no cited step is linked");
}
