//! Deletion for real, namespace isolation, read-only stores, queries that do not write, and
//! many processes on one store at once.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};

use common::{demo, occurrences, ok, s, stats, trajwiki};

/// The demo conversation under another namespace, with `marker` in its first message.
fn demo_as(dir: &Path, ns: &str, marker: &str) -> PathBuf {
    let text = std::fs::read_to_string(demo())
        .unwrap()
        .replace(
            "\"namespace\": \"demo\"",
            &format!("\"namespace\": \"{ns}\""),
        )
        .replacen("pottery workshop", &format!("{marker} workshop"), 1);
    let path = dir.join(format!("{ns}.jsonl"));
    std::fs::write(&path, text).unwrap();
    path
}

fn build(store: &Path, ns: &str) {
    common::build_hashing(s(store), ns);
}

/// `trajwiki delete` removes a namespace's text from every byte of every file of the store,
/// keeps the other namespaces whole, and refuses without `--yes`.
#[test]
fn deleted_text_is_in_no_file_of_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let marker = "QXZMARKERZXQ";
    ok(&["ingest", "--store", s(&store), s(&demo())]);
    ok(&[
        "ingest",
        "--store",
        s(&store),
        s(&demo_as(dir.path(), "secret", marker)),
    ]);
    build(&store, "demo");
    build(&store, "secret");
    let kept = ok(&[
        "export",
        "--store",
        s(&store),
        "--namespace",
        "demo",
        "--what",
        "memory",
    ]);
    assert!(occurrences(&store, marker.as_bytes()) > 0);

    let (code, _, err) = trajwiki(&["delete", "--store", s(&store), "--namespace", "secret"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--yes"), "{err}");
    assert!(
        occurrences(&store, marker.as_bytes()) > 0,
        "deleted without --yes"
    );

    let out = ok(&[
        "delete",
        "--store",
        s(&store),
        "--namespace",
        "secret",
        "--yes",
        "--json",
    ]);
    let deleted: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(deleted["existed"], true);
    assert_eq!(deleted["messages"], 12);
    assert_eq!(deleted["scrubbed"], true, "{out}");
    // The marker's message is the only text the other namespace does not share.
    assert!(deleted["embeddings"].as_u64().unwrap() >= 1, "{out}");
    assert_eq!(occurrences(&store, marker.as_bytes()), 0);
    assert_eq!(
        ok(&[
            "export",
            "--store",
            s(&store),
            "--namespace",
            "demo",
            "--what",
            "memory"
        ]),
        kept
    );
    ok(&["check", "--store", s(&store)]);
    let (code, _, err) = trajwiki(&[
        "delete",
        "--store",
        s(&store),
        "--namespace",
        "secret",
        "--yes",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("does not exist"), "{err}");
}

/// A record id resolves only inside the namespace a command names.
#[test]
fn ids_resolve_inside_the_named_namespace_only() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    ok(&["ingest", "--store", s(&store), s(&demo())]);
    ok(&[
        "ingest",
        "--store",
        s(&store),
        s(&demo_as(dir.path(), "other", "kiln")),
    ]);
    let shown: serde_json::Value = serde_json::from_str(&ok(&[
        "show",
        "--store",
        s(&store),
        "--namespace",
        "other",
        "S1:1",
        "--json",
    ]))
    .unwrap();
    let id = shown["id"].as_str().unwrap().to_string();
    assert!(ok(&["show", "--store", s(&store), "--namespace", "other", &id]).contains("kiln"));
    let (code, out, err) = trajwiki(&["show", "--store", s(&store), "--namespace", "demo", &id]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(!out.contains("kiln") && !err.contains("kiln"), "{out}{err}");
    assert!(err.contains(&id), "{err}");
}

/// A write-protected store, or one opened with --read-only, serves every read and is not
/// changed by any; a query leaves even a writable store byte for byte as it was.
#[test]
fn reads_never_write() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    ok(&["ingest", "--store", s(&store), s(&demo())]);
    ok(&[
        "build",
        "--store",
        s(&store),
        "--namespace",
        "demo",
        "--model",
        "hashing",
        "-q",
    ]);
    let db = store.join("trajwiki.db");
    let reads: Vec<Vec<&str>> = vec![
        vec!["stats"],
        vec!["check"],
        vec!["show", "--namespace", "demo", "S1:3"],
        vec![
            "query",
            "--namespace",
            "demo",
            "--model",
            "hashing",
            "what did Maya make?",
        ],
        vec!["export", "--namespace", "demo"],
        vec!["export", "--namespace", "demo", "--what", "memory"],
        vec!["wiki", "--namespace", "demo"],
    ];
    let run_reads = |extra: &[&str]| {
        for r in &reads {
            let mut args = r.clone();
            args.extend(["--store", s(&store)]);
            args.extend(extra);
            ok(&args);
        }
    };
    // Writable: a query caches nothing, the embeddings stay as the build left them.
    let embeddings = stats(&store)["embeddings"].clone();
    let before = std::fs::read(&db).unwrap();
    run_reads(&[]);
    assert_eq!(stats(&store)["embeddings"], embeddings);
    assert_eq!(
        std::fs::read(&db).unwrap(),
        before,
        "a read changed the database"
    );
    // --read-only: the same reads, and a write is refused with exit code 2.
    run_reads(&["--read-only"]);
    // Write-protected files: opened read only by themselves.
    let protect = |mode: u32| {
        use std::os::unix::fs::PermissionsExt;
        for p in [&db, &store] {
            let bits = if p.is_dir() { mode | 0o111 } else { mode };
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(bits)).unwrap();
        }
    };
    protect(0o444);
    run_reads(&[]);
    let (code, _, err) = trajwiki(&["ingest", "--store", s(&store), s(&demo())]);
    protect(0o644);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("read only"), "{err}");
    assert_eq!(
        std::fs::read(&db).unwrap(),
        before,
        "a read-only read changed the database"
    );
    ok(&["check", "--store", s(&store)]);
}

/// Four writers (ingest then build, each its own namespace, in several batches) and four
/// readers (stats, queries, exports in a loop) on one new store at once: every process succeeds,
/// nothing is lost, the store passes `check`, and each namespace's memory is the one a store of
/// its own builds.
#[test]
fn many_processes_share_a_store() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let names: Vec<String> = (0..4).map(|i| format!("w{i}")).collect();
    let inputs: Vec<PathBuf> = names
        .iter()
        .map(|ns| demo_as(dir.path(), ns, &format!("{ns}-marker")))
        .collect();
    // The reference: each namespace alone.
    let expected: Vec<String> = names
        .iter()
        .zip(&inputs)
        .map(|(ns, input)| {
            let alone = dir.path().join(format!("alone-{ns}"));
            ok(&["ingest", "--store", s(&alone), s(input)]);
            build(&alone, ns);
            ok(&[
                "export",
                "--store",
                s(&alone),
                "--namespace",
                ns,
                "--what",
                "memory",
            ])
        })
        .collect();
    let st = s(&store).to_string();
    let mut writers: Vec<Child> = Vec::new();
    for (ns, input) in names.iter().zip(&inputs) {
        let script = format!(
            "set -e; for i in 1 2 3; do \"$0\" ingest -q --store {st} {input}; \"$0\" build -q --store {st} --namespace {ns} --model hashing; done; \"$0\" build -q --store {st} --namespace {ns} --model hashing --flush",
            input = s(input),
        );
        writers.push(
            std::process::Command::new("sh")
                .args(["-c", &script, env!("CARGO_BIN_EXE_trajwiki")])
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap(),
        );
    }
    let mut readers: Vec<Child> = Vec::new();
    let tmp = s(dir.path());
    for r in 0..4 {
        let script = format!(
            "ok() {{ \"$@\" >/dev/null 2>{tmp}/reader-err-$$ || grep -q -e 'no trajwiki store' -e 'is not built' -e 'has no messages' -e 'does not exist' {tmp}/reader-err-$$ || {{ cat {tmp}/reader-err-$$ >&2; exit 1; }}; }}; for i in 1 2 3 4 5 6; do ok \"$0\" stats --store {st}; ok \"$0\" query --store {st} --namespace w{r} --model hashing 'what did Maya make'; ok \"$0\" export --store {st} --namespace w{r}; done; rm -f {tmp}/reader-err-$$"
        );
        readers.push(
            std::process::Command::new("sh")
                .args(["-c", &script, env!("CARGO_BIN_EXE_trajwiki")])
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap(),
        );
    }
    for (i, child) in writers.into_iter().chain(readers).enumerate() {
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "process {i} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    ok(&["check", "--store", s(&store)]);
    let st = stats(&store);
    assert_eq!(st["messages"], 48, "{st}");
    for (ns, want) in names.iter().zip(&expected) {
        let got = ok(&[
            "export",
            "--store",
            s(&store),
            "--namespace",
            ns,
            "--what",
            "memory",
        ]);
        assert_eq!(&got, want, "namespace {ns} differs from its build alone");
    }
}

/// Another program's SQLite database given as a store is refused, and left byte for byte as it
/// was: not switched to WAL mode, no log or shared-memory file made beside it.
#[test]
fn another_programs_database_is_left_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    std::fs::create_dir(&store).unwrap();
    let db = store.join("trajwiki.db");
    {
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.execute_batch("CREATE TABLE notes (body TEXT); INSERT INTO notes VALUES ('mine');")
            .unwrap();
    }
    let before = std::fs::read(&db).unwrap();
    for args in [
        vec!["stats", "--store", s(&store)],
        vec!["check", "--store", s(&store)],
        vec!["ingest", "--store", s(&store), s(&demo())],
    ] {
        let (code, _, err) = trajwiki(&args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(
            err.contains("not a trajwiki store") && err.contains("another program"),
            "{err}"
        );
    }
    assert_eq!(std::fs::read(&db).unwrap(), before);
    let mut names: Vec<String> = std::fs::read_dir(&store)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["trajwiki.db"]);
}

/// Three builds of one namespace at once: all succeed (the later ones wait, or build again from
/// where the first left the fold), and the memory is the one a single build makes.
#[test]
fn parallel_builds_of_one_namespace_agree() {
    let dir = tempfile::tempdir().unwrap();
    let (store, alone) = (dir.path().join("store"), dir.path().join("alone"));
    for s_ in [&store, &alone] {
        ok(&["ingest", "--store", s(s_), s(&demo())]);
    }
    build(&alone, "demo");
    let builds: Vec<_> = (0..3)
        .map(|_| {
            common::bin()
                .args(["build", "-q", "--store", s(&store), "--namespace", "demo"])
                .args(["--model", "hashing", "--flush"])
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for child in builds {
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let export = |st: &Path| {
        ok(&[
            "export",
            "--store",
            s(st),
            "--namespace",
            "demo",
            "--what",
            "memory",
        ])
    };
    assert_eq!(export(&store), export(&alone));
    ok(&["check", "--store", s(&store)]);
}

/// Two processes appending to one namespace and building it, one message a run, side by side:
/// every run succeeds (a build reads the fold as one commit left it, never half of one and half
/// of the next; builds of the namespace take turns, so none loses its commit to the other run
/// after run, as one did seventeen times in a row on a loaded CI machine), and the memory is
/// the one the same messages ingested and built at once make. Issue 49 saw 57 of 1,069 such
/// runs end in a panic (wiki.rs:219, an index out of bounds) after their message was stored.
#[test]
fn two_processes_appending_and_building_one_namespace_all_succeed() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    // Process `who` writes session `2 + who` (a file's message without `seq` would take its
    // line's place, the same in every file); session 1 is there before.
    const FIRST: usize = 1500;
    const RUNS: usize = 60;
    let message = |session: usize, i: usize| {
        let speaker = ["Maya", "Leo"][i % 2];
        serde_json::json!({
            "namespace": "duo", "session": session, "seq": i + 1, "speaker": speaker,
            "text": format!("Session {session}, turn {i}: I walked {} to the {} and painted {}.",
                ["the dog", "Biscuit", "my sister"][i % 3], ["harbour", "park", "beach", "Lisbon"][i % 4],
                ["roses", "tulips", "a boat", "the sea", "bread"][i % 5]),
            "timestamp": format!("2024-01-0{session}T10:{:02}:00", i % 60),
        })
    };
    let first = dir.path().join("first.jsonl");
    // A history long enough that a build's reads take a while beside the other's commits.
    let history: String = (0..FIRST).map(|i| format!("{}\n", message(1, i))).collect();
    std::fs::write(&first, history).unwrap();
    let (code, _, err) = ingest_built(&store, &first);
    assert_eq!(code, 0, "{err}");
    let runs: Vec<_> = (0..2)
        .map(|who| {
            let (store, dir) = (store.clone(), dir.path().to_path_buf());
            std::thread::spawn(move || {
                let mut failures = Vec::new();
                for i in 0..RUNS {
                    let file = dir.join(format!("p{who}-{i}.jsonl"));
                    std::fs::write(&file, format!("{}\n", message(2 + who, i))).unwrap();
                    let (code, _, err) = ingest_built(&store, &file);
                    if code != 0 {
                        failures.push(format!("process {who}, run {i}: exit {code}: {err}"));
                    }
                }
                failures
            })
        })
        .collect();
    let failures: Vec<String> = runs.into_iter().flat_map(|r| r.join().unwrap()).collect();
    assert!(
        failures.is_empty(),
        "{} of {} runs failed:\n{}",
        failures.len(),
        2 * RUNS,
        failures.join("\n")
    );
    ok(&["check", "--store", s(&store)]);
    // The same messages, in the order they were stored, ingested and built at once.
    let ns = trajwiki::core::Namespace::new("duo").unwrap();
    let arrived: Vec<trajwiki::core::SourceMessage> = trajwiki::store::Store::open(&store)
        .unwrap()
        .messages_after(&ns, 0)
        .unwrap()
        .into_iter()
        .map(|(_, m)| m)
        .collect();
    assert_eq!(arrived.len(), FIRST + 2 * RUNS);
    let messages = dir.path().join("messages.jsonl");
    let mut out = std::fs::File::create(&messages).unwrap();
    trajwiki::ingest::jsonl::write_messages(&mut out, &arrived).unwrap();
    let alone = dir.path().join("alone");
    let (code, _, err) = ingest_built(&alone, &messages);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        common::export_memory(s(&store), "duo"),
        common::export_memory(s(&alone), "duo")
    );
}

/// A vector file cut to half its length by another process under a live server: the next
/// search of its namespace answers as a server started now would (the index is loaded again and
/// the short file left aside), the other namespace answers as before, and the process lives
/// (before issue 49 it died of SIGBUS, every namespace with it). `check` reports the file; a
/// build writes it again.
#[test]
fn a_vector_file_cut_under_a_live_server_is_read_around() {
    let dir = tempfile::tempdir().unwrap();
    let store = common::demo_store(dir.path());
    ok(&[
        "ingest",
        "--store",
        s(&store),
        s(&demo_as(dir.path(), "other", "pottery")),
    ]);
    build(&store, "other");
    let search = |url: &str, ns: &str| {
        let (status, mut answer) = common::http(
            &format!("{url}/v1/namespaces/{ns}/search"),
            Some(r#"{"question": "Where is the pottery workshop?", "budget": 300}"#),
            None,
        );
        assert_eq!(status, 200, "{ns}: {answer}");
        answer.as_object_mut().unwrap().remove("timings");
        answer["ranking"].as_object_mut().unwrap().remove("timings");
        answer.as_object_mut().unwrap().remove("embedded_on_load");
        answer
    };
    let server = common::serve_hashing(s(&store), &[]);
    let other_before = search(&server.url, "other");
    search(&server.url, "demo");
    // The demo namespace's vector file, as the store records it.
    let ns = trajwiki::core::Namespace::new("demo").unwrap();
    let file = trajwiki::store::Store::open(&store)
        .unwrap()
        .vector_file(&ns, "hashing-384")
        .unwrap()
        .expect("the build wrote a vector file")
        .path;
    let len = std::fs::metadata(&file).unwrap().len();
    assert!(
        len > 8192,
        "{len} bytes: more than two pages, so that half loses one"
    );
    std::fs::OpenOptions::new()
        .write(true)
        .open(&file)
        .unwrap()
        .set_len(len / 2)
        .unwrap();
    let after = search(&server.url, "demo");
    assert_eq!(search(&server.url, "other"), other_before);
    let cold = common::serve_hashing(s(&store), &[]);
    assert_eq!(after, search(&cold.url, "demo"));
    drop((server, cold));
    let (code, out, _) = trajwiki(&["check", "--store", s(&store)]);
    assert_ne!(code, 0, "check passes a cut vector file: {out}");
    build(&store, "demo");
    ok(&["check", "--store", s(&store)]);
}

/// `trajwiki ingest --build` of `file` into `store` with the hashing model: (exit code, stdout,
/// stderr).
fn ingest_built(store: &Path, file: &Path) -> (i32, String, String) {
    trajwiki(&[
        "ingest",
        "--store",
        s(store),
        "--build",
        "--model",
        "hashing",
        "-q",
        s(file),
    ])
}

/// `trajwiki` run as the unprivileged user 65534 (root ignores file modes, so only another
/// user sees a store it may not write); `None`, with a SKIP message, where this process cannot
/// change users or that user cannot run the binary.
fn as_nobody(args: &[&str]) -> Option<(i32, String, String)> {
    let out = std::process::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(env!("CARGO_BIN_EXE_trajwiki"))
        .args(args)
        .output();
    match out {
        Ok(o) if o.status.code() != Some(127) && o.status.code() != Some(126) => Some((
            o.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )),
        Ok(o) => {
            eprintln!(
                "SKIP: user 65534 cannot run {}: {}",
                env!("CARGO_BIN_EXE_trajwiki"),
                String::from_utf8_lossy(&o.stderr)
            );
            None
        }
        Err(e) => {
            eprintln!("SKIP: setpriv cannot run here: {e}");
            None
        }
    }
}

/// A store of another user's (built by root, read by user 65534): write-protected by its modes,
/// or only by its owner; either way reads succeed (with and without `--read-only`), a write is
/// refused as a write to a read-only store, and no message calls the store damaged.
#[test]
fn another_users_store_is_read() {
    let probe = as_nobody(&["--version"]);
    match &probe {
        None => return,
        Some((0, _, _)) => {}
        Some((code, _, err)) => {
            eprintln!("SKIP: setpriv cannot switch to user 65534 here (exit {code}): {err}");
            return;
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let built = common::demo_store(dir.path());
    let chmod = |mode: &str, path: &Path| {
        let st = std::process::Command::new("chmod")
            .args(["-R", mode, s(path)])
            .status()
            .unwrap();
        assert!(st.success());
    };
    // A temporary folder everyone may enter, holding a copy of the store per case.
    chmod("0755", dir.path());
    let copy = |name: &str| {
        let to = dir.path().join(name);
        let st = std::process::Command::new("cp")
            .args(["-r", s(&built), s(&to)])
            .status()
            .unwrap();
        assert!(st.success());
        to
    };
    // The input to refuse, where user 65534 can read it (a checkout may lie in a folder only
    // its owner may enter, as `mktemp -d` makes).
    let input = dir.path().join("demo.jsonl");
    std::fs::copy(demo(), &input).unwrap();
    chmod("a+r", &input);
    let by_mode = copy("protected");
    chmod("a-w,a+rX", &by_mode);
    let by_owner = copy("owned");
    chmod("u+w,go-w,a+rX", &by_owner);
    for store in [&by_mode, &by_owner] {
        let before = std::fs::read(store.join("trajwiki.db")).unwrap();
        let reads: [&[&str]; 4] = [
            &[
                "query",
                "--namespace",
                "demo",
                "--model",
                "hashing",
                "pottery",
            ],
            &["export", "--namespace", "demo"],
            &["stats"],
            &["show", "--namespace", "demo", "S1:3"],
        ];
        for extra in [&["--read-only"][..], &[]] {
            for read in reads {
                let mut args = read.to_vec();
                args.extend(["--store", s(store)]);
                args.extend(extra);
                let (code, out, err) = as_nobody(&args).unwrap();
                assert_eq!(code, 0, "{args:?} as user 65534: {err}");
                assert!(!out.is_empty(), "{args:?}");
            }
        }
        let (code, _, err) = as_nobody(&["ingest", "--store", s(store), s(&input)]).unwrap();
        assert_eq!(code, 2, "{err}");
        assert!(err.contains("read only"), "{err}");
        assert!(!err.contains("damaged"), "{err}");
        assert_eq!(std::fs::read(store.join("trajwiki.db")).unwrap(), before);
    }
}

/// A small tmpfs mounted for a test, unmounted when dropped; `None` (with a SKIP message) where
/// this process may not mount one (not root, no mount permission in a container).
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    fn mount(size: &str) -> Option<Tmpfs> {
        let dir = tempfile::tempdir().unwrap();
        let out = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .output();
        match out {
            Ok(o) if o.status.success() => Some(Tmpfs { dir }),
            Ok(o) => {
                eprintln!(
                    "SKIP: cannot mount a tmpfs to fill up here: {}",
                    String::from_utf8_lossy(&o.stderr).trim()
                );
                None
            }
            Err(e) => {
                eprintln!("SKIP: cannot run mount here: {e}");
                None
            }
        }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Fills the file system up to `keep` bytes left free (`fill` holds the rest).
    fn fill_leaving(&self, keep: u64) {
        let filler = self.path().join("fill");
        let _ = std::fs::remove_file(&filler);
        let out = std::process::Command::new("df")
            .args(["-B1", "--output=avail"])
            .arg(self.path())
            .output()
            .unwrap();
        let avail: u64 = String::from_utf8_lossy(&out.stdout)
            .lines()
            .nth(1)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let file = std::fs::File::create(&filler).unwrap();
        // Written, not sparse: tmpfs counts written pages.
        let mut left = avail.saturating_sub(keep);
        let chunk = vec![0u8; 1 << 16];
        let mut w = std::io::BufWriter::new(file);
        while left > 0 {
            let n = left.min(chunk.len() as u64) as usize;
            if std::io::Write::write_all(&mut w, &chunk[..n]).is_err() {
                break;
            }
            left -= n as u64;
        }
        let _ = std::io::Write::flush(&mut w);
    }

    fn unfill(&self) {
        let _ = std::fs::remove_file(self.path().join("fill"));
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg(self.dir.path())
            .status();
    }
}

/// Copies the store directory `from` to `to` (replacing it).
fn copy_store(from: &Path, to: &Path) {
    let _ = std::fs::remove_dir_all(to);
    let st = std::process::Command::new("cp")
        .args(["-r", s(from), s(to)])
        .status()
        .unwrap();
    assert!(st.success());
}

/// The demo conversation and a `secret` namespace (with `marker`), built, in `dir/pristine`: a
/// store to copy onto a small disk before each try.
fn pristine_store(dir: &Path, marker: &str) -> PathBuf {
    let pristine = dir.join("pristine");
    ok(&["ingest", "--store", s(&pristine), s(&demo())]);
    ok(&[
        "ingest",
        "--store",
        s(&pristine),
        s(&demo_as(dir, "secret", marker)),
    ]);
    build(&pristine, "secret");
    pristine
}

/// A search of `ns` in `store` as `query --json` answers it (without its timings), and whether
/// its load read the namespace's index segment.
fn search(store: &Path, ns: &str) -> (serde_json::Value, bool) {
    let out = ok(&[
        "query",
        "--store",
        s(store),
        "--namespace",
        ns,
        "--model",
        "hashing",
        "--json",
        "Where is the pottery workshop?",
    ]);
    let mut answer: serde_json::Value = serde_json::from_str(&out).unwrap();
    let o = answer.as_object_mut().unwrap();
    let timings = o.remove("timings_ms").expect("a query says its timings");
    o.remove("embedded_on_load");
    let stages = timings["index_load_stages"].as_object().unwrap();
    (answer, stages.contains_key("segment"))
}

/// A delete on a full disk names it: the delete is refused whole, or done with its freed space
/// not overwritten, which it says (never "another process is reading") and fails until
/// `delete --scrub` has overwritten it. Refused whole, it leaves the namespace as it was, its
/// index segment included (issue 49, item 6: the segment was removed before the transaction
/// that then failed), and a search answers as before, from the segment.
#[test]
fn a_delete_on_a_full_disk_says_so_until_its_text_is_gone() {
    let Some(disk) = Tmpfs::mount("8m") else {
        return;
    };
    let marker = "QXZMARKERZXQ";
    let scratch = tempfile::tempdir().unwrap();
    let pristine = pristine_store(scratch.path(), marker);
    let segment = {
        let opened = trajwiki::store::Store::open_read_only(&pristine).unwrap();
        let ns = trajwiki::core::Namespace::new("secret").unwrap();
        let path = opened.segment_path(&ns, "hashing-384").unwrap();
        path.strip_prefix(&pristine).unwrap().to_path_buf()
    };
    let segment_bytes = std::fs::read(pristine.join(&segment)).unwrap();
    let (answer, from_segment) = search(&pristine, "secret");
    assert!(
        from_segment,
        "the pristine store's search reads its segment"
    );
    let store = disk.path().join("store");
    let mut unscrubbed = 0;
    let mut refused = 0;
    // The free space at which the delete commits but its overwrite does not fit is a window a
    // few tens of KB wide, whose place moves with the schema (indexes, tables): swept finely.
    for keep_kb in (10..=1600).rev().step_by(10) {
        copy_store(&pristine, &store);
        disk.fill_leaving(keep_kb * 1024);
        let (code, out, err) = trajwiki(&[
            "delete",
            "--store",
            s(&store),
            "--namespace",
            "secret",
            "--yes",
        ]);
        disk.unfill();
        assert!(!err.contains("another process"), "{keep_kb} KB free: {err}");
        if code == 0 {
            assert_eq!(
                occurrences(&store, marker.as_bytes()),
                0,
                "{keep_kb} KB: {out}"
            );
            continue;
        }
        assert_eq!(code, 1, "{keep_kb} KB free: {err}");
        assert!(
            err.contains("disk holding the store is full"),
            "{keep_kb} KB free: {err}"
        );
        if out.contains("deleted namespace secret") {
            // Deleted, not yet overwritten: said, and finished by --scrub once there is space.
            unscrubbed += 1;
            assert!(err.contains("its text is still in the files"), "{err}");
            assert!(err.contains("--scrub"), "{err}");
            ok(&["delete", "--store", s(&store), "--scrub"]);
            assert_eq!(occurrences(&store, marker.as_bytes()), 0);
        } else {
            // Refused whole: the namespace is as it was, its segment too.
            refused += 1;
            assert!(stats(&store)["messages"].as_u64() == Some(24), "{err}");
            let kept = std::fs::read(store.join(&segment)).ok();
            assert!(
                kept.as_ref() == Some(&segment_bytes),
                "{keep_kb} KB free: the segment is {}: {err}",
                if kept.is_some() { "changed" } else { "gone" }
            );
            assert_eq!(search(&store, "secret"), (answer.clone(), true));
        }
        ok(&["check", "--store", s(&store)]);
    }
    assert!(
        unscrubbed > 0,
        "no amount of free space left a delete done but not overwritten"
    );
    assert!(
        refused > 0,
        "no amount of free space refused a delete whole"
    );
}

/// `DELETE /v1/namespaces/{ns}` on a full disk: either done and overwritten (200, `scrubbed`),
/// or 507 `storage_full` saying that the text is still in the files; never a silent success.
#[test]
fn an_http_delete_on_a_full_disk_says_so() {
    let Some(disk) = Tmpfs::mount("8m") else {
        return;
    };
    let marker = "QXZMARKERZXQ";
    let scratch = tempfile::tempdir().unwrap();
    let pristine = pristine_store(scratch.path(), marker);
    let store = disk.path().join("store");
    let mut unscrubbed = 0;
    for keep_kb in (100..=400).rev().step_by(10) {
        copy_store(&pristine, &store);
        let server = common::serve_hashing(s(&store), &[]);
        disk.fill_leaving(keep_kb * 1024);
        let answer = ureq::delete(&format!("{}/v1/namespaces/secret", server.url)).call();
        disk.unfill();
        drop(server);
        let (status, body): (u16, serde_json::Value) = match answer {
            Ok(r) => (
                r.status(),
                serde_json::from_str(&r.into_string().unwrap()).unwrap(),
            ),
            Err(ureq::Error::Status(code, r)) => (
                code,
                serde_json::from_str(&r.into_string().unwrap()).unwrap(),
            ),
            Err(e) => panic!("{keep_kb} KB free: {e}"),
        };
        if status == 200 {
            assert_eq!(body["scrubbed"], true, "{keep_kb} KB free: {body}");
            assert_eq!(occurrences(&store, marker.as_bytes()), 0, "{body}");
            continue;
        }
        assert_eq!(status, 507, "{keep_kb} KB free: {body}");
        assert_eq!(body["error"]["code"], "storage_full", "{body}");
        if body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("still hold its text")
        {
            unscrubbed += 1;
            ok(&["delete", "--store", s(&store), "--scrub"]);
            assert_eq!(occurrences(&store, marker.as_bytes()), 0);
        }
        ok(&["check", "--store", s(&store)]);
    }
    assert!(
        unscrubbed > 0,
        "no amount of free space left a delete done but not overwritten"
    );
}

/// An append over HTTP on a full disk: 507 `storage_full`, nothing stored.
#[test]
fn an_append_on_a_full_disk_is_507_storage_full() {
    let Some(disk) = Tmpfs::mount("8m") else {
        return;
    };
    let scratch = tempfile::tempdir().unwrap();
    let store = disk.path().join("store");
    copy_store(&pristine_store(scratch.path(), "unused"), &store);
    let server = common::serve_hashing(s(&store), &[]);
    let big = "word ".repeat(40_000);
    let body = serde_json::json!({"messages": [{"speaker": "Ann", "text": big, "timestamp": "2024-05-01T10:00:00"}], "build": false});
    disk.fill_leaving(0);
    let (status, report) = common::http(
        &format!("{}/v1/namespaces/demo/messages", server.url),
        Some(&body.to_string()),
        None,
    );
    disk.unfill();
    assert_eq!(status, 507, "{report}");
    assert_eq!(report["error"]["code"], "storage_full", "{report}");
    drop(server);
    assert_eq!(stats(&store)["messages"].as_u64(), Some(24));
}

/// An append with a build over HTTP, on a disk filling up at every point of the write: the
/// reply says what was stored. An error stored nothing; 200 stored and built; 202 stored, and
/// `not_done` names the step that did not follow (the build, the vector file) with its code.
/// Issue 49 saw 8 of 30 appends answered `507 storage_full … try again` stored.
#[test]
fn an_append_on_a_filling_disk_says_what_it_stored() {
    let Some(disk) = Tmpfs::mount("8m") else {
        return;
    };
    let scratch = tempfile::tempdir().unwrap();
    let pristine = common::demo_store(scratch.path());
    let held = stats(&pristine)["messages"].as_u64().unwrap();
    let store = disk.path().join("store");
    // A question and its reply: the exchange closes, so the build commits and writes vectors.
    let body = serde_json::json!({"messages": [
        {"speaker": "Ann", "text": format!("Where did you hang the painting? {}", "word ".repeat(400)), "timestamp": "2024-05-01T10:00:00"},
        {"speaker": "Ben", "text": format!("In the hallway, beside the mirror. {}", "word ".repeat(400)), "timestamp": "2024-05-01T10:01:00"},
    ], "build": true});
    let mut seen = std::collections::BTreeMap::<String, usize>::new();
    for keep_kb in (0..=400).step_by(8) {
        copy_store(&pristine, &store);
        let server = common::serve_hashing(s(&store), &[]);
        disk.fill_leaving(keep_kb * 1024);
        let (status, reply) = common::http(
            &format!("{}/v1/namespaces/demo/messages", server.url),
            Some(&body.to_string()),
            None,
        );
        disk.unfill();
        drop(server);
        let now = stats(&store)["messages"].as_u64().unwrap();
        let kind = match status {
            200 => {
                assert!(reply.get("not_done").is_none(), "{keep_kb} KB: {reply}");
                assert!(reply["built"].is_object(), "{keep_kb} KB: {reply}");
                "200".to_string()
            }
            202 => {
                let code = reply["not_done"]["code"].as_str().unwrap_or_default();
                assert!(!code.is_empty(), "{keep_kb} KB: {reply}");
                format!("202 {} {code}", reply["not_done"]["step"])
            }
            _ => {
                assert_eq!(
                    now, held,
                    "{keep_kb} KB free: answered {status} but stored: {reply}"
                );
                format!("{status} {}", reply["error"]["code"])
            }
        };
        if status == 200 || status == 202 {
            assert_eq!(reply["added"], 2, "{keep_kb} KB: {reply}");
            assert_eq!(now, held + 2, "{keep_kb} KB: answered {status}: {reply}");
        }
        *seen.entry(kind).or_default() += 1;
        ok(&["check", "--store", s(&store)]);
    }
    eprintln!("replies by free space: {seen:?}");
    assert!(seen.contains_key("200"), "{seen:?}");
    assert!(seen.keys().any(|k| !k.starts_with("200")), "{seen:?}");
}

/// An append that asks for a build the server cannot make (its model is not the namespace's)
/// is refused before anything is stored: a retry stores nothing more.
#[test]
fn an_append_whose_build_cannot_run_stores_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = common::demo_store(dir.path());
    let held = stats(&store)["messages"].as_u64().unwrap();
    // Another model than the namespace's (hashing is hashing-384).
    let mut child = common::bin()
        .args([
            "serve",
            "--store",
            s(&store),
            "--port",
            "0",
            "--model",
            "hashing-256",
        ])
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let url = common::listening_url(&mut child);
    let server = common::Served { child, url };
    let body = serde_json::json!({"messages": [{"speaker": "Ann", "text": "I moved to Porto.", "timestamp": "2024-05-01T10:00:00"}]});
    for _ in 0..3 {
        let (status, reply) = common::http(
            &format!("{}/v1/namespaces/demo/messages", server.url),
            Some(&body.to_string()),
            None,
        );
        assert_eq!(status, 409, "{reply}");
        assert_eq!(reply["error"]["code"], "stale", "{reply}");
    }
    drop(server);
    assert_eq!(stats(&store)["messages"].as_u64(), Some(held));
}

/// `trace compile` on a disk that fills part way says how many compilations it committed;
/// compiling again does the rest.
#[test]
fn trace_compile_on_a_full_disk_says_what_it_committed() {
    let Some(disk) = Tmpfs::mount("8m") else {
        return;
    };
    let scratch = tempfile::tempdir().unwrap();
    let store = disk.path().join("store");
    let runs = scratch.path().join("runs.jsonl");
    let mut lines = String::new();
    for i in 0..36 {
        let steps: Vec<serde_json::Value> = (0..6)
            .map(|j| serde_json::json!({"action": format!("step {j} of run {i}"), "observation": format!("observation {j} of run {i}: {}", "the room is quiet ".repeat(150))}))
            .collect();
        let run = serde_json::json!({"id": format!("r{i}"), "env": "lab", "task": format!("task {i}: find the key"), "success": i % 2 == 0, "steps": steps});
        lines.push_str(&format!("{run}\n"));
    }
    std::fs::write(&runs, lines).unwrap();
    ok(&["ingest", "--store", s(&store), s(&runs)]);
    disk.fill_leaving(160 * 1024);
    let (code, _, err) = trajwiki(&["trace", "compile", "--store", s(&store), "-q"]);
    disk.unfill();
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("disk holding the store is full"), "{err}");
    let committed = stats(&store)["compilations"].as_u64().unwrap();
    assert!(
        0 < committed && committed < 36,
        "{committed} committed: {err}"
    );
    assert!(
        err.contains(&format!("{committed} of 36 compilations are committed")),
        "{committed} committed: {err}"
    );
    ok(&["trace", "compile", "--store", s(&store), "-q"]);
    assert_eq!(stats(&store)["compilations"].as_u64(), Some(36));
}

/// Opening a store on a disk with no room left names the full disk, not a "disk I/O error".
#[test]
fn opening_a_store_on_a_full_disk_names_it() {
    let Some(disk) = Tmpfs::mount("4m") else {
        return;
    };
    let store = disk.path().join("store");
    ok(&["ingest", "--store", s(&store), s(&demo())]);
    disk.fill_leaving(0);
    let (code, _, err) = trajwiki(&["stats", "--store", s(&store)]);
    disk.unfill();
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("disk holding the store is full"), "{err}");
    ok(&["stats", "--store", s(&store)]);
}

/// A store moved while served (issue 49, item 5): the server's database connection follows the
/// move, its paths do not, so an append after `mv` wrote the database at the new place and the
/// vector files into a `vectors/` folder made again at the old one, and answered 200. Now every
/// write once the path no longer leads to the directory the server opened is 503 `store_moved`,
/// nothing is made at the old place, and the moved store is sound; a directory put in the old
/// place (a copy: another store at the same path) is refused the same way and left as it is.
#[test]
fn a_store_moved_or_replaced_while_served_refuses_writes() {
    let dir = tempfile::tempdir().unwrap();
    let store = common::demo_store(dir.path());
    let server = common::serve_hashing(s(&store), &[]);
    let append = |server: &common::Served, text: &str| {
        let body = serde_json::json!({
            "messages": [{"session": 3, "speaker": "Ann", "text": text,
                          "timestamp": "2024-05-01T10:00:00"}],
            "build": true, "flush": true,
        });
        common::http(
            &format!("{}/v1/namespaces/demo/messages", server.url),
            Some(&body.to_string()),
            None,
        )
    };
    let refused = |(status, body): (u16, serde_json::Value)| {
        assert_eq!(status, 503, "{body}");
        assert_eq!(body["error"]["code"], "store_moved", "{body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains("moved or replaced"), "{message}");
    };
    let (status, body) = append(&server, "Before the move I glazed a bowl.");
    assert_eq!(status, 200, "{body}");

    let moved = dir.path().join("moved");
    std::fs::rename(&store, &moved).unwrap();
    refused(append(&server, "After the move I glazed a cup."));
    assert!(!store.exists(), "something was made at the old place");
    ok(&["check", "--store", s(&moved)]);
    assert_eq!(stats(&moved)["messages"].as_u64(), Some(13));

    // Another directory at the old path: the server's connections lead to the moved store,
    // new ones would open the copy; neither is written.
    copy_store(&moved, &store);
    let before = std::fs::read(store.join("trajwiki.db")).unwrap();
    refused(append(&server, "In the copy I glazed a plate."));
    assert_eq!(std::fs::read(store.join("trajwiki.db")).unwrap(), before);
    assert_eq!(stats(&store)["messages"].as_u64(), Some(13));
    drop(server);

    // Served at its new place, the store takes appends again.
    let server = common::serve_hashing(s(&moved), &[]);
    let (status, body) = append(&server, "At the new place I glazed a vase.");
    assert_eq!(status, 200, "{body}");
    drop(server);
    ok(&["check", "--store", s(&moved)]);
    assert_eq!(stats(&moved)["messages"].as_u64(), Some(14));
}
