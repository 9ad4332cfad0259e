//! `--device`: `cpu` changes nothing (byte-identical `retrieval.jsonl` but for latencies on one
//! LoCoMo conversation), `cuda` without a usable GPU is a clear usage error (exit code 2, no
//! panic), a bad value is rejected, and `stats --json` reports the backend.

mod common;

use std::path::Path;

/// `retrieval.jsonl` with every line's `latency_ms` removed.
fn without_latency(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| {
            let mut v: serde_json::Map<String, serde_json::Value> =
                serde_json::from_str(l).unwrap();
            assert!(v.remove("latency_ms").is_some(), "no latency_ms in {l}");
            serde_json::to_string(&v).unwrap()
        })
        .collect()
}

fn cuda_usable() -> bool {
    trajwiki::cuda::probe(0).is_ok()
}

#[test]
fn device_cpu_gives_the_same_retrieval_as_the_default() {
    let Some(locomo) = common::shared_data("locomo/locomo7.json") else {
        return;
    };
    if cuda_usable() {
        // The default (auto) would score on the GPU; the comparison is about the CPU path.
        eprintln!("skipping: a GPU is usable here, so the default is not the CPU");
        return;
    }
    let all: Vec<serde_json::Value> =
        serde_json::from_slice(&std::fs::read(&locomo).unwrap()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("one.json");
    std::fs::write(&data, serde_json::to_vec(&all[..1]).unwrap()).unwrap();
    let run = |name: &str, extra: &[&str]| {
        let out = dir.path().join(name);
        let mut args = vec!["-q"];
        args.extend_from_slice(extra);
        common::eval_locomo(&data, &out, &[700, 2700], &["full", "turn-hybrid"], &args);
        without_latency(&out.join("retrieval.jsonl"))
    };
    let default = run("default", &[]);
    let cpu = run("cpu", &["--device", "cpu"]);
    assert!(!default.is_empty());
    assert_eq!(default.len(), cpu.len());
    for (i, (a, b)) in default.iter().zip(&cpu).enumerate() {
        assert_eq!(a, b, "retrieval.jsonl line {} differs", i + 1);
    }
}

#[test]
fn device_cuda_without_a_gpu_is_a_usage_error() {
    if cuda_usable() {
        eprintln!("skipping: a GPU is usable here");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let store = store.to_str().unwrap();
    common::ok(&[
        "ingest",
        "--store",
        store,
        common::demo().to_str().unwrap(),
        "-q",
    ]);
    common::ok(&["build", "--store", store, "--model", "hashing", "-q"]);
    let ns = common::stats(Path::new(store))["per_namespace"][0]["namespace"]
        .as_str()
        .unwrap()
        .to_string();
    for args in [
        vec!["--device", "cuda", "stats", "--store", store, "--json"],
        vec![
            "query",
            "--device",
            "cuda",
            "--store",
            store,
            "--namespace",
            &ns,
            "--model",
            "hashing",
            "where?",
        ],
    ] {
        let (code, _, err) = common::trajwiki(&args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains("--device cuda"), "{err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    // Embedding with Qwen3 on `cuda`: the same clear error; on `auto`: the CPU model.
    let qwen3 = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("crates/trajwiki-embed/tests/fixtures/qwen3_tiny");
    let texts = dir.path().join("texts.txt");
    std::fs::write(&texts, "hello\nworld\n").unwrap();
    let embed = |device: &str| {
        common::trajwiki(&[
            "--device",
            device,
            "embed",
            "--model",
            qwen3.to_str().unwrap(),
            "--input",
            texts.to_str().unwrap(),
        ])
    };
    let (code, _, err) = embed("cuda");
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("--device cuda: cannot run the model on CUDA"),
        "{err}"
    );
    let (code, out, err) = embed("auto");
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.lines().count(), 2, "{out}");

    let (code, _, err) = common::trajwiki(&["--device", "tpu", "stats", "--store", store]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("expected cuda, cpu or auto"), "{err}");

    let stats = common::stats(Path::new(store));
    assert_eq!(stats["compute"]["device"], "auto");
    assert_eq!(stats["compute"]["scoring_backend"], "cpu");
    let (code, out, err) = common::trajwiki(&["stats", "--store", store, "--json"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("\"scoring_backend\""), "{out}");
    let (code, _, err) = common::trajwiki(&["--device", "cpu", "stats", "--store", store]);
    assert_eq!(code, 0, "{err}");
}

#[test]
fn a_model_that_stays_on_the_cpu_says_so_only_when_cuda_was_asked_for() {
    use trajwiki::api::{load_model, CpuOnly};
    use trajwiki::cuda::Device;
    use trajwiki::embed::EmbedOptions;

    let opts = EmbedOptions::default();
    // The lexical model loads without a GPU whatever the device; only `cuda` earns a note.
    let cuda = load_model("hashing-64", &opts, Device::Cuda).unwrap();
    assert_eq!(cuda.backend, "cpu");
    assert_eq!(
        cuda.note,
        Some(CpuOnly {
            model: "hashing-64".into(),
            reason: "is lexical",
        })
    );
    let note = cuda.note.unwrap();
    assert_eq!(
        note.message("--device cuda"),
        "note: hashing-64 is lexical, which runs on the CPU; --device cuda applies to scoring"
    );
    for device in [Device::Cpu, Device::Auto] {
        let loaded = load_model("hashing-64", &opts, device).unwrap();
        assert_eq!((loaded.backend, loaded.note), ("cpu", None), "{device}");
    }
    assert!(load_model("hashing-0", &opts, Device::Cpu).is_err());
}

/// `--model DIR@bf16` embeds in bf16 (its model id says so, the kernel is reported); an unknown
/// precision and an unknown `TRAJWIKI_CPU_KERNEL` are usage errors naming what was asked.
#[test]
fn precision_and_kernel_are_chosen_or_refused_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let qwen3 = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("crates/trajwiki-embed/tests/fixtures/qwen3_tiny");
    let texts = dir.path().join("texts.txt");
    std::fs::write(&texts, "hello\nworld\n").unwrap();
    let run = |model: String, kernel: Option<&str>| {
        let mut cmd = common::bin();
        cmd.args(["--device", "cpu", "embed", "--model", &model, "--stats"])
            .args(["--input", texts.to_str().unwrap()]);
        match kernel {
            Some(k) => cmd.env("TRAJWIKI_CPU_KERNEL", k),
            None => cmd.env_remove("TRAJWIKI_CPU_KERNEL"),
        };
        let out = cmd.output().unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let base = qwen3.to_str().unwrap().to_owned();
    let (code, out, err) = run(format!("{base}@bf16"), Some("scalar"));
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.lines().count(), 2, "{out}");
    let stats: serde_json::Value = serde_json::from_str(err.lines().last().unwrap()).unwrap();
    assert!(
        stats["model_id"].as_str().unwrap().ends_with("-bf16"),
        "{stats}"
    );
    assert_eq!(stats["kernel"], "scalar-bf16-emulated", "{stats}");
    let (code, _, err) = run(base.clone(), None);
    assert_eq!(code, 0, "{err}");
    let stats: serde_json::Value = serde_json::from_str(err.lines().last().unwrap()).unwrap();
    assert!(
        !stats["model_id"].as_str().unwrap().ends_with("-bf16"),
        "{stats}"
    );

    let (code, _, err) = run(format!("{base}@fp8"), None);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("unknown precision \"fp8\""), "{err}");
    let (code, _, err) = run(base, Some("avx9"));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("TRAJWIKI_CPU_KERNEL=\"avx9\""), "{err}");
    assert!(!err.contains("panicked") && !err.contains("CUDA"), "{err}");
}
