//! The exact scan against faiss (issue 13): our CPU cosine top-k (k = 10) over N unit rows of
//! dimension d, f32, f16 and f16 with int8 sketches (the same hits, read from the sketches first;
//! a batch reads the rows), at query batch 1 and 64, on every core rayon sees. Writes the rows
//! and queries it scanned as raw little-endian f32 (`rows.f32`, `queries.f32`) into `--out`, so
//! that `scripts/bench_faiss.py` times faiss `IndexFlatIP` on exactly the same vectors, and
//! prints one JSON object of median milliseconds per search (and to sketch the f16 rows).
//!
//! `cargo bench --bench exact_scan -- --n 250000 --dim 384 --out DIR` (the script runs it).
//! Not a criterion benchmark: the comparison needs both systems' numbers in one report.

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use half::f16;
use trajwiki::compute::sketch::Sketch;
use trajwiki::compute::synthetic::{unit_rows, Rng};
use trajwiki::compute::{CpuScoring, MatrixView, ScoringBackend};

fn arg<T: std::str::FromStr>(args: &[String], name: &str, default: T) -> T {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn write_f32(path: &PathBuf, values: &[f32]) -> std::io::Result<()> {
    let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
    for v in values {
        out.write_all(&v.to_le_bytes())?;
    }
    out.flush()
}

/// Median milliseconds of `runs` calls.
fn median_ms(runs: usize, mut f: impl FnMut()) -> f64 {
    f(); // warm-up: page in the rows
    let mut times: Vec<f64> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64() * 1000.0
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = arg(&args, "--n", 250_000);
    let d: usize = arg(&args, "--dim", 384);
    let k = 10;
    let out: PathBuf = arg(
        &args,
        "--out",
        std::env::temp_dir().join("trajwiki-exact-scan"),
    );
    std::fs::create_dir_all(&out)?;
    let mut rng = Rng::new(0x5eed);
    let rows = unit_rows(&mut rng, n, d);
    let queries = unit_rows(&mut rng, 64, d);
    write_f32(&out.join("rows.f32"), &rows)?;
    write_f32(&out.join("queries.f32"), &queries)?;
    let rows16: Vec<f16> = rows.iter().map(|&x| f16::from_f32(x)).collect();
    let m32 = MatrixView::f32(&rows, d)?;
    let m16 = MatrixView::f16(&rows16, d)?;
    let sketch = Sketch::of(&m16);
    let m16s = m16.with_sketch(sketch.view())?;
    let mut report = serde_json::Map::new();
    // What a load pays to sketch the rows (made at load, not stored).
    let sketch_ms = median_ms(5, || {
        std::hint::black_box(Sketch::of(&m16));
    });
    report.insert("sketch_f16_ms".into(), sketch_ms.into());
    report.insert("n".into(), n.into());
    report.insert("dim".into(), d.into());
    report.insert("k".into(), k.into());
    report.insert("threads".into(), rayon::current_num_threads().into());
    for b in [1usize, 64] {
        let q = &queries[..b * d];
        let runs = if b == 1 { 30 } else { 5 };
        for (name, m) in [("f32", &m32), ("f16", &m16), ("f16_sketched", &m16s)] {
            let ms = median_ms(runs, || {
                std::hint::black_box(CpuScoring.cosine_topk(m, q, k).expect("valid input"));
            });
            report.insert(format!("trajwiki_{name}_batch{b}_ms"), ms.into());
        }
    }
    println!("{}", serde_json::Value::Object(report));
    Ok(())
}
