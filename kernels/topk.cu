// Fused cosine + top-k over a row-major matrix (f32, f16 or bf16 rows; f32 accumulation) for a
// batch of f32 queries, without writing the score matrix to device memory.
//
// Pass 1 (`topk_partial_*`): grid (P, ceil(B / TOPK_QT)). Each block streams chunks of
// TOPK_CHUNK rows (grid-stride), one warp per row, against up to TOPK_QT queries held in shared
// memory, writes the chunk's scores to shared memory, and merges them into a sorted per-block
// top-k per query (warp w owns query w) — only candidates that beat the current k-th survive.
// It writes P sorted partial lists of k per query.
// Pass 2 (`topk_merge`): one block per query merges the P sorted lists by repeated block-wide
// arg-best over the list heads.
// Empty slots are (-inf, TW_NO_INDEX), which sort after every real row.

#define TOPK_THREADS 256
#define TOPK_WARPS (TOPK_THREADS / 32)
#define TOPK_QT 8
#define TOPK_CHUNK 256

// Shared layout (dynamic): qs[TOPK_QT*d] | sc[TOPK_QT*TOPK_CHUNK] | ts[TOPK_QT*k] | ti[TOPK_QT*k]
template <typename T>
__device__ void topk_partial(const T *__restrict__ m, unsigned n, unsigned d,
                             const float *__restrict__ q, unsigned b, unsigned k,
                             float *__restrict__ part_s, unsigned *__restrict__ part_i) {
    extern __shared__ float smem[];
    float *qs = smem;
    float *sc = qs + TOPK_QT * d;
    float *ts = sc + TOPK_QT * TOPK_CHUNK;
    unsigned *ti = (unsigned *)(ts + TOPK_QT * k);

    const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const unsigned q0 = blockIdx.y * TOPK_QT;
    const unsigned qn = min((unsigned)TOPK_QT, b - q0);

    for (unsigned j = threadIdx.x; j < qn * d; j += TOPK_THREADS) qs[j] = q[(size_t)q0 * d + j];
    __syncthreads();

    unsigned cnt = 0;  // entries in this warp's list (uniform across the warp)
    float *my_s = ts + warp * k;
    unsigned *my_i = ti + warp * k;

    for (size_t start = (size_t)blockIdx.x * TOPK_CHUNK; start < n;
         start += (size_t)gridDim.x * TOPK_CHUNK) {
        // Scores of this chunk: warp `warp` takes rows warp, warp + 8, ...
        for (unsigned r = warp; r < TOPK_CHUNK; r += TOPK_WARPS) {
            size_t row = start + r;
            float acc[TOPK_QT];
#pragma unroll
            for (int t = 0; t < TOPK_QT; t++) acc[t] = 0.f;
            if (row < n) {
                const T *x = m + row * d;
                if ((d & 1u) == 0) {
                    // Pairs: 4-byte (fp16/bf16) or 8-byte (f32) loads, float2 query reads.
#pragma unroll 4
                    for (unsigned j = 2 * lane; j < d; j += 64) {
                        const float2 v = tw_load2(x + j);
#pragma unroll
                        for (int t = 0; t < TOPK_QT; t++)
                            if (t < qn) {
                                const float2 qv = *reinterpret_cast<const float2 *>(qs + t * d + j);
                                acc[t] += v.x * qv.x + v.y * qv.y;
                            }
                    }
                } else {
                    for (unsigned j = lane; j < d; j += 32) {
                        const float v = tw_to_f32(x[j]);
#pragma unroll
                        for (int t = 0; t < TOPK_QT; t++)
                            if (t < qn) acc[t] += v * qs[t * d + j];
                    }
                }
            }
#pragma unroll
            for (int t = 0; t < TOPK_QT; t++) {
                if (t < qn) {  // qn is uniform: no divergence around the shuffles
                    const float s = tw_warp_sum(acc[t]);
                    if (lane == 0) sc[t * TOPK_CHUNK + r] = tw_sanitize(s);
                }
            }
        }
        __syncthreads();
        if (warp < qn) {
            for (unsigned base = 0; base < TOPK_CHUNK; base += 32) {
                unsigned r = base + lane;
                size_t row = start + r;
                float s = sc[warp * TOPK_CHUNK + r];
                unsigned idx = (unsigned)row;
                bool pass = row < n && (cnt < k || tw_better(s, idx, my_s[k - 1], my_i[k - 1]));
                unsigned mask = __ballot_sync(TW_FULL_MASK, pass);
                while (mask) {
                    int src = __ffs(mask) - 1;
                    mask &= mask - 1;
                    float cs = __shfl_sync(TW_FULL_MASK, s, src);
                    unsigned ci = __shfl_sync(TW_FULL_MASK, idx, src);
                    if (cnt == k && !tw_better(cs, ci, my_s[k - 1], my_i[k - 1])) continue;
                    int pos = 0;
                    for (unsigned j = lane; j < cnt; j += 32)
                        pos += tw_better(my_s[j], my_i[j], cs, ci) ? 1 : 0;
                    pos = tw_warp_sum_int(pos);
                    int last = (int)min(cnt, k - 1);  // [pos, last) moves up by one
                    for (int top = last - 1; top >= pos; top -= 32) {
                        int j = top - (int)lane;
                        bool act = j >= pos;
                        float vs = 0.f;
                        unsigned vi = 0;
                        if (act) { vs = my_s[j]; vi = my_i[j]; }
                        __syncwarp();
                        if (act) { my_s[j + 1] = vs; my_i[j + 1] = vi; }
                        __syncwarp();
                    }
                    if (lane == 0) { my_s[pos] = cs; my_i[pos] = ci; }
                    __syncwarp();
                    if (cnt < k) cnt++;
                }
            }
        }
        __syncthreads();
    }
    if (warp < qn) {
        size_t out = ((size_t)(q0 + warp) * gridDim.x + blockIdx.x) * k;
        for (unsigned j = lane; j < k; j += 32) {
            bool ok = j < cnt;
            part_s[out + j] = ok ? my_s[j] : TW_NEG_INF;
            part_i[out + j] = ok ? my_i[j] : TW_NO_INDEX;
        }
    }
}

extern "C" __global__ void __launch_bounds__(TOPK_THREADS)
topk_partial_f32(const float *m, unsigned n, unsigned d, const float *q, unsigned b, unsigned k,
                 float *part_s, unsigned *part_i) {
    topk_partial<float>(m, n, d, q, b, k, part_s, part_i);
}

extern "C" __global__ void __launch_bounds__(TOPK_THREADS)
topk_partial_f16(const __half *m, unsigned n, unsigned d, const float *q, unsigned b, unsigned k,
                 float *part_s, unsigned *part_i) {
    topk_partial<__half>(m, n, d, q, b, k, part_s, part_i);
}

extern "C" __global__ void __launch_bounds__(TOPK_THREADS)
topk_partial_bf16(const __nv_bfloat16 *m, unsigned n, unsigned d, const float *q, unsigned b,
                  unsigned k, float *part_s, unsigned *part_i) {
    topk_partial<__nv_bfloat16>(m, n, d, q, b, k, part_s, part_i);
}

// Merges `p` sorted lists of `k` per query into the best `k`. Shared: heads[p] (int), then
// TOPK_WARPS winners. One block of TOPK_THREADS per query.
extern "C" __global__ void __launch_bounds__(TOPK_THREADS)
topk_merge(const float *part_s, const unsigned *part_i, unsigned p, unsigned k, float *out_s,
           unsigned *out_i) {
    extern __shared__ int heads[];
    __shared__ float ws[TOPK_WARPS];
    __shared__ unsigned wi[TOPK_WARPS];
    __shared__ int wp[TOPK_WARPS];
    const unsigned qy = blockIdx.x;
    const float *ps = part_s + (size_t)qy * p * k;
    const unsigned *pi = part_i + (size_t)qy * p * k;
    const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    for (unsigned j = threadIdx.x; j < p; j += TOPK_THREADS) heads[j] = 0;
    __syncthreads();
    for (unsigned r = 0; r < k; r++) {
        float bs = TW_NEG_INF;
        unsigned bi = TW_NO_INDEX;
        int bp = -1;
        for (unsigned j = threadIdx.x; j < p; j += TOPK_THREADS) {
            int h = heads[j];
            if (h < (int)k) {
                float s = ps[(size_t)j * k + h];
                unsigned i = pi[(size_t)j * k + h];
                if (bp < 0 || tw_better(s, i, bs, bi)) { bs = s; bi = i; bp = (int)j; }
            }
        }
        tw_warp_best(bs, bi, bp);
        if (lane == 0) { ws[warp] = bs; wi[warp] = bi; wp[warp] = bp; }
        __syncthreads();
        if (warp == 0) {
            bs = lane < TOPK_WARPS ? ws[lane] : TW_NEG_INF;
            bi = lane < TOPK_WARPS ? wi[lane] : TW_NO_INDEX;
            bp = lane < TOPK_WARPS ? wp[lane] : -1;
            tw_warp_best(bs, bi, bp);
            if (lane == 0) {
                out_s[(size_t)qy * k + r] = bs;
                out_i[(size_t)qy * k + r] = bi;
                if (bp >= 0) heads[bp] += 1;
            }
        }
        __syncthreads();
    }
}

// Scores of listed rows (subset scoring): one warp per (query, candidate) pair; `qof` holds
// the B + 1 CSR offsets into `cand`. Writes one f32 per pair.
template <typename T>
__device__ void subset_scores(const T *__restrict__ m, unsigned d, const float *__restrict__ q,
                              unsigned b, const unsigned *__restrict__ qof,
                              const unsigned *__restrict__ cand, float *__restrict__ out) {
    const unsigned lane = threadIdx.x % 32;
    const size_t pair = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const unsigned total = qof[b];
    if (pair >= total) return;
    unsigned lo = 0, hi = b;  // the query owning `pair`: qof[qy] <= pair < qof[qy + 1]
    while (hi - lo > 1) {
        unsigned mid = (lo + hi) / 2;
        if (qof[mid] <= pair) lo = mid; else hi = mid;
    }
    const T *x = m + (size_t)cand[pair] * d;
    const float *qq = q + (size_t)lo * d;
    float acc = 0.f;
    for (unsigned j = lane; j < d; j += 32) acc += tw_to_f32(x[j]) * qq[j];
    acc = tw_warp_sum(acc);
    if (lane == 0) out[pair] = tw_sanitize(acc);
}

extern "C" __global__ void subset_scores_f32(const float *m, unsigned d, const float *q,
                                             unsigned b, const unsigned *qof,
                                             const unsigned *cand, float *out) {
    subset_scores<float>(m, d, q, b, qof, cand, out);
}

extern "C" __global__ void subset_scores_f16(const __half *m, unsigned d, const float *q,
                                             unsigned b, const unsigned *qof,
                                             const unsigned *cand, float *out) {
    subset_scores<__half>(m, d, q, b, qof, cand, out);
}

extern "C" __global__ void subset_scores_bf16(const __nv_bfloat16 *m, unsigned d, const float *q,
                                              unsigned b, const unsigned *qof,
                                              const unsigned *cand, float *out) {
    subset_scores<__nv_bfloat16>(m, d, q, b, qof, cand, out);
}
