/* The lowering of tern.AttentionGrad (src/graph/ops_attention.c has its definition and host reference): the
 * flash-attention backward on chip, every [queries x keys] tile of the probabilities and their gradients kept in
 * SBUF and PSUM, nothing of size Sq x Sk ever in HBM. It takes the forward's per-row logsumexp (LSE) instead of
 * recomputing a row max and sum: P = exp(scale * S - LSE) comes back from one ScalarE activation per block.
 *
 * Per query head h (K/V head h / kv_rep), first its query-side tiles for all query tiles i of T rows (T = the PE
 * edge, 128): Q rows and Q^T, dO rows and dO^T in the matmul dtype, -LSE and delta = rowsum(dO * O) (fp32, from
 * fp32 loads) as per-partition columns, and an fp32 dQ accumulator. Then, per key tile j of T keys (K and V rows
 * loaded and transposed through the PE array once; the next tile's loads issued while this one computes), over
 * the query tiles i that the causal mask leaves any key of:
 *
 *   S    = Q_i K_j^T                  matmul into PSUM (fp32 accumulation of the matmul-dtype operands)
 *   P    = exp(scale S - LSE_i)       ScalarE, PSUM -> SBUF in the matmul dtype; the diagonal block's keys
 *                                     after each query set to 0 (GpSimd affine_select). With a mask M (input
 *                                     6, the forward tern.Attention's: a padding mask, a constant buffer; its
 *                                     rows loaded a step ahead, or once per key tile when the same for every
 *                                     query), the forward's masked scores first (VectorE, its own pipeline
 *                                     stage): x = scale S + M (attribute mask 3, the default) or, for a
 *                                     Where (mask 1 / 2), scale S with the fill where M != 0 / == 0; then
 *                                     P = exp(x - LSE_i), and a Where's filled entries of dS are set to 0
 *   dV_j += P^T dO_i                  matmul accumulating over i in one PSUM bank
 *   dP   = dO_i V_j^T                 matmul into PSUM
 *   dS   = (dP - delta_i) * P         dP - delta_i by ScalarE on the way out of PSUM (a bias column), the
 *                                     product on VectorE, both in the matmul dtype
 *   dK_j += dS^T Q_i                  matmul accumulating over i in a second PSUM bank
 *   dQ_i += dS K_j                    dS transposed through the PE array, matmul, added to the fp32 accumulator
 *
 * The blocks run as a software pipeline (lower_query_head): TensorE computes the products of later blocks while
 * ScalarE and VectorE work on earlier ones. The scale is applied once, to dQ and dK on their way out of PSUM /
 * SBUF; grouped-query heads sum dK and dV over their kv_rep query heads in SBUF (fp32). dQ is stored from
 * ScalarE's DMA queue, dK and dV from SyncE's. Sequences need not be multiples of 128 (the last tiles are
 * partial); the head sizes D and Dv are at most the PE edge, and one head's query side must fit in SBUF (8,192
 * queries at D = 128 in bf16 do); larger shapes are refused with the bytes needed. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "compiler/compile_internal.h"

typedef struct {
    compile_ctx *c;
    tern_kernel *k;
    cc_value *Q, *K, *V, *O, *dO, *L, *M, *dQ, *dK, *dV;
    uint64_t BH, rep, Sq, Sk, D, Dv, T, nq, nk;
    float scale;
    int causal;
    int nsd;                      /* batch dims of the scores (Q's rank - 2), for the mask */
    int64_t sdims[CC_MAX_RANK];   /* their sizes */
    int64_t mstride[CC_MAX_RANK]; /* the mask's element strides over the scores' dims (0 where it broadcasts) */
    uint64_t h;                   /* the query head being lowered */
    int mbcast;                   /* the mask is the same for every query: one tile per key tile serves them all */
    int mmode;                    /* 3: M added to the scaled scores; 1 / 2: Where, the fill where M != 0 / == 0 */
    float fill;
    tern_view fill_tile, zero_tile; /* Where modes: fp32 [min(T, Sq), T] of the fill and of 0 */
    tern_dtype mdt, pdt;
    tern_view ident;
    /* query side of the current head: column block i of each holds query tile i */
    tern_view qr, qT, dor, doT, nlse, delta, dqa;
    /* key side of the current K/V head: dK and dV accumulators (fp32) over its query heads */
    tern_view dka, dva;
} agr;

typedef struct {
    tern_view kr, vr, kT, vT; /* K_j, V_j rows [kc, D|Dv] and transposed [D|Dv, kc], matmul dtype */
    tern_view mk;             /* a mask broadcast over the queries: its keys of tile j on every partition (fp32) */
    tern_view dk_bank, dv_bank; /* PSUM: dK_j and dV_j accumulating over the query tiles */
} ktile;

/* One block (query tile i, key tile j) on its way through the pipeline's stages (see lower_query_head). */
typedef struct {
    uint64_t i, j;
    uint32_t rq, kc;
    int first_j, last_j; /* the first / last block of key tile j: start / end the dK, dV accumulation */
    int first_i;         /* key tile 0: the first block of query tile i, which starts the dQ accumulator */
    tern_view s_ps, dp_ps, x, p, ds, dsT, dq_ps;
    tern_view m, mv; /* the block's own mask rows (loaded a step ahead; none when shared), the view of them in use */
} blk;

static uint64_t min_u64(uint64_t a, uint64_t b) { return a < b ? a : b; }

/* Rows [r0, r0 + n) of head `head` of a [heads, S, cols] operand, as an HBM view (partition = row). */
static tern_view rows_of(agr *a, cc_value *x, uint64_t head, uint64_t S, uint64_t cols, uint64_t r0, uint64_t n)
{
    return cc_view2d(a->c, x, (head * S + r0) * cols, n, cols, cols);
}

/* dst[cols, rows] = src[rows, cols]^T through the PE array (rows, cols <= T), copied out of PSUM by ScalarE. */
static void transpose_into(agr *a, tern_view dst, tern_view src, uint32_t rows, uint32_t cols)
{
    tern_view ps = tern_kernel_psum(a->k, a->pdt, cols, rows, "agr_T_psum");
    tern_lib_transpose_block(a->k, ps, src, a->ident);
    tern_lib_copy_scalar(a->k, dst, ps);
    tern_kernel_release(a->k, ps);
}

/* The additive mask's rows [q0, q0 + rq) and keys [k0, k0 + kc) for query head h, loaded into a new fp32 tile
 * (partition step 0 where the mask broadcasts over the queries), as the forward's tile_scale loads them. */
static tern_view load_mask(agr *a, uint64_t h, uint64_t q0, uint32_t rq, uint64_t k0, uint32_t kc)
{
    uint64_t off = q0 * (uint64_t)a->mstride[a->nsd] + k0 * (uint64_t)a->mstride[a->nsd + 1];
    for (int d = a->nsd - 1; d >= 0; d--) {
        uint64_t n = (uint64_t)a->sdims[d];
        off += (h % n) * (uint64_t)a->mstride[d];
        h /= n;
    }
    tern_view m = tern_kernel_sbuf(a->k, TERN_DTYPE_FP32, rq, kc, "agr_mask");
    uint32_t nums[1] = {kc};
    int32_t steps[1] = {(int32_t)a->mstride[a->nsd + 1]};
    tern_kernel_load(a->k, m, cc_view(a->c, a->M, off, rq, a->mstride[a->nsd], 1, nums, steps));
    return m;
}

/* The forward's masked scores out of PSUM (VectorE): x = scale S + M (x may be the mask's tile itself), or for a
 * Where mask x = scale S with the fill where M != 0 (mode 1) / == 0 (mode 2) (x not the mask's tile). */
static void masked_scores(agr *a, tern_view x, tern_view s_ps, tern_view m)
{
    tern_kernel *k = a->k;
    if (a->mmode == 3) {
        tern_kernel_scalar_tensor_tensor(k, x, s_ps, TERN_ALU_MULT, a->scale, TERN_ALU_ADD, m);
        return;
    }
    tern_kernel_tensor_scalar(k, TERN_ENGINE_VECTOR, x, s_ps, TERN_ALU_MULT, a->scale, TERN_ALU_BYPASS, 0.0f);
    tern_view f = tern_view_block(k, a->fill_tile, 0, x.ap.num_partitions, 0, tern_ap_free_elems(&x.ap));
    if (a->mmode == 1)
        tern_kernel_select(k, x, m, f, x);
    else
        tern_kernel_select(k, x, m, x, f);
}

/* The query-side tiles of query head h. */
static void load_query_head(agr *a, uint64_t h)
{
    tern_kernel *k = a->k;
    const uint32_t P = (uint32_t)min_u64(a->T, a->Sq), nq = (uint32_t)a->nq, D = (uint32_t)a->D,
                   Dv = (uint32_t)a->Dv;
    a->qr = tern_kernel_sbuf(k, a->mdt, P, nq * D, "agr_q");
    a->qT = tern_kernel_sbuf(k, a->mdt, D, (uint32_t)a->Sq, "agr_qT");
    a->dor = tern_kernel_sbuf(k, a->mdt, P, nq * Dv, "agr_do");
    a->doT = tern_kernel_sbuf(k, a->mdt, Dv, (uint32_t)a->Sq, "agr_doT");
    a->nlse = tern_kernel_sbuf(k, TERN_DTYPE_FP32, P, nq, "agr_nlse");
    a->delta = tern_kernel_sbuf(k, TERN_DTYPE_FP32, P, nq, "agr_delta");
    a->dqa = tern_kernel_sbuf(k, TERN_DTYPE_FP32, P, nq * D, "agr_dq");
    for (uint32_t i = 0; i < nq; i++) {
        const uint64_t q0 = (uint64_t)i * a->T;
        const uint32_t rq = (uint32_t)min_u64(a->T, a->Sq - q0);
        tern_view q = tern_view_block(k, a->qr, 0, rq, (uint64_t)i * D, (uint64_t)(i + 1) * D);
        tern_kernel_load(k, q, rows_of(a, a->Q, h, a->Sq, D, q0, rq));
        transpose_into(a, tern_view_block(k, a->qT, 0, D, q0, q0 + rq), q, rq, D);
        /* dO and O in fp32 for delta (the products the softmax gradient subtracts from), dO then narrowed */
        tern_view gof = tern_kernel_sbuf(k, TERN_DTYPE_FP32, rq, Dv, "agr_dof");
        tern_view of = tern_kernel_sbuf(k, TERN_DTYPE_FP32, rq, Dv, "agr_of");
        tern_kernel_load(k, gof, rows_of(a, a->dO, h, a->Sq, Dv, q0, rq));
        tern_kernel_load(k, of, rows_of(a, a->O, h, a->Sq, Dv, q0, rq));
        tern_kernel_tensor_tensor(k, TERN_ENGINE_VECTOR, of, of, gof, TERN_ALU_MULT);
        tern_kernel_tensor_reduce(k, tern_view_block(k, a->delta, 0, rq, i, i + 1), of, TERN_ALU_ADD, 1, 1);
        tern_view go = tern_view_block(k, a->dor, 0, rq, (uint64_t)i * Dv, (uint64_t)(i + 1) * Dv);
        tern_kernel_tensor_copy(k, TERN_ENGINE_GPSIMD, go, gof);
        transpose_into(a, tern_view_block(k, a->doT, 0, Dv, q0, q0 + rq), go, rq, Dv);
        tern_kernel_release(k, of);
        tern_kernel_release(k, gof);
        if (!a->L)
            continue; /* recomputed (recompute_lse) */
        tern_view nl = tern_view_block(k, a->nlse, 0, rq, i, i + 1);
        tern_kernel_load(k, nl, rows_of(a, a->L, h, a->Sq, 1, q0, rq));
        tern_kernel_tensor_scalar(k, TERN_ENGINE_VECTOR, nl, nl, TERN_ALU_MULT, -1.0f, TERN_ALU_BYPASS, 0.0f);
    }
}

/* Without an LSE input: -LSE of every query tile of the current head from a pass of S = Q K^T over the key tiles
 * (the forward's statistics recomputed, as its softmax made them), online: per block the row max of the scaled,
 * masked scores m_new = max(m, scale max S), the running sum l = l exp(m - m_new) + rowsum(exp(scale S - m_new)),
 * and at the end -LSE = -(m + log l). One more matmul per block (S) and one exponential pass over it; the scale
 * must be positive (max(scale S) = scale max S). With an additive mask the block's scores are x = scale S + M
 * (masked_scores) and the statistics run on x; the first block's max is floored at -FLT_MAX, so that a row whose keys
 * of key tile 0 are all masked with -inf starts from a finite max (its sum then 0) instead of exp(-inf + inf). */
#define LSE_GROUP 8 /* query tiles whose statistics one key tile updates as a batch */
static void recompute_lse(agr *a, uint64_t h, uint64_t kvh)
{
    const float sc = a->M ? 1.0f : a->scale; /* the scale still to apply to the block's scores */
    tern_kernel *k = a->k;
    const uint32_t P = (uint32_t)min_u64(a->T, a->Sq), nq = (uint32_t)a->nq;
    tern_view m = tern_kernel_sbuf(k, TERN_DTYPE_FP32, P, nq, "agr_lse_max");
    tern_view l = tern_kernel_sbuf(k, TERN_DTYPE_FP32, P, nq, "agr_lse_sum");
    for (uint64_t j = 0; j < a->nk && cc_ok(a->c); j++) {
        const uint64_t k0 = j * a->T;
        const uint32_t kc = (uint32_t)min_u64(a->T, a->Sk - k0);
        tern_view kr = tern_kernel_sbuf(k, a->mdt, kc, (uint32_t)a->D, "agr_lse_k");
        tern_kernel_load(k, kr, rows_of(a, a->K, kvh, a->Sk, a->D, k0, kc));
        tern_view kT = tern_kernel_sbuf(k, a->mdt, (uint32_t)a->D, kc, "agr_lse_kT");
        transpose_into(a, kT, kr, kc, (uint32_t)a->D);
        tern_kernel_release(k, kr);
        tern_view mk = a->M && a->mbcast ? load_mask(a, h, 0, P, k0, kc) : tern_view_none();
        /* a group of query tiles at a time: the products (TensorE), the block maxima (VectorE) and exponentials
         * (ScalarE) per tile, and the statistics' updates once for the group's contiguous run of columns of m and
         * l (VectorE, ScalarE), so few small instructions and no tile-by-tile hand-offs between the engines.
         * Rows past a partial last tile hold unused values in the batched columns. */
        for (uint64_t g0 = 0; g0 < a->nq; g0 += LSE_GROUP) {
            uint64_t ilo = g0, ihi = min_u64(a->nq, g0 + LSE_GROUP);
            while (ilo < ihi && a->causal && k0 > ilo * a->T + min_u64(a->T, a->Sq - ilo * a->T) - 1)
                ilo++; /* the tiles whose every query precedes every key of this tile */
            const uint32_t n = (uint32_t)(ihi - ilo);
            if (!n)
                continue;
            tern_view s_ps[LSE_GROUP], src[LSE_GROUP], x[LSE_GROUP], mt[LSE_GROUP];
            for (uint64_t i = ilo; i < ihi; i++) { /* the group's mask rows, loaded before the products */
                const uint64_t q0 = i * a->T, b = i - ilo;
                const uint32_t rq = (uint32_t)min_u64(a->T, a->Sq - q0);
                mt[b] = a->M && !a->mbcast ? load_mask(a, h, q0, rq, k0, kc) : tern_view_none();
                x[b] = !a->M ? tern_view_none()
                       : mt[b].region >= 0 && a->mmode == 3 ? mt[b] /* x in place */
                                                            : tern_kernel_sbuf(k, TERN_DTYPE_FP32, rq, kc, "agr_lse_x");
            }
            for (uint64_t i = ilo; i < ihi; i++) {
                const uint64_t q0 = i * a->T;
                const uint32_t rq = (uint32_t)min_u64(a->T, a->Sq - q0);
                s_ps[i - ilo] = tern_kernel_psum(k, TERN_DTYPE_FP32, rq, kc, "agr_lse_psum");
                tern_kernel_matmul(k, s_ps[i - ilo], tern_view_block(k, a->qT, 0, a->D, q0, q0 + rq), kT, 0);
            }
            /* st: per group column b, the block's max | m_new | -m_new | m - m_new, then exp | its row sum */
            tern_view st = tern_kernel_sbuf(k, TERN_DTYPE_FP32, P, 5 * n, "agr_lse_st");
            tern_view bm = tern_view_block(k, st, 0, P, 0, n), mn = tern_view_block(k, st, 0, P, n, 2 * n);
            tern_view nm = tern_view_block(k, st, 0, P, 2 * n, 3 * n), dm = tern_view_block(k, st, 0, P, 3 * n, 4 * n);
            tern_view rs = tern_view_block(k, st, 0, P, 4 * n, 5 * n);
            tern_view mg = tern_view_block(k, m, 0, P, ilo, ihi), lg = tern_view_block(k, l, 0, P, ilo, ihi);
            for (uint64_t i = ilo; i < ihi; i++) {
                const uint64_t b = i - ilo, q0 = i * a->T;
                const uint32_t rq = (uint32_t)min_u64(a->T, a->Sq - q0);
                src[b] = s_ps[b];
                if (a->M) {
                    masked_scores(a, x[b], s_ps[b], a->mbcast ? tern_view_block(k, mk, 0, rq, 0, kc) : mt[b]);
                    src[b] = x[b];
                }
                if (a->causal && k0 + kc - 1 > q0) { /* the diagonal block: later keys out of the max and sum */
                    int32_t steps[1] = {-1};
                    if (!a->M) {
                        x[b] = tern_kernel_sbuf(k, TERN_DTYPE_FP32, rq, kc, "agr_lse_x");
                        tern_lib_copy_scalar(k, x[b], s_ps[b]);
                    }
                    tern_kernel_affine_select(k, x[b], x[b], TERN_ALU_IS_GE, (int32_t)((int64_t)q0 - (int64_t)k0), 1,
                                              steps, -INFINITY);
                    src[b] = x[b];
                }
                tern_kernel_tensor_reduce(k, tern_view_block(k, bm, 0, rq, b, b + 1), src[b], TERN_ALU_MAX, 1, 0);
            }
            if (j == 0) /* every query's first key is in key tile 0 */
                tern_kernel_tensor_scalar(k, TERN_ENGINE_VECTOR, mn, bm, TERN_ALU_MULT, sc,
                                          a->M ? TERN_ALU_MAX : TERN_ALU_BYPASS, a->M ? -FLT_MAX : 0.0f);
            else
                tern_kernel_scalar_tensor_tensor(k, mn, bm, TERN_ALU_MULT, sc, TERN_ALU_MAX, mg);
            tern_kernel_tensor_scalar(k, TERN_ENGINE_VECTOR, nm, mn, TERN_ALU_MULT, -1.0f, TERN_ALU_BYPASS, 0.0f);
            tern_view e = tern_kernel_sbuf(k, a->mdt, P, kc, "agr_lse_e");
            for (uint64_t i = ilo; i < ihi; i++) {
                const uint64_t b = i - ilo;
                const uint32_t rq = (uint32_t)min_u64(a->T, a->Sq - i * a->T);
                tern_kernel_activation(k, tern_view_block(k, e, 0, rq, 0, kc), src[b], TERN_ACT_EXP, sc,
                                       tern_view_block(k, nm, 0, rq, b, b + 1), tern_view_none(),
                                       tern_view_block(k, rs, 0, rq, b, b + 1));
            }
            tern_kernel_release(k, e);
            if (j == 0) {
                tern_kernel_tensor_copy(k, TERN_ENGINE_VECTOR, lg, rs);
            } else { /* l = l exp(m - m_new) + rs */
                tern_kernel_tensor_tensor(k, TERN_ENGINE_VECTOR, dm, mg, mn, TERN_ALU_SUBTRACT);
                tern_kernel_activation(k, dm, dm, TERN_ACT_EXP, 1.0f, tern_view_none(), tern_view_none(),
                                       tern_view_none());
                tern_kernel_tensor_tensor(k, TERN_ENGINE_VECTOR, lg, lg, dm, TERN_ALU_MULT);
                tern_kernel_tensor_tensor(k, TERN_ENGINE_VECTOR, lg, lg, rs, TERN_ALU_ADD);
            }
            tern_kernel_tensor_copy(k, TERN_ENGINE_VECTOR, mg, mn);
            tern_kernel_release(k, st);
            for (uint64_t b = 0; b < n; b++) {
                if (x[b].region >= 0)
                    tern_kernel_release(k, x[b]);
                if (mt[b].region >= 0 && mt[b].region != x[b].region)
                    tern_kernel_release(k, mt[b]);
                tern_kernel_release(k, s_ps[b]);
            }
        }
        if (mk.region >= 0)
            tern_kernel_release(k, mk);
        tern_kernel_release(k, kT);
    }
    for (uint64_t i = 0; i < a->nq; i++) { /* -LSE = -log(l) - m */
        const uint32_t rq = (uint32_t)min_u64(a->T, a->Sq - i * a->T);
        tern_view li = tern_view_block(k, l, 0, rq, i, i + 1), nl = tern_view_block(k, a->nlse, 0, rq, i, i + 1);
        tern_kernel_activation(k, li, li, TERN_ACT_LOG, 1.0f, tern_view_none(), tern_view_none(), tern_view_none());
        tern_kernel_scalar_tensor_tensor(k, nl, li, TERN_ALU_MULT, -1.0f, TERN_ALU_SUBTRACT,
                                         tern_view_block(k, m, 0, rq, i, i + 1));
    }
    tern_kernel_release(k, l);
    tern_kernel_release(k, m);
}

/* dQ of query head h: scaled in place and stored, the head's tiles released. */
static void finish_query_head(agr *a, uint64_t h)
{
    tern_kernel *k = a->k;
    for (uint64_t i = 0; i < a->nq; i++) {
        const uint64_t q0 = i * a->T;
        const uint32_t rq = (uint32_t)min_u64(a->T, a->Sq - q0);
        tern_view dq = tern_view_block(k, a->dqa, 0, rq, i * a->D, (i + 1) * a->D);
        tern_kernel_activation(k, dq, dq, TERN_ACT_COPY, a->scale, tern_view_none(), tern_view_none(),
                               tern_view_none());
        tern_kernel_dma_copy_on(k, TERN_ENGINE_SCALAR, rows_of(a, a->dQ, h, a->Sq, a->D, q0, rq), dq, -1);
    }
    tern_view t[7] = {a->dqa, a->delta, a->nlse, a->doT, a->dor, a->qT, a->qr};
    for (int j = 0; j < 7; j++)
        tern_kernel_release(k, t[j]);
}

static void load_key_tile(agr *a, uint64_t kvh, uint64_t j, ktile *t)
{
    tern_kernel *k = a->k;
    const uint64_t k0 = j * a->T;
    const uint32_t kc = (uint32_t)min_u64(a->T, a->Sk - k0);
    t->kr = tern_kernel_sbuf(k, a->mdt, kc, (uint32_t)a->D, "agr_k");
    t->vr = tern_kernel_sbuf(k, a->mdt, kc, (uint32_t)a->Dv, "agr_v");
    tern_kernel_load(k, t->kr, rows_of(a, a->K, kvh, a->Sk, a->D, k0, kc));
    tern_kernel_load(k, t->vr, rows_of(a, a->V, kvh, a->Sk, a->Dv, k0, kc));
    t->kT = tern_view_none();
    t->vT = tern_view_none();
    t->mk = a->M && a->mbcast ? load_mask(a, a->h, 0, (uint32_t)min_u64(a->T, a->Sq), k0, kc) : tern_view_none();
}

/* K_j^T and V_j^T, built in the tile's turn (TensorE is not held back by a prefetch). */
static void transpose_key_tile(agr *a, ktile *t)
{
    const uint32_t kc = t->kr.ap.num_partitions;
    t->kT = tern_kernel_sbuf(a->k, a->mdt, (uint32_t)a->D, kc, "agr_kT");
    t->vT = tern_kernel_sbuf(a->k, a->mdt, (uint32_t)a->Dv, kc, "agr_vT");
    transpose_into(a, t->kT, t->kr, kc, (uint32_t)a->D);
    transpose_into(a, t->vT, t->vr, kc, (uint32_t)a->Dv);
}

static void release_key_tile(agr *a, ktile *t)
{
    tern_view v[5] = {t->mk, t->vT, t->kT, t->vr, t->kr};
    for (int j = 0; j < 5; j++)
        if (v[j].region >= 0)
            tern_kernel_release(a->k, v[j]);
}

/* Stage A: the two products that need only loaded operands, S = Q_i K_j^T and dP = dO_i V_j^T. */
static void stage_products(agr *a, const ktile *t, blk *b)
{
    tern_kernel *k = a->k;
    const uint64_t q0 = b->i * a->T;
    b->s_ps = tern_kernel_psum(k, TERN_DTYPE_FP32, b->rq, b->kc, "agr_s_psum");
    b->dp_ps = tern_kernel_psum(k, TERN_DTYPE_FP32, b->rq, b->kc, "agr_dp_psum");
    tern_kernel_matmul(k, b->s_ps, tern_view_block(k, a->qT, 0, a->D, q0, q0 + b->rq), t->kT, 0);
    tern_kernel_matmul(k, b->dp_ps, tern_view_block(k, a->doT, 0, a->Dv, q0, q0 + b->rq), t->vT, 0);
}

/* Stage A2 (VectorE), with an additive mask: x = scale S + M into the block's mask rows (loaded a step before),
 * after the step's stage B1, so that ScalarE's P of the next step finds x ready and VectorE's hand-off is not in
 * the P -> dS -> dK loop. */
static void stage_mask(agr *a, const ktile *t, blk *b)
{
    b->mv = a->mbcast ? tern_view_block(a->k, t->mk, 0, b->rq, 0, b->kc) : b->m;
    if (a->mmode == 3 && !a->mbcast) { /* x = scale S + M in place of the block's mask rows */
        b->x = b->m;
        b->m = tern_view_none();
    } else { /* a shared mask, or a Where's condition that stage B1 reads again */
        b->x = tern_kernel_sbuf(a->k, TERN_DTYPE_FP32, b->rq, b->kc, "agr_x");
    }
    masked_scores(a, b->x, b->s_ps, b->mv);
    tern_kernel_release(a->k, b->s_ps);
}

/* Stage B1 (ScalarE, GpSimd, VectorE): P = exp(scale S - LSE_i) (the diagonal block masked), dS = (dP - delta) P.
 * With an additive mask, P = exp(x - LSE_i) of the forward's masked scores x = scale S + M (VectorE first). */
static void stage_softmax_grad(agr *a, blk *b)
{
    tern_kernel *k = a->k;
    const uint64_t i = b->i, q0 = i * a->T, k0 = b->j * a->T;
    b->p = tern_kernel_sbuf(k, a->mdt, b->rq, b->kc, "agr_p");
    tern_view nl = tern_view_block(k, a->nlse, 0, b->rq, i, i + 1);
    if (b->x.region >= 0) { /* x = scale S + M made by stage A2 */
        tern_kernel_activation(k, b->p, b->x, TERN_ACT_EXP, 1.0f, nl, tern_view_none(), tern_view_none());
        tern_kernel_release(k, b->x);
    } else {
        tern_kernel_activation(k, b->p, b->s_ps, TERN_ACT_EXP, a->scale, nl, tern_view_none(), tern_view_none());
        tern_kernel_release(k, b->s_ps);
    }
    if (a->causal && k0 + b->kc - 1 > q0) { /* key k0 + c is kept for query q0 + p when (q0 - k0) + p - c >= 0 */
        int32_t steps[1] = {-1};
        tern_kernel_affine_select(k, b->p, b->p, TERN_ALU_IS_GE, (int32_t)((int64_t)q0 - (int64_t)k0), 1, steps,
                                  0.0f);
    }
    b->ds = tern_kernel_sbuf(k, a->mdt, b->rq, b->kc, "agr_ds");
    tern_view dpd = tern_kernel_sbuf(k, a->mdt, b->rq, b->kc, "agr_dpd");
    tern_kernel_activation(k, dpd, b->dp_ps, TERN_ACT_COPY, 1.0f, tern_view_block(k, a->delta, 0, b->rq, i, i + 1),
                           tern_view_none(), tern_view_none());
    tern_kernel_release(k, b->dp_ps);
    tern_kernel_tensor_tensor(k, TERN_ENGINE_VECTOR, b->ds, dpd, b->p, TERN_ALU_MULT);
    tern_kernel_release(k, dpd);
    if (a->M && a->mmode != 3) { /* a Where's fill replaced those scores: no gradient reaches them */
        tern_view z = tern_view_block(k, a->zero_tile, 0, b->rq, 0, b->kc);
        if (a->mmode == 1)
            tern_kernel_select(k, b->ds, b->mv, z, b->ds);
        else
            tern_kernel_select(k, b->ds, b->mv, b->ds, z);
    }
    if (b->m.region >= 0)
        tern_kernel_release(k, b->m);
}

/* Stage B2 (TensorE): dV_j += P^T dO_i. */
static void stage_dv(agr *a, ktile *ks, blk *b)
{
    tern_kernel *k = a->k;
    if (b->first_j) /* each accumulation group owns a whole PSUM bank (the simulator tracks accumulation per bank) */
        ks->dv_bank = tern_kernel_psum(k, TERN_DTYPE_FP32, b->kc, 512, "agr_dv_psum");
    tern_kernel_matmul(k, tern_view_block(k, ks->dv_bank, 0, b->kc, 0, a->Dv), b->p,
                       tern_view_block(k, a->dor, 0, b->rq, b->i * a->Dv, (b->i + 1) * a->Dv), !b->first_j);
    tern_kernel_release(k, b->p);
}

/* Stage C1 (TensorE, ScalarE): dK_j += dS^T Q_i, and dS transposed for dQ. */
static void stage_dk(agr *a, ktile *ks, blk *b)
{
    tern_kernel *k = a->k;
    if (b->first_j)
        ks->dk_bank = tern_kernel_psum(k, TERN_DTYPE_FP32, b->kc, 512, "agr_dk_psum");
    tern_kernel_matmul(k, tern_view_block(k, ks->dk_bank, 0, b->kc, 0, a->D), b->ds,
                       tern_view_block(k, a->qr, 0, b->rq, b->i * a->D, (b->i + 1) * a->D), !b->first_j);
    b->dsT = tern_kernel_sbuf(k, a->mdt, b->kc, b->rq, "agr_dsT");
    transpose_into(a, b->dsT, b->ds, b->rq, b->kc);
    tern_kernel_release(k, b->ds);
}

/* Where key tile j's dK and dV are formed: column blocks of the K/V head's accumulators when kv_rep > 1 (the
 * query heads' shares summed there), else two staging tiles released after their stores (*own = 1). */
static void kv_grad_tiles(agr *a, uint64_t j, uint32_t kc, tern_view *dk, tern_view *dv, int *own)
{
    *own = a->rep == 1;
    if (*own) {
        *dk = tern_kernel_sbuf(a->k, TERN_DTYPE_FP32, kc, (uint32_t)a->D, "agr_dk");
        *dv = tern_kernel_sbuf(a->k, TERN_DTYPE_FP32, kc, (uint32_t)a->Dv, "agr_dv");
        return;
    }
    *dk = tern_view_block(a->k, a->dka, 0, kc, j * a->D, (j + 1) * a->D);
    *dv = tern_view_block(a->k, a->dva, 0, kc, j * a->Dv, (j + 1) * a->Dv);
}

static void kv_grad_store(agr *a, uint64_t kvh, uint64_t j, uint32_t kc, tern_view dk, tern_view dv, int own)
{
    /* Stored from SyncE's queue: its next load (the key tile after next) comes a whole key tile later, while a
     * store on ScalarE's would hold up the next blocks' P behind this tile's last products. */
    tern_kernel_store(a->k, rows_of(a, a->dK, kvh, a->Sk, a->D, j * a->T, kc), dk);
    tern_kernel_store(a->k, rows_of(a, a->dV, kvh, a->Sk, a->Dv, j * a->T, kc), dv);
    if (own) {
        tern_kernel_release(a->k, dv);
        tern_kernel_release(a->k, dk);
    }
}

/* Key tile j's gradients out of PSUM after its last block (scaled dK; summed over the query heads of a K/V group
 * in SBUF), stored after the K/V head's last query head. */
static void finish_key_tile(agr *a, ktile *ks, uint64_t kvh, uint64_t j, uint32_t kc, uint64_t r)
{
    tern_kernel *k = a->k;
    tern_view dk, dv;
    int own;
    kv_grad_tiles(a, j, kc, &dk, &dv, &own);
    tern_view dk_ps = tern_view_block(k, ks->dk_bank, 0, kc, 0, a->D), dv_ps = tern_view_block(k, ks->dv_bank, 0, kc, 0, a->Dv);
    if (r == 0) {
        tern_kernel_activation(k, dk, dk_ps, TERN_ACT_COPY, a->scale, tern_view_none(), tern_view_none(),
                               tern_view_none());
        tern_kernel_tensor_copy(k, TERN_ENGINE_VECTOR, dv, dv_ps);
    } else {
        tern_kernel_scalar_tensor_tensor(k, dk, dk_ps, TERN_ALU_MULT, a->scale, TERN_ALU_ADD, dk);
        tern_kernel_tensor_tensor(k, TERN_ENGINE_VECTOR, dv, dv, dv_ps, TERN_ALU_ADD);
    }
    tern_kernel_release(k, ks->dv_bank);
    tern_kernel_release(k, ks->dk_bank);
    if (r + 1 == a->rep) /* the K/V head's last query head: its gradients are final */
        kv_grad_store(a, kvh, j, kc, dk, dv, own);
}

/* Stage C2 (TensorE): dS_i K_j into PSUM. */
static void stage_dq(agr *a, const ktile *t, blk *b)
{
    tern_kernel *k = a->k;
    b->dq_ps = tern_kernel_psum(k, TERN_DTYPE_FP32, b->rq, (uint32_t)a->D, "agr_dq_psum");
    tern_kernel_matmul(k, b->dq_ps, b->dsT, t->kr, 0);
    tern_kernel_release(k, b->dsT);
}

/* Stage C3 (VectorE): into query tile i's fp32 dQ accumulator. */
static void stage_dq_add(agr *a, blk *b)
{
    tern_kernel *k = a->k;
    tern_view dq = tern_view_block(k, a->dqa, 0, b->rq, b->i * a->D, (b->i + 1) * a->D);
    if (b->first_i)
        tern_kernel_tensor_copy(k, TERN_ENGINE_VECTOR, dq, b->dq_ps);
    else
        tern_kernel_tensor_tensor(k, TERN_ENGINE_VECTOR, dq, dq, b->dq_ps, TERN_ALU_ADD);
    tern_kernel_release(k, b->dq_ps);
}

/* Whether the causal mask leaves any key of tile j to a query of tile i. */
static int block_live(const agr *a, uint64_t i, uint64_t j)
{
    return !a->causal || j * a->T <= i * a->T + min_u64(a->T, a->Sq - i * a->T) - 1;
}

/* The blocks of query head h, key tile outer and query tile inner, as one software pipeline: at step t block t
 * enters stage A, t-1 stage B1, t-LAG stages C1 and B2, t-LAG-1 C2 and t-LAG-2 C3. Each engine's stream then
 * holds work of different blocks back to back (TensorE: S and dP of t, dK, dS^T and dV of t-LAG, dQ of t-LAG-1;
 * ScalarE: P of t-1, then the dS^T copy of t-LAG), and what an instruction waits for on another engine was issued
 * steps earlier, except ScalarE's dS^T copy (TensorE's transpose, earlier in the same step) and VectorE's dS
 * (ScalarE's P, the same step). The loop that feeds back into TensorE (P, dS, then dK and the transpose, whose
 * copy precedes the next P on ScalarE) spans LAG steps, so the cross-engine semaphore latencies overlap instead
 * of adding up block after block: one 2048 x 2048 x 128 head on trn1 took 318 us with one block in flight, 191 us
 * with LAG 2, 170 us with 3 (no gain beyond), and 131 us once dS was split between ScalarE and VectorE. A key
 * tile's K and V load when the block before its first one enters the pipeline. */
#define LAG 3 /* the step of stages C1 and B2 behind stage A */
static void lower_query_head(agr *a, uint64_t h, uint64_t kvh, uint64_t r, blk *b, ktile *tiles)
{
    tern_kernel *k = a->k;
    a->h = h;
    load_query_head(a, h);
    if (!a->L)
        recompute_lse(a, h, kvh);
    uint64_t nb = 0;
    for (uint64_t j = 0; j < a->nk; j++) {
        uint64_t first = nb;
        tiles[j].kr = tern_view_none();
        for (uint64_t i = 0; i < a->nq; i++) {
            if (!block_live(a, i, j))
                continue;
            blk *x = &b[nb++];
            x->i = i, x->j = j;
            x->rq = (uint32_t)min_u64(a->T, a->Sq - i * a->T);
            x->kc = (uint32_t)min_u64(a->T, a->Sk - j * a->T);
            x->first_j = nb - 1 == first;
            x->last_j = 0;
            x->first_i = j == 0;
        }
        if (nb > first) {
            b[nb - 1].last_j = 1;
        } else { /* no query sees these keys: their gradients are zero */
            uint32_t kc = (uint32_t)min_u64(a->T, a->Sk - j * a->T);
            tern_view dk, dv;
            int own;
            kv_grad_tiles(a, j, kc, &dk, &dv, &own);
            if (r == 0) {
                tern_kernel_memset(k, TERN_ENGINE_GPSIMD, dk, 0.0f);
                tern_kernel_memset(k, TERN_ENGINE_GPSIMD, dv, 0.0f);
            }
            if (r + 1 == a->rep)
                kv_grad_store(a, kvh, j, kc, dk, dv, own);
        }
    }
    if (nb)
        load_key_tile(a, kvh, b[0].j, &tiles[b[0].j]);
    for (uint64_t t = 0; t < nb; t++)
        b[t].x = b[t].m = b[t].mv = tern_view_none();
    if (nb && a->M && !a->mbcast)
        b[0].m = load_mask(a, h, b[0].i * a->T, b[0].rq, b[0].j * a->T, b[0].kc);
    for (uint64_t t = 0; t < nb + LAG + 2 && cc_ok(a->c); t++) {
        if (t < nb) {
            blk *x = &b[t];
            if (x->first_j) {
                transpose_key_tile(a, &tiles[x->j]);
                for (uint64_t n = t + 1; n < nb; n++) /* the next key tile's loads, a tile ahead */
                    if (b[n].first_j) {
                        load_key_tile(a, kvh, b[n].j, &tiles[b[n].j]);
                        break;
                    }
            }
            stage_products(a, &tiles[x->j], x);
        }
        if (a->M && t < nb) {
            stage_mask(a, &tiles[b[t].j], &b[t]);
            if (t + 1 < nb && !a->mbcast) /* the next block's mask rows, a step ahead of their add */
                b[t + 1].m = load_mask(a, h, b[t + 1].i * a->T, b[t + 1].rq, b[t + 1].j * a->T, b[t + 1].kc);
        }
        if (t >= 1 && t - 1 < nb)
            stage_softmax_grad(a, &b[t - 1]);
        if (t >= LAG && t - LAG < nb) {
            blk *x = &b[t - LAG];
            stage_dk(a, &tiles[x->j], x);
            stage_dv(a, &tiles[x->j], x);
            if (x->last_j)
                finish_key_tile(a, &tiles[x->j], kvh, x->j, x->kc, r);
        }
        if (t >= LAG + 1 && t - LAG - 1 < nb) {
            blk *x = &b[t - LAG - 1];
            stage_dq(a, &tiles[x->j], x);
            if (x->last_j)
                release_key_tile(a, &tiles[x->j]);
        }
        if (t >= LAG + 2 && t - LAG - 2 < nb)
            stage_dq_add(a, &b[t - LAG - 2]);
    }
    finish_query_head(a, h);
}

int cc_lower_attention_grad(compile_ctx *c)
{
    const tern_graph_node *n = cc_node(c);
    agr a;
    memset(&a, 0, sizeof a);
    a.c = c;
    a.k = c->k;
    cc_value **in[5] = {&a.Q, &a.K, &a.V, &a.O, &a.dO};
    for (int i = 0; i < 5; i++)
        if (!(*in[i] = cc_in(c, i))) {
            cc_fail(c, TERN_ERR_INVALID, "AttentionGrad needs Q, K, V, O and dO (input %d is missing)", i);
            return 1;
        }
    a.L = n->n_inputs > 5 ? cc_in(c, 5) : NULL; /* absent: recomputed (recompute_lse) */
    a.M = n->n_inputs > 6 ? cc_in(c, 6) : NULL; /* the forward's additive mask, absent: none */
    if (!(a.dQ = cc_out(c, 0, cc_out_dtype(c, 0))) || !(a.dK = cc_out(c, 1, cc_out_dtype(c, 1))) ||
        !(a.dV = cc_out(c, 2, cc_out_dtype(c, 2))))
        return 1;
    const int r = a.Q->rank;
    if (r < 2 || a.K->rank != r || a.V->rank != r) {
        cc_fail(c, TERN_ERR_INVALID, "AttentionGrad needs Q, K and V of one rank >= 2");
        return 1;
    }
    int64_t rep = tern_graph_attr_int(n, "kv_rep", 1);
    a.Sq = (uint64_t)a.Q->dims[r - 2], a.D = (uint64_t)a.Q->dims[r - 1];
    a.Sk = (uint64_t)a.K->dims[r - 2], a.Dv = (uint64_t)a.V->dims[r - 1];
    a.causal = tern_graph_attr_int(n, "causal", 0) != 0;
    a.scale = tern_graph_attr_float(n, "scale", a.D ? 1.0f / sqrtf((float)a.D) : 1.0f);
    if (!a.L && !(a.scale > 0)) {
        cc_fail(c, TERN_ERR_UNSUPPORTED, "AttentionGrad without an LSE input needs a positive scale (got %g)",
                (double)a.scale);
        return 1;
    }
    if (a.M) { /* its strides over the scores [.., Sq, Sk] (infer has checked that it broadcasts) */
        const int mr = a.M->rank;
        int64_t ms[CC_MAX_RANK];
        cc_strides(a.M, ms);
        if (mr < 1 || mr > r) {
            cc_fail(c, TERN_ERR_INVALID, "AttentionGrad mask of rank %d for scores of rank %d", mr, r);
            return 1;
        }
        a.nsd = r - 2;
        for (int d = 0; d < r; d++) {
            const int md = d - (r - mr);
            const int64_t sd = d == r - 1 ? (int64_t)a.Sk : d == r - 2 ? (int64_t)a.Sq : a.Q->dims[d];
            if (d < r - 2)
                a.sdims[d] = a.Q->dims[d];
            if (md >= 0 && a.M->dims[md] != 1 && a.M->dims[md] != sd) {
                cc_fail(c, TERN_ERR_INVALID, "AttentionGrad mask dim %d is %lld, the scores' is %lld", md,
                        (long long)a.M->dims[md], (long long)sd);
                return 1;
            }
            a.mstride[d] = (md < 0 || a.M->dims[md] == 1) ? 0 : ms[md];
        }
        a.mbcast = a.mstride[r - 2] == 0;
        a.mmode = (int)tern_graph_attr_int(n, "mask", 3);
        a.fill = tern_graph_attr_float(n, "fill", 0.0f);
        if (a.mmode < 1 || a.mmode > 3) {
            cc_fail(c, TERN_ERR_INVALID, "AttentionGrad mask mode %d (1, 2: Where; 3: additive)", a.mmode);
            return 1;
        }
    }
    a.BH = a.Sq && a.D ? a.Q->numel / (a.Sq * a.D) : 0;
    if (rep < 1 || a.BH % (uint64_t)rep) {
        cc_fail(c, TERN_ERR_INVALID, "AttentionGrad kv_rep %lld does not divide its %llu heads", (long long)rep,
                (unsigned long long)a.BH);
        return 1;
    }
    a.rep = (uint64_t)rep;
    if (a.BH == 0 || a.Sk == 0 || a.Dv == 0)
        return 1; /* zero-size outputs: nothing to compute */
    a.T = c->cfg.pe_rows < c->cfg.pe_cols ? c->cfg.pe_rows : c->cfg.pe_cols;
    if (a.T > c->cfg.partitions)
        a.T = c->cfg.partitions;
    a.mdt = c->o->matmul_dtype;
    const uint64_t mb = tern_dtype_size(a.mdt);
    a.nq = (a.Sq + a.T - 1) / a.T, a.nk = (a.Sk + a.T - 1) / a.T;
    /* SBUF per partition: the query side of one head, the dK/dV accumulators of one K/V head, the tiles of two
     * key tiles and of the blocks in flight */
    const uint64_t need = a.nq * (a.D + a.Dv) * mb + 2 * a.Sq * mb + a.nq * (a.D * 4 + 8) +
                          (a.rep > 1 ? a.nk : 2) * (a.D + a.Dv) * 4 + 4 * a.T * mb * 4 + 6 * a.T * mb + 2 * a.Dv * 4 +
                          (a.L ? 0 : a.nq * 8 + a.T * (4 + 3 * mb) + 24) +
                          (a.M ? (2 * LAG + 3 + (a.L ? 0 : 2 * LSE_GROUP + 1) + 2) * a.T * 4 : 0); /* mask tiles */
    if (a.D > a.T || a.Dv > a.T || need > c->cfg.sbuf_partition_bytes * 3 / 4) {
        cc_fail(c, TERN_ERR_UNSUPPORTED,
                "AttentionGrad with head sizes %llu / %llu (at most the %llu-row PE edge), %llu queries and %llu keys: "
                "needs %llu bytes of SBUF per partition, at most %llu",
                (unsigned long long)a.D, (unsigned long long)a.Dv, (unsigned long long)a.T,
                (unsigned long long)a.Sq, (unsigned long long)a.Sk, (unsigned long long)need,
                (unsigned long long)(c->cfg.sbuf_partition_bytes * 3 / 4));
        return 1;
    }
    a.pdt = c->cfg.generation >= 3 ? a.mdt : TERN_DTYPE_FP32;
    tern_kernel *k = c->k;
    a.ident = tern_view_none();
    if (c->cfg.generation < 3) {
        a.ident = tern_kernel_sbuf(k, a.mdt, (uint32_t)a.T, (uint32_t)a.T, "agr_identity");
        tern_lib_identity(k, a.ident);
    }
    a.fill_tile = a.zero_tile = tern_view_none();
    if (a.M && a.mmode != 3) {
        const uint32_t P = (uint32_t)min_u64(a.T, a.Sq);
        a.fill_tile = tern_kernel_sbuf(k, TERN_DTYPE_FP32, P, (uint32_t)a.T, "agr_fill");
        a.zero_tile = tern_kernel_sbuf(k, TERN_DTYPE_FP32, P, (uint32_t)a.T, "agr_zero");
        tern_kernel_memset(k, TERN_ENGINE_GPSIMD, a.fill_tile, a.fill);
        tern_kernel_memset(k, TERN_ENGINE_GPSIMD, a.zero_tile, 0.0f);
    }
    blk *blocks = malloc(sizeof *blocks * a.nq * a.nk);
    ktile *tiles = malloc(sizeof *tiles * a.nk);
    if (!blocks || !tiles) {
        free(blocks);
        free(tiles);
        cc_fail(c, TERN_ERR_NOMEM, "AttentionGrad: no memory for %llu x %llu blocks", (unsigned long long)a.nq,
                (unsigned long long)a.nk);
        return 1;
    }
    const uint32_t Pk = (uint32_t)min_u64(a.T, a.Sk);
    for (uint64_t kvh = 0; kvh < a.BH / a.rep && cc_ok(c); kvh++) {
        if (a.rep > 1) {
            a.dka = tern_kernel_sbuf(k, TERN_DTYPE_FP32, Pk, (uint32_t)(a.nk * a.D), "agr_dka");
            a.dva = tern_kernel_sbuf(k, TERN_DTYPE_FP32, Pk, (uint32_t)(a.nk * a.Dv), "agr_dva");
        }
        for (uint64_t rr = 0; rr < a.rep && cc_ok(c); rr++)
            lower_query_head(&a, kvh * a.rep + rr, kvh, rr, blocks, tiles);
        if (a.rep > 1) {
            tern_kernel_release(k, a.dva);
            tern_kernel_release(k, a.dka);
        }
    }
    free(tiles);
    free(blocks);
    if (a.zero_tile.region >= 0) {
        tern_kernel_release(k, a.zero_tile);
        tern_kernel_release(k, a.fill_tile);
    }
    if (a.ident.region >= 0)
        tern_kernel_release(k, a.ident);
    a.dQ->stored_off_sync = a.dK->stored_off_sync = a.dV->stored_off_sync = 1;
    /* S, dP, dV, dK, dQ: five products over the (query, key) pairs the mask keeps (the causal triangle) */
    double pairs = (double)a.Sq * (double)a.Sk;
    if (a.causal)
        pairs = a.Sq <= a.Sk ? (double)a.Sq * (double)(a.Sq + 1) / 2
                             : (double)a.Sk * (double)(a.Sk + 1) / 2 + (double)(a.Sq - a.Sk) * (double)a.Sk;
    c->model_flops += 2.0 * (double)a.BH * pairs * (double)(3 * a.D + 2 * a.Dv);
    return 1;
}
