//! Helpers shared by the integration tests.

use std::path::PathBuf;

/// The fetched MiniLM folder, or `None` (with a message) when it is absent. With
/// `TRAJWIKI_REQUIRE_MODELS=1` a missing model fails the test instead.
pub fn minilm_dir() -> Option<PathBuf> {
    let dir =
        trajwiki::embed::resolve::models_dir(&trajwiki::embed::trajwiki_home()).join("minilm");
    if dir.join("model.safetensors").is_file() {
        return Some(dir);
    }
    if std::env::var("TRAJWIKI_REQUIRE_MODELS").is_ok_and(|v| v == "1") {
        panic!(
            "TRAJWIKI_REQUIRE_MODELS=1 but {} is missing; run `trajwiki model fetch minilm`",
            dir.display()
        );
    }
    eprintln!(
        "SKIPPED: MiniLM is not fetched ({} is missing); run `trajwiki model fetch minilm`",
        dir.display()
    );
    None
}

/// Cosine similarity.
pub fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot: f64 = a.iter().zip(b).map(|(x, y)| *x as f64 * *y as f64).sum();
    let na: f64 = a.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
    let nb: f64 = b.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
    dot / (na * nb)
}
