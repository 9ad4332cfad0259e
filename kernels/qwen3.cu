// Building blocks of the Qwen3-Embedding forward pass in bf16 with f32 accumulation. The GEMMs
// go through cuBLASLt; these kernels cover the rest. (The Rust forward that strings them
// together is future work; the kernels are compiled and checked in CI already.)

#define QW_THREADS 256

__device__ __forceinline__ float qw_block_sum(float v, float *scratch) {
    v = tw_warp_sum(v);
    const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    const unsigned nw = (blockDim.x + 31) / 32;
    v = threadIdx.x < nw ? scratch[threadIdx.x] : 0.f;
    if (warp == 0) v = tw_warp_sum(v);
    if (threadIdx.x == 0) scratch[0] = v;
    __syncthreads();
    v = scratch[0];
    __syncthreads();
    return v;
}

// y = x / rms(x) * w, one block per row of `d`.
extern "C" __global__ void rms_norm_bf16(const __nv_bfloat16 *x, const __nv_bfloat16 *w,
                                         __nv_bfloat16 *y, unsigned rows, unsigned d,
                                         float eps) {
    __shared__ float scratch[32];
    const unsigned row = blockIdx.x;
    if (row >= rows) return;
    const __nv_bfloat16 *xr = x + (size_t)row * d;
    float ss = 0.f;
    for (unsigned j = threadIdx.x; j < d; j += blockDim.x) {
        float v = __bfloat162float(xr[j]);
        ss += v * v;
    }
    ss = qw_block_sum(ss, scratch);
    const float inv = rsqrtf(ss / (float)d + eps);
    for (unsigned j = threadIdx.x; j < d; j += blockDim.x)
        y[(size_t)row * d + j] =
            __float2bfloat16(__bfloat162float(xr[j]) * inv * __bfloat162float(w[j]));
}

// Rotary embedding in place (rotate-half layout): x is [tokens, heads, head_dim], positions per
// token. One thread per (token, head, i < head_dim / 2).
extern "C" __global__ void rope_bf16(__nv_bfloat16 *x, const int *pos, unsigned tokens,
                                     unsigned heads, unsigned head_dim, float theta) {
    const unsigned half_dim = head_dim / 2;
    const size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (size_t)tokens * heads * half_dim) return;
    const unsigned i = t % half_dim;
    const size_t th = t / half_dim;
    const unsigned tok = th / heads;
    const float inv_freq = powf(theta, -2.f * (float)i / (float)head_dim);
    float sn, cs;
    sincosf((float)pos[tok] * inv_freq, &sn, &cs);
    __nv_bfloat16 *v = x + th * head_dim;
    const float a = __bfloat162float(v[i]), b = __bfloat162float(v[i + half_dim]);
    v[i] = __float2bfloat16(a * cs - b * sn);
    v[i + half_dim] = __float2bfloat16(b * cs + a * sn);
}

// out = silu(gate) * up; gate_up is [rows, 2 * inter] with gate first.
extern "C" __global__ void swiglu_bf16(const __nv_bfloat16 *gate_up, __nv_bfloat16 *out,
                                       unsigned rows, unsigned inter) {
    const size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (size_t)rows * inter) return;
    const size_t r = t / inter, j = t % inter;
    const float g = __bfloat162float(gate_up[r * 2 * inter + j]);
    const float u = __bfloat162float(gate_up[r * 2 * inter + inter + j]);
    out[t] = __float2bfloat16(g / (1.f + __expf(-g)) * u);
}

// Last-token pooling (left padding puts every sequence's last token at L - 1), MRL truncation
// to `dim_out`, L2 normalisation. One block per sequence; hidden is [B, L, d].
extern "C" __global__ void last_token_pool_l2_bf16(const __nv_bfloat16 *hidden, unsigned len,
                                                   unsigned d, unsigned dim_out, float *out) {
    __shared__ float scratch[32];
    const __nv_bfloat16 *h = hidden + ((size_t)blockIdx.x * len + (len - 1)) * d;
    float ss = 0.f;
    for (unsigned j = threadIdx.x; j < dim_out; j += blockDim.x) {
        float v = __bfloat162float(h[j]);
        ss += v * v;
    }
    ss = qw_block_sum(ss, scratch);
    const float inv = 1.f / fmaxf(sqrtf(ss), 1e-12f);
    for (unsigned j = threadIdx.x; j < dim_out; j += blockDim.x)
        out[(size_t)blockIdx.x * dim_out + j] = __bfloat162float(h[j]) * inv;
}

// Causal attention over left-padded batches with the padding mask, tiled over keys with an
// online softmax (no L×L matrix anywhere). q is [B, L, Hq, D], k and v are [B, L, Hkv, D]
// (grouped-query: head h reads kv head h / (Hq / Hkv)), pad[b] = number of left pad tokens.
// Grid (ceil(L / ATT_BQ), Hq, B); each thread owns one query row; keys are staged in shared
// memory ATT_BK at a time. D <= ATT_MAX_D.
#define ATT_BQ 64
#define ATT_BK 32
#define ATT_MAX_D 128
extern "C" __global__ void __launch_bounds__(ATT_BQ)
attention_bf16(const __nv_bfloat16 *q, const __nv_bfloat16 *k, const __nv_bfloat16 *v,
               const unsigned *pad, __nv_bfloat16 *out, unsigned len, unsigned hq, unsigned hkv,
               unsigned d, float scale) {
    __shared__ __nv_bfloat16 ks[ATT_BK * ATT_MAX_D];
    __shared__ __nv_bfloat16 vs[ATT_BK * ATT_MAX_D];
    const unsigned b = blockIdx.z, h = blockIdx.y, hk = h / (hq / hkv);
    const unsigned row = blockIdx.x * ATT_BQ + threadIdx.x;
    const unsigned p = pad[b];
    const bool active = row < len && row >= p;
    float qr[ATT_MAX_D], acc[ATT_MAX_D];
    float mx = TW_NEG_INF, den = 0.f;
    for (unsigned j = 0; j < ATT_MAX_D; j++) {
        qr[j] = (active && j < d)
                    ? __bfloat162float(q[(((size_t)b * len + row) * hq + h) * d + j]) * scale
                    : 0.f;
        acc[j] = 0.f;
    }
    const unsigned last_row = min(len, (blockIdx.x + 1) * ATT_BQ) - 1;
    for (unsigned k0 = p; k0 <= last_row; k0 += ATT_BK) {
        for (unsigned t = threadIdx.x; t < ATT_BK * d; t += ATT_BQ) {
            const unsigned kr = k0 + t / d, j = t % d;
            const size_t src = (((size_t)b * len + kr) * hkv + hk) * d + j;
            const bool ok = kr < len;
            ks[(t / d) * ATT_MAX_D + j] = ok ? k[src] : __float2bfloat16(0.f);
            vs[(t / d) * ATT_MAX_D + j] = ok ? v[src] : __float2bfloat16(0.f);
        }
        __syncthreads();
        if (active) {
            for (unsigned c = 0; c < ATT_BK; c++) {
                const unsigned kr = k0 + c;
                if (kr > row) break;  // causal
                float s = 0.f;
                for (unsigned j = 0; j < d; j++) s += qr[j] * __bfloat162float(ks[c * ATT_MAX_D + j]);
                const float nm = fmaxf(mx, s);
                const float corr = __expf(mx - nm), e = __expf(s - nm);
                den = den * corr + e;
                for (unsigned j = 0; j < d; j++)
                    acc[j] = acc[j] * corr + e * __bfloat162float(vs[c * ATT_MAX_D + j]);
                mx = nm;
            }
        }
        __syncthreads();
    }
    if (row < len) {
        const float inv = active && den > 0.f ? 1.f / den : 0.f;
        for (unsigned j = 0; j < d; j++)
            out[(((size_t)b * len + row) * hq + h) * d + j] = __float2bfloat16(acc[j] * inv);
    }
}
