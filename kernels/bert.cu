// The BERT-family encoder forward pass (all-MiniLM-L6-v2, BGE, E5 ...) in f16 with f32
// accumulation, except its matrix products (cuBLAS, f16 inputs, f32 output and compute; see
// crates/trajwiki-cuda/src/bert_gpu.rs for the order).
//
// Layout of one batch: B sequences packed without padding, T rows in all; sequence b is rows
// starts[b]..starts[b+1]-1, row t at position pos[t] of its sequence. The residual stream x is f32
// [T, hidden] with an f16 copy xh (the next GEMM's input); GEMM outputs y are f32 without their
// bias, which the kernel that reads them adds. qkv is f16 [T, 3·hidden]: query heads, then key
// heads, then value heads (the fused projection).

// y = LayerNorm(v) · w + b for one row held as the block's values v[j] (j = threadIdx.x + i ·
// blockDim.x, i < per); writes x (f32) and xh (f16). Mean and variance as the CPU computes them:
// mean first, then the mean of squared deviations.
#define BT_MAX_PER 16  // hidden ≤ 16 · blockDim.x (BT_THREADS · 16 = 4096)
#define BT_THREADS 256
__device__ __forceinline__ void bt_norm_store(float (&v)[BT_MAX_PER], unsigned hidden,
                                              const float *w, const float *b, float eps,
                                              float *x, __half *xh, float *scratch) {
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < BT_MAX_PER; i++) {
        const unsigned j = threadIdx.x + i * blockDim.x;
        if (j < hidden) s += v[i];
    }
    const float mean = tw_block_sum(s, scratch) / (float)hidden;
    float q = 0.f;
#pragma unroll
    for (int i = 0; i < BT_MAX_PER; i++) {
        const unsigned j = threadIdx.x + i * blockDim.x;
        if (j < hidden) q += (v[i] - mean) * (v[i] - mean);
    }
    const float inv = 1.f / sqrtf(tw_block_sum(q, scratch) / (float)hidden + eps);
#pragma unroll
    for (int i = 0; i < BT_MAX_PER; i++) {
        const unsigned j = threadIdx.x + i * blockDim.x;
        if (j < hidden) {
            const float y = (v[i] - mean) * inv * w[j] + b[j];
            x[j] = y;
            xh[j] = __float2half(y);
        }
    }
}

// x[t] = LayerNorm(word[min(ids[t], vocab-1)] + position[pos[t]] + token_type). One block of
// BT_THREADS per row.
extern "C" __global__ void __launch_bounds__(BT_THREADS)
bert_embed_norm(const unsigned *ids, const unsigned *pos, const float *word, const float *position,
                const float *token_type, const float *ln_w, const float *ln_b, unsigned vocab,
                unsigned rows, unsigned hidden, float eps, float *x, __half *xh) {
    __shared__ float scratch[32];
    const unsigned t = blockIdx.x;
    if (t >= rows) return;  // uniform per block
    const float *wr = word + (size_t)min(ids[t], vocab - 1) * hidden;
    const float *pr = position + (size_t)pos[t] * hidden;
    float v[BT_MAX_PER];
#pragma unroll
    for (int i = 0; i < BT_MAX_PER; i++) {
        const unsigned j = threadIdx.x + i * blockDim.x;
        v[i] = j < hidden ? wr[j] + pr[j] + token_type[j] : 0.f;
    }
    bt_norm_store(v, hidden, ln_w, ln_b, eps, x + (size_t)t * hidden, xh + (size_t)t * hidden,
                  scratch);
}

// x[t] = LayerNorm(x[t] + (y[t] + bias)), and its f16 copy: the residual connection after the
// attention output and the feed-forward down projection. One block of BT_THREADS per row.
extern "C" __global__ void __launch_bounds__(BT_THREADS)
bert_bias_residual_norm(const float *y, const float *bias, const float *ln_w, const float *ln_b,
                        unsigned rows, unsigned hidden, float eps, float *x, __half *xh) {
    __shared__ float scratch[32];
    const unsigned t = blockIdx.x;
    if (t >= rows) return;
    const float *yr = y + (size_t)t * hidden;
    float *xr = x + (size_t)t * hidden;
    float v[BT_MAX_PER];
#pragma unroll
    for (int i = 0; i < BT_MAX_PER; i++) {
        const unsigned j = threadIdx.x + i * blockDim.x;
        v[i] = j < hidden ? xr[j] + (yr[j] + bias[j]) : 0.f;
    }
    bt_norm_store(v, hidden, ln_w, ln_b, eps, xr, xh + (size_t)t * hidden, scratch);
}

// out = f16(y + bias) over [rows, n]: the q/k/v projection's bias.
extern "C" __global__ void bert_bias_half(const float *y, const float *bias, unsigned rows,
                                          unsigned n, __half *out) {
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)rows * n) return;
    out[i] = __float2half(y[i] + bias[i % n]);
}

// out = f16(gelu(y + bias)) over [rows, n], GELU with the exact erf as BERT defines it.
extern "C" __global__ void bert_bias_gelu_half(const float *y, const float *bias, unsigned rows,
                                               unsigned n, __half *out) {
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)rows * n) return;
    const float v = y[i] + bias[i % n];
    out[i] = __float2half(0.5f * v * (1.f + erff(v * 0.70710678118654752f)));
}

// Bidirectional attention over packed sequences, tiled with an online softmax: no score matrix
// is written to global memory. Grid (ceil(longest / BA_BQ), heads, B), BA_WARPS·32 threads. A
// block takes BA_BQ query rows of one head of one sequence (staged in shared memory as scaled
// f32); warp w owns rows w, w + BA_WARPS, ...; keys and values of the sequence are staged BA_BK
// at a time. For scores, lane c takes key c of the tile; the probabilities go through shared
// memory and, for the value sum, lane l owns output dims l, l + 32, ... Output ctx is f16
// [T, heads·D]. D must be a multiple of 4 and at most MAX_D (checked on the Rust side).
#define BA_BQ 32
#define BA_WARPS 4
#define BA_RPW (BA_BQ / BA_WARPS)
#define BA_BK 32
template <int MAX_D>
__device__ __forceinline__ void bert_attention(const __half *qkv, const unsigned *starts,
                                               __half *ctx, unsigned heads, unsigned d,
                                               float scale) {
    constexpr int KP = MAX_D + 2;  // key tile pitch: an odd number of words, no bank conflicts
    constexpr int DPL = (MAX_D + 31) / 32;
    __shared__ __align__(16) __half ks[BA_BK * KP];
    __shared__ __align__(16) __half vs[BA_BK * MAX_D];
    __shared__ __align__(16) float qs[BA_BQ * MAX_D];
    __shared__ __align__(16) float ps[BA_WARPS * BA_RPW * BA_BK];
    const unsigned b = blockIdx.z, h = blockIdx.y;
    const unsigned base = starts[b], len = starts[b + 1] - base;
    const unsigned q0 = blockIdx.x * BA_BQ;
    if (q0 >= len) return;  // uniform per block: this sequence is shorter than the grid
    const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const size_t stride = (size_t)3 * heads * d;
    const unsigned half_d = d / 2;

    for (unsigned t = threadIdx.x; t < BA_BQ * half_d; t += blockDim.x) {
        const unsigned r = t / half_d, j = 2 * (t % half_d), row = q0 + r;
        float2 v = make_float2(0.f, 0.f);
        if (row < len) v = tw_load2(qkv + (base + row) * stride + (size_t)h * d + j);
        qs[r * MAX_D + j] = v.x * scale;
        qs[r * MAX_D + j + 1] = v.y * scale;
    }

    float m[BA_RPW], l[BA_RPW], acc[BA_RPW][DPL];
#pragma unroll
    for (int r = 0; r < BA_RPW; r++) {
        m[r] = TW_NEG_INF;
        l[r] = 0.f;
#pragma unroll
        for (int u = 0; u < DPL; u++) acc[r][u] = 0.f;
    }
    float *pw = ps + warp * BA_RPW * BA_BK;
    const __half2 zero2 = __floats2half2_rn(0.f, 0.f);

    for (unsigned k0 = 0; k0 < len; k0 += BA_BK) {
        __syncthreads();  // queries staged; the previous tile fully consumed
        for (unsigned t = threadIdx.x; t < BA_BK * half_d; t += blockDim.x) {
            const unsigned c = t / half_d, j = 2 * (t % half_d), kr = k0 + c;
            __half2 kv = zero2, vv = zero2;
            if (kr < len) {
                const __half *src = qkv + (base + kr) * stride + (size_t)(heads + h) * d + j;
                kv = *reinterpret_cast<const __half2 *>(src);
                vv = *reinterpret_cast<const __half2 *>(src + (size_t)heads * d);
            }
            *reinterpret_cast<__half2 *>(&ks[c * KP + j]) = kv;
            *reinterpret_cast<__half2 *>(&vs[c * MAX_D + j]) = vv;
        }
        __syncthreads();

        float s[BA_RPW];
#pragma unroll
        for (int r = 0; r < BA_RPW; r++) s[r] = 0.f;
        for (unsigned j = 0; j < d; j += 4) {
            const __half2 *kp = reinterpret_cast<const __half2 *>(&ks[lane * KP + j]);
            const float2 k01 = __half22float2(kp[0]), k23 = __half22float2(kp[1]);
#pragma unroll
            for (int r = 0; r < BA_RPW; r++) {
                const float4 qq =
                    *reinterpret_cast<const float4 *>(&qs[(warp + r * BA_WARPS) * MAX_D + j]);
                s[r] = fmaf(qq.x, k01.x, fmaf(qq.y, k01.y, fmaf(qq.z, k23.x, fmaf(qq.w, k23.y, s[r]))));
            }
        }
        const unsigned kc = k0 + lane;
#pragma unroll
        for (int r = 0; r < BA_RPW; r++) {
            const unsigned row = q0 + warp + r * BA_WARPS;
            const bool valid = row < len && kc < len;
            const float sv = valid ? s[r] : TW_NEG_INF;
            const float mn = fmaxf(m[r], tw_warp_max(sv));
            const float pv = valid ? __expf(sv - mn) : 0.f;
            const float corr = m[r] == TW_NEG_INF ? 0.f : __expf(m[r] - mn);
            l[r] = l[r] * corr + tw_warp_sum(pv);
            m[r] = mn;
            pw[r * BA_BK + lane] = pv;
#pragma unroll
            for (int u = 0; u < DPL; u++) acc[r][u] *= corr;
        }
        __syncwarp();
        for (unsigned c = 0; c < BA_BK; c += 4) {
            float vv[4][DPL];
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int u = 0; u < DPL; u++) {
                    const unsigned j = lane + 32 * u;
                    vv[i][u] = j < d ? __half2float(vs[(c + i) * MAX_D + j]) : 0.f;
                }
#pragma unroll
            for (int r = 0; r < BA_RPW; r++) {
                const float4 p4 = *reinterpret_cast<const float4 *>(&pw[r * BA_BK + c]);
#pragma unroll
                for (int u = 0; u < DPL; u++)
                    acc[r][u] = fmaf(p4.x, vv[0][u],
                                     fmaf(p4.y, vv[1][u],
                                          fmaf(p4.z, vv[2][u], fmaf(p4.w, vv[3][u], acc[r][u]))));
            }
        }
    }

#pragma unroll
    for (int r = 0; r < BA_RPW; r++) {
        const unsigned row = q0 + warp + r * BA_WARPS;
        if (row >= len) continue;
        const float inv = l[r] > 0.f ? 1.f / l[r] : 0.f;
        __half *o = ctx + (size_t)(base + row) * heads * d + (size_t)h * d;
#pragma unroll
        for (int u = 0; u < DPL; u++) {
            const unsigned j = lane + 32 * u;
            if (j < d) o[j] = __float2half(acc[r][u] * inv);
        }
    }
}

// Head sizes up to 32 (MiniLM-L6: 32), 64 (BERT-base/large, BGE, E5) and 128.
extern "C" __global__ void __launch_bounds__(BA_WARPS * 32)
bert_attention_32(const __half *qkv, const unsigned *starts, __half *ctx, unsigned heads,
                  unsigned d, float scale) {
    bert_attention<32>(qkv, starts, ctx, heads, d, scale);
}
extern "C" __global__ void __launch_bounds__(BA_WARPS * 32)
bert_attention_64(const __half *qkv, const unsigned *starts, __half *ctx, unsigned heads,
                  unsigned d, float scale) {
    bert_attention<64>(qkv, starts, ctx, heads, d, scale);
}
extern "C" __global__ void __launch_bounds__(BA_WARPS * 32)
bert_attention_128(const __half *qkv, const unsigned *starts, __half *ctx, unsigned heads,
                   unsigned d, float scale) {
    bert_attention<128>(qkv, starts, ctx, heads, d, scale);
}

// Pooling of each sequence (mean over its rows, or its first row: [CLS]), truncated to dim_out
// and L2-normalised (a zero vector stays zero). One block of BT_THREADS per sequence; out is
// [B, dim_out] f32.
extern "C" __global__ void __launch_bounds__(BT_THREADS)
bert_pool(const float *x, const unsigned *starts, unsigned cls, unsigned hidden, unsigned dim_out,
          float *out) {
    __shared__ float scratch[32];
    const unsigned b = blockIdx.x, base = starts[b], len = starts[b + 1] - base;
    const unsigned n = cls ? 1 : len;
    const float inv_n = 1.f / (float)max(n, 1u);
    float v[BT_MAX_PER];
    float ss = 0.f;
#pragma unroll
    for (int i = 0; i < BT_MAX_PER; i++) {
        const unsigned j = threadIdx.x + i * blockDim.x;
        float s = 0.f;
        if (j < dim_out) {
            for (unsigned r = 0; r < n; r++) s += x[(size_t)(base + r) * hidden + j];
            s *= inv_n;
        }
        v[i] = s;
        ss += s * s;
    }
    ss = tw_block_sum(ss, scratch);
    const float inv = ss > 0.f ? 1.f / sqrtf(ss) : 0.f;
#pragma unroll
    for (int i = 0; i < BT_MAX_PER; i++) {
        const unsigned j = threadIdx.x + i * blockDim.x;
        if (j < dim_out) out[(size_t)b * dim_out + j] = v[i] * inv;
    }
}
