// The Qwen3-Embedding forward pass in bf16 with f32 accumulation, except its matrix products
// (cuBLAS, bf16 inputs, f32 compute; see crates/trajwiki-cuda/src/qwen3_gpu.rs for the order).
//
// Layout of one batch: B sequences left-padded to L tokens, T = B·L rows, row t = b·L + i;
// pad[b] is the number of pad rows at the start of sequence b, so its real tokens are rows
// pad[b]..L-1 at rotary positions 0..L-1-pad[b], and its last token (the pooled one) is row L-1.
// The residual stream x is f32 [T, hidden]; qkv is bf16 [T, (Hq + 2·Hkv)·D] with the query heads
// first, then the key heads, then the value heads (the fused q/k/v projection).

#define QW_THREADS 256

// x[t, :] = table[min(ids[t], vocab - 1), :] as f32. One block per row.
extern "C" __global__ void embed_gather(const unsigned *ids, const __nv_bfloat16 *table,
                                        unsigned vocab, unsigned rows, unsigned hidden,
                                        float *x) {
    const unsigned t = blockIdx.x;
    if (t >= rows) return;
    const unsigned id = min(ids[t], vocab - 1);
    const __nv_bfloat16 *src = table + (size_t)id * hidden;
    float *dst = x + (size_t)t * hidden;
    for (unsigned j = threadIdx.x; j < hidden; j += blockDim.x) dst[j] = __bfloat162float(src[j]);
}

// y = x / sqrt(mean(x²) + eps) · w, from the f32 residual to a bf16 GEMM input. One block of
// QW_THREADS per row.
extern "C" __global__ void rms_norm_f32_bf16(const float *x, const __nv_bfloat16 *w,
                                             __nv_bfloat16 *y, unsigned rows, unsigned d,
                                             float eps) {
    __shared__ float scratch[32];
    const unsigned row = blockIdx.x;
    if (row >= rows) return;  // uniform per block
    const float *xr = x + (size_t)row * d;
    float ss = 0.f;
    for (unsigned j = threadIdx.x; j < d; j += blockDim.x) ss += xr[j] * xr[j];
    ss = tw_block_sum(ss, scratch);
    const float inv = 1.f / sqrtf(ss / (float)d + eps);
    __nv_bfloat16 *yr = y + (size_t)row * d;
    for (unsigned j = threadIdx.x; j < d; j += blockDim.x)
        yr[j] = __float2bfloat16(xr[j] * inv * __bfloat162float(w[j]));
}

// Qwen3's per-head RMSNorm of queries (q_w) and keys (k_w) followed by the rotary embedding
// (rotate-half layout, angle = position · inv_freq[i]), in place on qkv, in f32 with one rounding
// to bf16. Grid (T, Hq + Hkv), blockDim a multiple of 32; thread i handles the pairs
// (i, i + D/2), (i + blockDim, ...), ...
extern "C" __global__ void qk_norm_rope(__nv_bfloat16 *qkv, const __nv_bfloat16 *q_w,
                                        const __nv_bfloat16 *k_w, const float *inv_freq,
                                        const unsigned *pad, unsigned len, unsigned hq,
                                        unsigned hkv, unsigned d, float eps) {
    __shared__ float scratch[32];
    const unsigned t = blockIdx.x, head = blockIdx.y;
    const unsigned b = t / len, i_row = t % len;
    const unsigned pos = i_row >= pad[b] ? i_row - pad[b] : 0;
    const unsigned half_d = d / 2;
    __nv_bfloat16 *v = qkv + (size_t)t * (hq + 2 * hkv) * d + (size_t)head * d;
    const __nv_bfloat16 *w = head < hq ? q_w : k_w;
    float ss = 0.f;
    for (unsigned j = threadIdx.x; j < d; j += blockDim.x) {
        const float a = __bfloat162float(v[j]);
        ss += a * a;
    }
    ss = tw_block_sum(ss, scratch);
    const float inv = 1.f / sqrtf(ss / (float)d + eps);
    for (unsigned i = threadIdx.x; i < half_d; i += blockDim.x) {
        const float a = __bfloat162float(v[i]) * inv * __bfloat162float(w[i]);
        const float c = __bfloat162float(v[i + half_d]) * inv * __bfloat162float(w[i + half_d]);
        float sn, cs;
        sincosf((float)pos * inv_freq[i], &sn, &cs);
        v[i] = __float2bfloat16(a * cs - c * sn);
        v[i + half_d] = __float2bfloat16(c * cs + a * sn);
    }
}

// out = silu(gate) · up; gate_up is [rows, 2·inter] with the gate first (the fused projection).
extern "C" __global__ void swiglu_bf16(const __nv_bfloat16 *gate_up, __nv_bfloat16 *out,
                                       unsigned rows, unsigned inter) {
    const size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (size_t)rows * inter) return;
    const size_t r = t / inter, j = t % inter;
    const float g = __bfloat162float(gate_up[r * 2 * inter + j]);
    const float u = __bfloat162float(gate_up[r * 2 * inter + inter + j]);
    out[t] = __float2bfloat16(g / (1.f + expf(-g)) * u);
}

// Pooling: the final RMSNorm of each sequence's last row (L - 1), truncated to dim_out (MRL) and
// L2-normalised (a zero vector stays zero). One block of QW_THREADS per sequence; out is
// [B, dim_out] f32.
extern "C" __global__ void final_norm_pool(const float *x, const __nv_bfloat16 *w, unsigned len,
                                           unsigned hidden, unsigned dim_out, float eps,
                                           float *out) {
    __shared__ float scratch[32];
    const float *xr = x + ((size_t)blockIdx.x * len + (len - 1)) * hidden;
    float ss = 0.f;
    for (unsigned j = threadIdx.x; j < hidden; j += blockDim.x) ss += xr[j] * xr[j];
    ss = tw_block_sum(ss, scratch);
    const float inv = 1.f / sqrtf(ss / (float)hidden + eps);
    float ss2 = 0.f;
    for (unsigned j = threadIdx.x; j < dim_out; j += blockDim.x) {
        const float y = xr[j] * inv * __bfloat162float(w[j]);
        ss2 += y * y;
    }
    ss2 = tw_block_sum(ss2, scratch);
    const float inv2 = ss2 > 0.f ? 1.f / sqrtf(ss2) : 0.f;
    for (unsigned j = threadIdx.x; j < dim_out; j += blockDim.x)
        out[(size_t)blockIdx.x * dim_out + j] = xr[j] * inv * __bfloat162float(w[j]) * inv2;
}

// Causal grouped-query attention over a left-padded batch with the padding mask, tiled with an
// online softmax: no score matrix is ever written to global memory.
//
// Grid (ceil(L / ATT_BQ), Hq, B), ATT_WARPS·32 threads. A block takes ATT_BQ query rows of one
// head (staged in shared memory as scaled f32); warp w owns rows w, w + ATT_WARPS, ... Keys and
// values of the kv head (h / (Hq / Hkv)) are staged ATT_BK at a time, from the first real token
// of the sequence to the block's last row. For scores, lane c takes key c of the tile; the
// probabilities go through shared memory and, for the value sum, lane l owns output dims
// l, l + 32, ... A key k is seen by row i when pad ≤ k ≤ i; pad rows output zeros.
// Output ctx is bf16 [T, Hq·D]. Needs D a multiple of 4 and D ≤ ATT_MAX_D (checked on the Rust
// side): scores read four query values (one float4, rows 16-byte aligned) and four keys at a time.
#define ATT_BQ 32
#define ATT_WARPS 4
#define ATT_RPW (ATT_BQ / ATT_WARPS)
#define ATT_BK 32
#define ATT_MAX_D 128
#define ATT_KP (ATT_MAX_D + 2)  // key tile pitch: an odd number of words, no bank conflicts
#define ATT_DPL (ATT_MAX_D / 32)
extern "C" __global__ void __launch_bounds__(ATT_WARPS * 32)
attention_bf16(const __nv_bfloat16 *qkv, const unsigned *pad, __nv_bfloat16 *ctx, unsigned len,
               unsigned hq, unsigned hkv, unsigned d, float scale) {
    __shared__ __align__(16) __nv_bfloat16 ks[ATT_BK * ATT_KP];
    __shared__ __align__(16) __nv_bfloat16 vs[ATT_BK * ATT_MAX_D];
    __shared__ __align__(16) float qs[ATT_BQ * ATT_MAX_D];  // rows of ATT_MAX_D: 16-byte aligned
    __shared__ __align__(16) float ps[ATT_WARPS * ATT_RPW * ATT_BK];
    const unsigned b = blockIdx.z, h = blockIdx.y, hk = h / (hq / hkv);
    const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const unsigned q0 = blockIdx.x * ATT_BQ;
    const unsigned p = pad[b];
    const size_t stride = (size_t)(hq + 2 * hkv) * d;
    const size_t base = (size_t)b * len;
    const unsigned half_d = d / 2;

    for (unsigned t = threadIdx.x; t < ATT_BQ * half_d; t += blockDim.x) {
        const unsigned r = t / half_d, j = 2 * (t % half_d), row = q0 + r;
        float2 v = make_float2(0.f, 0.f);
        if (row < len) v = tw_load2(qkv + (base + row) * stride + (size_t)h * d + j);
        qs[r * ATT_MAX_D + j] = v.x * scale;
        qs[r * ATT_MAX_D + j + 1] = v.y * scale;
    }

    float m[ATT_RPW], l[ATT_RPW], acc[ATT_RPW][ATT_DPL];
#pragma unroll
    for (int r = 0; r < ATT_RPW; r++) {
        m[r] = TW_NEG_INF;
        l[r] = 0.f;
#pragma unroll
        for (int u = 0; u < ATT_DPL; u++) acc[r][u] = 0.f;
    }
    float *pw = ps + warp * ATT_RPW * ATT_BK;
    const unsigned end = min(len, q0 + ATT_BQ);  // keys beyond the block's last row are masked
    const __nv_bfloat162 zero2 = __floats2bfloat162_rn(0.f, 0.f);

    for (unsigned k0 = p; k0 < end; k0 += ATT_BK) {
        __syncthreads();  // queries staged; the previous tile fully consumed
        for (unsigned t = threadIdx.x; t < ATT_BK * half_d; t += blockDim.x) {
            const unsigned c = t / half_d, j = 2 * (t % half_d), kr = k0 + c;
            __nv_bfloat162 kv = zero2, vv = zero2;
            if (kr < len) {
                const __nv_bfloat16 *src = qkv + (base + kr) * stride + (size_t)(hq + hk) * d + j;
                kv = *reinterpret_cast<const __nv_bfloat162 *>(src);
                vv = *reinterpret_cast<const __nv_bfloat162 *>(src + (size_t)hkv * d);
            }
            *reinterpret_cast<__nv_bfloat162 *>(&ks[c * ATT_KP + j]) = kv;
            *reinterpret_cast<__nv_bfloat162 *>(&vs[c * ATT_MAX_D + j]) = vv;
        }
        __syncthreads();

        float s[ATT_RPW];
#pragma unroll
        for (int r = 0; r < ATT_RPW; r++) s[r] = 0.f;
        for (unsigned j = 0; j < d; j += 4) {
            const __nv_bfloat162 *kp = reinterpret_cast<const __nv_bfloat162 *>(&ks[lane * ATT_KP + j]);
            const float2 k01 = __bfloat1622float2(kp[0]), k23 = __bfloat1622float2(kp[1]);
#pragma unroll
            for (int r = 0; r < ATT_RPW; r++) {
                const float4 qq =
                    *reinterpret_cast<const float4 *>(&qs[(warp + r * ATT_WARPS) * ATT_MAX_D + j]);
                s[r] = fmaf(qq.x, k01.x, fmaf(qq.y, k01.y, fmaf(qq.z, k23.x, fmaf(qq.w, k23.y, s[r]))));
            }
        }
        const unsigned kc = k0 + lane;
#pragma unroll
        for (int r = 0; r < ATT_RPW; r++) {
            const unsigned row = q0 + warp + r * ATT_WARPS;
            const bool valid = row < len && row >= p && kc < len && kc <= row;
            const float sv = valid ? s[r] : TW_NEG_INF;
            const float mn = fmaxf(m[r], tw_warp_max(sv));
            const float pv = valid ? __expf(sv - mn) : 0.f;
            const float corr = m[r] == TW_NEG_INF ? 0.f : __expf(m[r] - mn);
            l[r] = l[r] * corr + tw_warp_sum(pv);
            m[r] = mn;
            pw[r * ATT_BK + lane] = pv;
#pragma unroll
            for (int u = 0; u < ATT_DPL; u++) acc[r][u] *= corr;
        }
        __syncwarp();
        for (unsigned c = 0; c < ATT_BK; c += 4) {
            float vv[4][ATT_DPL];
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int u = 0; u < ATT_DPL; u++) {
                    const unsigned j = lane + 32 * u;
                    vv[i][u] = j < d ? __bfloat162float(vs[(c + i) * ATT_MAX_D + j]) : 0.f;
                }
#pragma unroll
            for (int r = 0; r < ATT_RPW; r++) {
                const float4 p4 = *reinterpret_cast<const float4 *>(&pw[r * ATT_BK + c]);
#pragma unroll
                for (int u = 0; u < ATT_DPL; u++)
                    acc[r][u] = fmaf(p4.x, vv[0][u],
                                     fmaf(p4.y, vv[1][u],
                                          fmaf(p4.z, vv[2][u], fmaf(p4.w, vv[3][u], acc[r][u]))));
            }
        }
    }

#pragma unroll
    for (int r = 0; r < ATT_RPW; r++) {
        const unsigned row = q0 + warp + r * ATT_WARPS;
        if (row >= len) continue;
        const float inv = l[r] > 0.f ? 1.f / l[r] : 0.f;
        __nv_bfloat16 *o = ctx + (base + row) * hq * d + (size_t)h * d;
#pragma unroll
        for (int u = 0; u < ATT_DPL; u++) {
            const unsigned j = lane + 32 * u;
            if (j < d) o[j] = __float2bfloat16(acc[r][u] * inv);
        }
    }
}
