// Batched greedy coverage/redundancy selection, one block per query (SPEC §3.4, §7). Mirrors
// `trajwiki_compute::select` exactly: the gain is evaluated in the same order with IEEE-rounded
// operations (__fmul_rn / __fadd_rn / __fsub_rn, never contracted into FMAs), and ties go to the
// lower candidate index, so the picks equal the CPU's.
//
// Layout (see `SelectionBatch`): offsets[B + 1]; per candidate `cw = we + wf + wi + wt` words
// [entities | facets | items | terms], cluster, flags, family score; per query `qw = we + wf + wt`
// words [entities | facets | terms] and flags. `w` holds the 17 weights of
// `CoverageWeights::to_array`. Output: picks[B * k], TW_NO_INDEX after the last pick.
// Dynamic shared memory: cov[cw] (u64) | picked[n_max] (u8) | clusters[k] (u32).

#define SEL_THREADS 128
#define SEL_WARPS (SEL_THREADS / 32)

#define FLAG_INVENTORY 1u
#define FLAG_HAS_COUNTS 2u
#define FLAG_FAMILY_MISMATCH 4u
#define QUERY_LIST 1u
#define QUERY_COUNT 2u
#define QUERY_FAMILY 4u
#define NO_CLUSTER 0xffffffffu

extern "C" __global__ void __launch_bounds__(SEL_THREADS)
coverage_select(const unsigned *offsets, const unsigned long long *cand_bits,
                const unsigned *cand_cluster, const unsigned *cand_flags,
                const float *cand_family, const unsigned long long *query_bits,
                const unsigned *query_flags, const float *w, unsigned we, unsigned wf,
                unsigned wi, unsigned wt, unsigned k, unsigned n_max, unsigned *picks) {
    extern __shared__ unsigned long long sel_smem[];
    const unsigned cw = we + wf + wi + wt, qw = we + wf + wt;
    unsigned long long *cov = sel_smem;
    unsigned char *picked = (unsigned char *)(cov + cw);
    unsigned *clusters = (unsigned *)(((size_t)(picked + n_max) + 3) & ~(size_t)3);
    __shared__ float bsw[SEL_WARPS];
    __shared__ unsigned biw[SEL_WARPS];
    __shared__ unsigned winner;

    const unsigned qy = blockIdx.x;
    const unsigned lo = offsets[qy], n = offsets[qy + 1] - lo;
    const unsigned kk = min(k, n);
    const unsigned qf = query_flags[qy];
    const unsigned long long *qb = query_bits + (size_t)qy * qw;
    const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    unsigned *out = picks + (size_t)qy * k;

    for (unsigned j = threadIdx.x; j < k; j += SEL_THREADS) out[j] = TW_NO_INDEX;
    for (unsigned j = threadIdx.x; j < cw; j += SEL_THREADS) cov[j] = 0ull;
    for (unsigned j = threadIdx.x; j < n; j += SEL_THREADS) picked[j] = 0;
    if (kk == 0) return;
    if (threadIdx.x == 0) {
        // Anchor: 0, or the best family match when the family score of 0 is low.
        unsigned a = 0;
        const float *fam = cand_family + lo;
        if ((qf & QUERY_FAMILY) && fam[0] < w[16]) {
            for (unsigned i = 1; i < n; i++)
                if (fam[i] > fam[a]) a = i;
        }
        winner = a;
    }
    __syncthreads();

    const float w_entity = w[0], w_facet = w[1], w_item = w[2], w_term = w[4];
    const unsigned item_cap = (unsigned)w[3], term_cap = (unsigned)w[5];
    const float w_inventory = w[6], w_count = w[7], w_family = w[8];
    const float w_rep_entity = w[9], w_rep_entity_no_item = w[10], w_rep_term = w[11];
    const float w_rep_item = w[12], w_cluster = w[14], w_mismatch = w[15];
    const unsigned rep_cap = (unsigned)w[13];
    const bool list = qf & QUERY_LIST, count = qf & QUERY_COUNT;
    const float nf = (float)n;

    for (unsigned step = 0;; step++) {
        // Take the winner.
        const unsigned pick = winner;
        const unsigned long long *pb = cand_bits + (size_t)(lo + pick) * cw;
        for (unsigned j = threadIdx.x; j < cw; j += SEL_THREADS) cov[j] |= pb[j];
        if (threadIdx.x == 0) {
            picked[pick] = 1;
            clusters[step] = cand_cluster[lo + pick];
            out[step] = pick;
        }
        __syncthreads();
        if (step + 1 >= kk) break;

        float bs = TW_NEG_INF;
        unsigned bi = TW_NO_INDEX;
        for (unsigned i = threadIdx.x; i < n; i += SEL_THREADS) {
            if (picked[i]) continue;
            const unsigned long long *cb = cand_bits + (size_t)(lo + i) * cw;
            unsigned new_e = 0, rep_e = 0, new_f = 0, new_i = 0, rep_i = 0, new_t = 0, rep_t = 0;
            for (unsigned j = 0; j < we; j++) {
                unsigned long long e = cb[j], c = cov[j];
                new_e += __popcll(e & qb[j] & ~c);
                rep_e += __popcll(e & c);
            }
            for (unsigned j = 0; j < wf; j++)
                new_f += __popcll(cb[we + j] & qb[we + j] & ~cov[we + j]);
            for (unsigned j = 0; j < wi; j++) {
                unsigned long long it = cb[we + wf + j], c = cov[we + wf + j];
                new_i += __popcll(it & ~c);
                rep_i += __popcll(it & c);
            }
            for (unsigned j = 0; j < wt; j++) {
                unsigned long long t = cb[we + wf + wi + j] & qb[we + wf + j];
                unsigned long long c = cov[we + wf + wi + j];
                new_t += __popcll(t & ~c);
                rep_t += __popcll(t & c);
            }
            const unsigned flags = cand_flags[lo + i];
            const unsigned cl = cand_cluster[lo + i];
            bool seen = false;
            if (cl != NO_CLUSTER)
                for (unsigned j = 0; j <= step; j++) seen = seen || clusters[j] == cl;

            float g = __fdiv_rn((float)(n - i), nf);
            g = __fadd_rn(g, __fmul_rn(w_entity, (float)new_e));
            g = __fadd_rn(g, __fmul_rn(w_facet, (float)new_f));
            g = __fadd_rn(g, __fmul_rn(w_item, (float)min(new_i, item_cap)));
            g = __fadd_rn(g, __fmul_rn(w_term, (float)min(new_t, term_cap)));
            if (list && (flags & FLAG_INVENTORY)) g = __fadd_rn(g, w_inventory);
            if (count && (flags & FLAG_HAS_COUNTS)) g = __fadd_rn(g, w_count);
            g = __fadd_rn(g, __fmul_rn(w_family, cand_family[lo + i]));
            const float per_entity = new_i == 0 ? w_rep_entity_no_item : w_rep_entity;
            g = __fsub_rn(g, __fmul_rn(per_entity, (float)rep_e));
            g = __fsub_rn(g, __fmul_rn(w_rep_term, (float)min(rep_t, rep_cap)));
            g = __fsub_rn(g, __fmul_rn(w_rep_item, (float)min(rep_i, rep_cap)));
            if (seen) g = __fsub_rn(g, w_cluster);
            if (flags & FLAG_FAMILY_MISMATCH) g = __fsub_rn(g, w_mismatch);

            if (bi == TW_NO_INDEX || tw_better(g, i, bs, bi)) { bs = g; bi = i; }
        }
        int dummy = 0;
        tw_warp_best(bs, bi, dummy);
        if (lane == 0) { bsw[warp] = bs; biw[warp] = bi; }
        __syncthreads();
        if (threadIdx.x == 0) {
            float s = bsw[0];
            unsigned i = biw[0];
            for (unsigned j = 1; j < SEL_WARPS; j++)
                if (biw[j] != TW_NO_INDEX && (i == TW_NO_INDEX || tw_better(bsw[j], biw[j], s, i))) {
                    s = bsw[j];
                    i = biw[j];
                }
            winner = i;
        }
        __syncthreads();
    }
}
