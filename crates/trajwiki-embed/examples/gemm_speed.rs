//! Measures f32 GEMM throughput of the `gemm` crate at the shapes of MiniLM's layers.
#![allow(unsafe_code, missing_docs)]
use std::time::Instant;

fn run(m: usize, k: usize, n: usize, par: gemm::Parallelism, reps: usize) -> f64 {
    let a = vec![0.5f32; m * k];
    let b = vec![0.25f32; n * k];
    let mut c = vec![0.0f32; m * n];
    let t = Instant::now();
    for _ in 0..reps {
        unsafe {
            gemm::gemm(
                m,
                n,
                k,
                c.as_mut_ptr(),
                1,
                n as isize,
                false,
                a.as_ptr(),
                1,
                k as isize,
                b.as_ptr(),
                k as isize,
                1,
                1.0f32,
                1.0f32,
                false,
                false,
                false,
                par,
            );
        }
    }
    2.0 * (m * n * k * reps) as f64 / t.elapsed().as_secs_f64() / 1e9
}

fn main() {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .unwrap();
    for &(m, k, n) in &[
        (1024, 384, 1152),
        (1024, 384, 384),
        (1024, 384, 1536),
        (1024, 1536, 384),
        (8192, 384, 1536),
    ] {
        let one = run(m, k, n, gemm::Parallelism::None, 20);
        let two = pool.install(|| run(m, k, n, gemm::Parallelism::Rayon(2), 20));
        println!("{m}x{k}x{n}: 1 thread {one:.1} GFLOP/s, 2 threads {two:.1} GFLOP/s");
    }
}
