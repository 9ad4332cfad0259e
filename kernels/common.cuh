// Shared helpers of the trajwiki kernels. Prepended to every kernel source by the Rust side
// (kernels.rs), so the files stay self-contained for NVRTC.
#include <cuda_fp16.h>
#include <cuda_bf16.h>

#define TW_FULL_MASK 0xffffffffu
#define TW_NO_INDEX 0xffffffffu
#define TW_NEG_INF (__int_as_float(0xff800000))

// Element loads as f32.
__device__ __forceinline__ float tw_to_f32(float x) { return x; }
__device__ __forceinline__ float tw_to_f32(__half x) { return __half2float(x); }
__device__ __forceinline__ float tw_to_f32(__nv_bfloat16 x) { return __bfloat162float(x); }

// Two consecutive elements as f32 (the address must be aligned to two elements).
__device__ __forceinline__ float2 tw_load2(const float *p) { return *reinterpret_cast<const float2 *>(p); }
__device__ __forceinline__ float2 tw_load2(const __half *p) {
    return __half22float2(*reinterpret_cast<const __half2 *>(p));
}
__device__ __forceinline__ float2 tw_load2(const __nv_bfloat16 *p) {
    return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(p));
}

// NaN sorts as -inf, like `topk::sanitize` on the CPU.
__device__ __forceinline__ float tw_sanitize(float x) { return isnan(x) ? TW_NEG_INF : x; }

// The order of hits everywhere: higher score first, then lower index (`topk::hit_order`).
__device__ __forceinline__ bool tw_better(float sa, unsigned ia, float sb, unsigned ib) {
    return sa > sb || (sa == sb && ia < ib);
}

__device__ __forceinline__ float tw_warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(TW_FULL_MASK, v, o);
    return v;
}

__device__ __forceinline__ float tw_warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(TW_FULL_MASK, v, o));
    return v;
}

// Sum over the block; every thread gets the result. blockDim.x must be a multiple of 32 (at most
// 1024) and every thread of the block must call it.
__device__ __forceinline__ float tw_block_sum(float v, float *scratch) {
    v = tw_warp_sum(v);
    const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    const unsigned nw = blockDim.x / 32;
    v = lane < nw ? scratch[lane] : 0.f;
    v = tw_warp_sum(v);
    __syncthreads();  // scratch is free again for the next call
    return v;
}

__device__ __forceinline__ int tw_warp_sum_int(int v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(TW_FULL_MASK, v, o);
    return v;
}

// Warp arg-best over (score, index, payload); every lane gets the winner.
__device__ __forceinline__ void tw_warp_best(float &s, unsigned &i, int &p) {
    for (int o = 16; o > 0; o >>= 1) {
        float os = __shfl_xor_sync(TW_FULL_MASK, s, o);
        unsigned oi = __shfl_xor_sync(TW_FULL_MASK, i, o);
        int op = __shfl_xor_sync(TW_FULL_MASK, p, o);
        if (tw_better(os, oi, s, i)) { s = os; i = oi; p = op; }
    }
}
