// Batched reciprocal rank fusion over a dense per-query universe. `ranks[(q * R + r) * U + u]`
// is the 1-based rank of universe id u in ranking r of query q (0 = absent). Each thread sums one
// (query, id) over the rankings in order with IEEE-rounded operations, so the scores equal the
// CPU's `rrf::rrf_term` sums to the bit.
extern "C" __global__ void rrf_dense(const unsigned *ranks, unsigned b, unsigned r, unsigned u,
                                     float k_const, float *out) {
    const size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (size_t)b * u) return;
    const size_t qy = t / u, id = t % u;
    float s = 0.f;
    for (unsigned j = 0; j < r; j++) {
        unsigned rank = ranks[(qy * r + j) * u + id];
        if (rank != 0) s = __fadd_rn(s, __fdiv_rn(1.0f, __fadd_rn(k_const, (float)rank)));
    }
    out[t] = s;
}
