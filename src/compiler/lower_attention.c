/* The lowering of tern.Attention (the fused scaled dot-product attention of passes.c): softmax(mask(scale(Q @
 * KT))) @ V for every batch-head, on chip from the loads of Q, KT and V to the store of the output, with no HBM
 * temporaries. Every operand is a view {source, offset, batch strides, sS, sD}: the materialised [.., S, D]
 * tensors of the plain form, or, in the layout form (passes.c), the tensor the heads were cut from (e.g. the QKV
 * projection's output) and the merged-heads layout of the output. Per batch-head, K and V are loaded once (cast
 * to the matmul dtype by the DMA; K as [D, Sk] directly when its keys are contiguous, else as rows transposed
 * through the PE array) and the next head's loads are issued while this one computes; the (head, query
 * tile) items run as a three-stage software pipeline (scores | softmax | P @ V and store, see the loop in
 * cc_lower_attention), the output stored from ScalarE's DMA queue; per tile of up to 128 query rows:
 *
 *   qT        Q rows [rp, D] loaded, cast to the matmul dtype (VectorE), transposed through the PE array
 *             (identity matmul on v2, transpose_pe on v3+) and copied out of PSUM by ScalarE: [D, rp];
 *   scores    per 512 keys, matmul(stationary qT, moving KT chunk) into one PSUM bank, then VectorE applies the
 *             scale (one fp32 divide or multiply) on the way to the fp32 SBUF row tile [rp, Sk];
 *   mask      select against a fill tile (Where) or a tensor_tensor add (additive mask), the mask rows loaded
 *             with a partition step of 0 when they broadcast over the queries;
 *   softmax   the library's sequence: negated row max (VectorE), exp with the row sum (ScalarE), reciprocal and
 *             the row scaling (VectorE), which writes P in the matmul dtype (its store's cast: the bits of a
 *             cast copy of the fp32 probabilities, one pass fewer);
 *   P @ V     P transposed in 128-key blocks through the PE array, and accumulated over
 *             the key blocks in one PSUM bank [rp, Dv], copied out and stored.
 *
 * Every step is the same arithmetic, in the same order, as the unfused lowering (matmul2d, tern_lib_scalar,
 * Where's select, tern_lib_softmax, matmul2d) for Sk <= 1024, so fused and unfused outputs are equal bit for bit
 * (tests/compiler/test_attention.sh checks it); the fusion removes the HBM round trips of the scores, the
 * probabilities and the transposed operands. */
#include <string.h>

#include "compiler/compile_internal.h"

static uint64_t min_u64(uint64_t a, uint64_t b) { return a < b ? a : b; }

/* The machine's PE array edge T (the smaller of rows, columns and partitions: 128 on every catalogue core) sets
 * the tiles: query tiles and key blocks of T rows, and the head size in chunks of T rows of K^T and Q^T whose
 * products accumulate in PSUM (one chunk when D <= T). A what-if core with a smaller array takes more chunks and
 * blocks, up to these counts. */
#define ATT_DC 8  /* head-size chunks */
#define ATT_KB 64 /* key blocks */
/* Grouped mode's group slots (group g in slot g % ATT_GSLOTS). Four groups can be live at once: with two heads
 * per group and one query tile per head, step i of the pipeline below stores head i-2's output (the last head of
 * group g-1), computes head i (group g), and prefetches head i+1, whose group g+1 loads together with the group
 * after it, g+2. Three slots put g+2 over g-1 before g-1's output was stored. */
#define ATT_GSLOTS 4
typedef struct {
    tern_view kT[ATT_DC]; /* [D, Sk] in the matmul dtype as chunks of T rows (built from krows when K's rows are
                           * what is contiguous) */
    tern_view krows[ATT_KB]; /* key blocks of K as rows [<=T, D] in fp32 (layout form), or none */
    tern_view v[ATT_KB];  /* key blocks of V: [<=T, Dv] */
    unsigned nv, nk;
    int views;        /* krows and v are column blocks of a head group's tiles (not released with the head) */
    int borrow;       /* GQA: K^T and V are the previous head's (the same K/V head), taken in its turn */
    int keep;         /* GQA: a later head reads this head's K^T and V (released with the last of them) */
} att_head;

/* The heads of one batch element loaded together (grouped mode): Q, K rows, V [S, H x D] in one DMA each (the
 * heads sit side by side in the columns of the tensor they were cut from), and the merged output [Sq, H x Dv]
 * gathered on chip and stored once. */
typedef struct {
    int64_t g; /* group (batch element) held, -1: none */
    tern_view q, k, v, o;
} att_group;

/* An operand: element offset and strides into its value's storage; the batch index (flattened over nb dims)
 * contributes sum_i idx_i * bstride[i]. With grouped-query heads (rep > 1, K and V) the last batch index (the
 * head) is divided by rep first: rep query heads read one K/V head where it lies, nothing is repeated. */
typedef struct {
    cc_value *v;
    int64_t off, bstride[CC_MAX_RANK], sS, sD;
    uint64_t rep;
} att_opnd;

typedef struct {
    compile_ctx *c;
    tern_kernel *k;
    att_opnd q, kk, vv, o; /* Q [.., Sq, D], K [.., Sk, D], V [.., Sk, Dv], out [.., Sq, Dv] */
    cc_value *M, *Y;
    int nb;                /* batch dims of the operands */
    int64_t bdims[CC_MAX_RANK];
    int nsd;               /* batch dims of the scores, for the mask */
    int64_t sdims[CC_MAX_RANK];
    uint64_t Sq, D, Sk, Dv, BH;
    int scale_op, mode;
    float scale, fill;
    tern_dtype mdt, pdt; /* matmul dtype; PSUM dtype of a transpose */
    int pe_mode;
    uint64_t T;          /* PE block edge (128) */
    uint64_t ND;         /* head-size chunks of T rows */
    tern_view ident, fill_tile;
    int64_t mstride[CC_MAX_RANK]; /* mask element strides over the scores' dims (0 where it broadcasts) */
    uint64_t G;          /* heads per group (grouped mode, see att_group); 0: per-head loads */
    att_group grp[ATT_GSLOTS]; /* slot g % ATT_GSLOTS (see ATT_GSLOTS) */
    int reader;          /* the next node, a linear layer that takes the merged output rows in SBUF (keep_reader) */
} att;

static uint64_t opnd_base(const att *a, const att_opnd *x, uint64_t bh)
{
    int64_t off = x->off;
    for (int d = a->nb - 1; d >= 0; d--) {
        uint64_t i = bh % (uint64_t)a->bdims[d];
        if (d == a->nb - 1 && x->rep > 1)
            i /= x->rep;
        off += (int64_t)i * x->bstride[d];
        bh /= (uint64_t)a->bdims[d];
    }
    return (uint64_t)off;
}

/* Rows [r0, r0+n) of an operand (partition = row) with `cols` columns. */
static tern_view opnd_rows(att *a, const att_opnd *x, uint64_t bh, uint64_t r0, uint64_t n, uint64_t cols)
{
    uint32_t nums[1] = {(uint32_t)cols};
    int32_t steps[1] = {(int32_t)x->sD};
    return cc_view(a->c, x->v, opnd_base(a, x, bh) + r0 * (uint64_t)x->sS, (uint32_t)n, x->sS, 1, nums, steps);
}

/* The dtype Q or K rows are loaded in: the matmul dtype when the operand is stored in it (narrow storage: the
 * cast before the transpose is then already done), else fp32 (cast on chip, as the unfused lowering does). */
static tern_dtype row_dtype(const att *a, const att_opnd *x)
{
    return x->v->dt == a->mdt ? a->mdt : TERN_DTYPE_FP32;
}

/* The dtype of the output tiles: the output's own (its storage: BF16 when only matmuls read it), which the
 * ScalarE copy out of PSUM rounds to as the store's cast would (round to nearest); the store then moves half the
 * bytes. */
static tern_dtype out_tile_dtype(const att *a)
{
    tern_dtype dt = a->Y->dt;
    return dt != TERN_DTYPE_FP32 && tern_dtype_is_float(dt) ? dt : TERN_DTYPE_FP32;
}

/* Loads group g's tiles into its slot (if not there yet). */
static void group_load(att *a, uint64_t g)
{
    att_group *gr = &a->grp[g % ATT_GSLOTS];
    if (gr->g == (int64_t)g)
        return;
    tern_kernel *k = a->k;
    const uint64_t bh = g * a->G, H = a->G, Hkv = H / a->kk.rep; /* GQA: the group's K/V heads, once each */
    gr->g = (int64_t)g;
    gr->q = tern_kernel_sbuf(k, row_dtype(a, &a->q), (uint32_t)a->Sq, (uint32_t)(H * a->D), "att_gq");
    tern_kernel_load(k, gr->q, opnd_rows(a, &a->q, bh, 0, a->Sq, H * a->D));
    gr->k = tern_kernel_sbuf(k, row_dtype(a, &a->kk), (uint32_t)a->Sk, (uint32_t)(Hkv * a->D), "att_gk");
    tern_kernel_load(k, gr->k, opnd_rows(a, &a->kk, bh, 0, a->Sk, Hkv * a->D));
    gr->v = tern_kernel_sbuf(k, a->mdt, (uint32_t)a->Sk, (uint32_t)(Hkv * a->Dv), "att_gv");
    tern_kernel_load(k, gr->v, opnd_rows(a, &a->vv, bh, 0, a->Sk, Hkv * a->Dv));
    gr->o = tern_kernel_sbuf(k, out_tile_dtype(a), (uint32_t)a->Sq, (uint32_t)(H * a->Dv), "att_go");
}

/* After the group's last head: the merged output stored (from ScalarE's queue, behind its last copy), the
 * group's tiles released. */
static void group_finish(att *a, uint64_t g)
{
    att_group *gr = &a->grp[g % ATT_GSLOTS];
    tern_kernel *k = a->k;
    tern_view rows = opnd_rows(a, &a->o, g * a->G, 0, a->Sq, a->G * a->Dv);
    if (a->reader >= 0) { /* handed to the next node in SBUF (stored by cc_kept_flush if it does not take them) */
        compile_ctx *c = a->c;
        c->kept_id = cc_node(c)->outputs[0];
        c->kept_reader = a->reader;
        c->kept_rows = gr->o;
        c->kept_hbm = rows;
    } else {
        tern_kernel_dma_copy_on(k, TERN_ENGINE_SCALAR, rows, gr->o, -1);
        tern_kernel_release(k, gr->o);
    }
    tern_kernel_release(k, gr->v);
    tern_kernel_release(k, gr->k);
    tern_kernel_release(k, gr->q);
    gr->g = -1;
}

/* Head-size chunk c: rows [d0, d0 + dc) of K^T and Q^T. */
static uint64_t dchunk(const att *a, uint64_t c, uint64_t *dc)
{
    *dc = min_u64(a->T, a->D - c * a->T);
    return c * a->T;
}

static void kT_none(att_head *h)
{
    for (unsigned c = 0; c < ATT_DC; c++)
        h->kT[c] = tern_view_none();
}

/* Grouped-query heads, per-head mode: query head bh's place among the rep heads sharing one K/V head. */
static uint64_t kv_pos(const att *a, uint64_t bh)
{
    return a->kk.rep > 1 ? (bh % (uint64_t)a->bdims[a->nb - 1]) % a->kk.rep : 0;
}

static void load_head(att *a, uint64_t bh, att_head *h)
{
    h->nk = 0;
    h->views = 0;
    h->borrow = h->keep = 0;
    if (a->G) { /* grouped: the head's K rows and V are column blocks of its group's tiles */
        uint64_t g = bh / a->G, j = bh % a->G;
        group_load(a, g);
        if (j == 0 && (g + 1) * a->G < a->BH)
            group_load(a, g + 1); /* the next group loads while this one computes */
        att_group *gr = &a->grp[g % ATT_GSLOTS];
        uint64_t jk = j / a->kk.rep; /* the K/V head this query head reads */
        h->views = 1;
        kT_none(h);
        h->krows[0] = tern_view_block(a->k, gr->k, 0, a->Sk, jk * a->D, (jk + 1) * a->D);
        h->v[0] = tern_view_block(a->k, gr->v, 0, a->Sk, jk * a->Dv, (jk + 1) * a->Dv);
        h->nk = h->nv = 1;
        return;
    }
    h->keep = a->kk.rep > 1 && kv_pos(a, bh) != a->kk.rep - 1;
    if (kv_pos(a, bh) != 0) { /* the K/V head the previous query head loaded: nothing to load */
        h->borrow = 1;
        kT_none(h);
        h->nv = 0;
        return;
    }
    kT_none(h);
    if (a->kk.sD != 1 && a->kk.sS == 1) { /* K^T rows contiguous: [D, Sk] straight in */
        uint32_t nums[1] = {(uint32_t)a->Sk};
        int32_t steps[1] = {1};
        for (uint64_t c = 0; c < a->ND; c++) {
            uint64_t dc, d0 = dchunk(a, c, &dc);
            h->kT[c] = tern_kernel_sbuf(a->k, a->mdt, (uint32_t)dc, (uint32_t)a->Sk, "att_kT");
            tern_kernel_load(a->k, h->kT[c], cc_view(a->c, a->kk.v, opnd_base(a, &a->kk, bh) + d0 * (uint64_t)a->kk.sD,
                                                     (uint32_t)dc, a->kk.sD, 1, nums, steps));
        }
    } else { /* K's rows: loaded here, transposed when the head's turn comes */
        for (uint64_t s0 = 0; s0 < a->Sk; s0 += a->T) {
            uint64_t kc = min_u64(a->T, a->Sk - s0);
            tern_view t = tern_kernel_sbuf(a->k, row_dtype(a, &a->kk), (uint32_t)kc, (uint32_t)a->D, "att_krows");
            tern_kernel_load(a->k, t, opnd_rows(a, &a->kk, bh, s0, kc, a->D));
            h->krows[h->nk++] = t;
        }
    }
    h->nv = 0;
    for (uint64_t s0 = 0; s0 < a->Sk; s0 += a->T) {
        uint64_t kc = min_u64(a->T, a->Sk - s0);
        tern_view t = tern_kernel_sbuf(a->k, a->mdt, (uint32_t)kc, (uint32_t)a->Dv, "att_v");
        tern_kernel_load(a->k, t, opnd_rows(a, &a->vv, bh, s0, kc, a->Dv));
        h->v[h->nv++] = t;
    }
}

static void release_head(att *a, att_head *h)
{
    if (h->keep)
        return;
    for (uint64_t c = 0; c < a->ND; c++)
        if (h->kT[c].region >= 0)
            tern_kernel_release(a->k, h->kT[c]);
    if (h->views)
        return;
    for (unsigned j = 0; j < h->nk; j++)
        if (h->krows[j].region >= 0)
            tern_kernel_release(a->k, h->krows[j]);
    for (unsigned j = 0; j < h->nv; j++)
        tern_kernel_release(a->k, h->v[j]);
}


/* The mask's element offset of batch-head bh, query row q0. */
static uint64_t mask_offset(const att *a, uint64_t bh, uint64_t q0)
{
    uint64_t off = q0 * (uint64_t)a->mstride[a->nsd];
    for (int d = a->nsd - 1; d >= 0; d--) {
        uint64_t n = (uint64_t)a->sdims[d];
        off += (bh % n) * (uint64_t)a->mstride[d];
        bh /= n;
    }
    return off;
}

/* K^T [D, Sk] of a head whose K came as rows: each key block cast to the matmul dtype and transposed through
 * the PE array (TensorE, in the head's turn so the prefetch never holds TensorE back). */
static void head_kT(att *a, att_head *h, const att_head *prev)
{
    if (h->borrow) { /* prev (the previous query head, same K/V head) has built K^T by now */
        int keep = h->keep;
        *h = *prev;
        h->borrow = 0;
        h->keep = keep;
        return;
    }
    if (h->kT[0].region >= 0)
        return;
    tern_kernel *k = a->k;
    for (uint64_t c = 0; c < a->ND; c++) {
        uint64_t dc;
        dchunk(a, c, &dc);
        h->kT[c] = tern_kernel_sbuf(k, a->mdt, (uint32_t)dc, (uint32_t)a->Sk, "att_kT");
    }
    for (unsigned j = 0; j < h->nk; j++) {
        uint64_t s0 = (uint64_t)j * a->T, kc = min_u64(a->T, a->Sk - s0);
        tern_view kb = h->krows[j];
        if ((tern_dtype)kb.ap.dtype != a->mdt) {
            kb = tern_kernel_sbuf(k, a->mdt, (uint32_t)kc, (uint32_t)a->D, "att_kb");
            tern_kernel_tensor_copy(k, TERN_ENGINE_VECTOR, kb, h->krows[j]);
        }
        for (uint64_t c = 0; c < a->ND; c++) {
            uint64_t dc, d0 = dchunk(a, c, &dc);
            tern_view ps = tern_kernel_psum(k, a->pdt, (uint32_t)dc, (uint32_t)kc, "att_kT_psum");
            tern_lib_transpose_block(a->k, ps, a->ND > 1 ? tern_view_block(k, kb, 0, kc, d0, d0 + dc) : kb, a->ident);
            tern_lib_copy_scalar(a->k, tern_view_block(k, h->kT[c], 0, dc, s0, s0 + kc), ps);
            tern_kernel_release(k, ps);
        }
        if (kb.region != h->krows[j].region)
            tern_kernel_release(k, kb);
        if (!h->views)
            tern_kernel_release(k, h->krows[j]);
        h->krows[j] = tern_view_none();
    }
}

/* A query tile is lowered in three stages so that consecutive tiles overlap (see cc_lower_attention):
 *   stage A: qT and the products Q K^T into PSUM (tile_scores), then, emitted after the previous item's
 *            softmax, the scaling into the fp32 scores tile x and the mask (tile_scale);
 *   stage B: the softmax and P in the matmul dtype;
 *   stage C: P transposed, P @ V and the store. */
typedef struct {
    uint64_t bh, q0;
    uint32_t rp;
    tern_view q;  /* Q rows [rp, D] (fp32) */
    tern_view ps[4]; /* the raw scores, one PSUM bank per 512 keys (between the two halves of the scores stage) */
    tern_view x;  /* scores [rp, Sk] (fp32, SBUF), then the probabilities */
    tern_view pb; /* the probabilities in the matmul dtype (x itself in fp32) */
} att_tile;

/* Item i's coordinates, and its Q rows loaded (a step ahead of its scores, so the load's latency is hidden). */
static void tile_start(att *a, uint64_t i, att_tile *t)
{
    const uint64_t tiles = (a->Sq + a->T - 1) / a->T;
    t->bh = i / tiles;
    t->q0 = (i % tiles) * a->T;
    t->rp = (uint32_t)min_u64(a->T, a->Sq - t->q0);
    if (a->G) { /* a column block of its group's Q */
        uint64_t j = t->bh % a->G;
        group_load(a, t->bh / a->G);
        att_group *gr = &a->grp[(t->bh / a->G) % ATT_GSLOTS];
        t->q = tern_view_block(a->k, gr->q, 0, t->rp, j * a->D, (j + 1) * a->D);
        return;
    }
    t->q = tern_kernel_sbuf(a->k, row_dtype(a, &a->q), t->rp, (uint32_t)a->D, "att_q");
    tern_kernel_load(a->k, t->q, opnd_rows(a, &a->q, t->bh, t->q0, t->rp, a->D));
}

static void tile_scores(att *a, const att_head *h, att_tile *t)
{
    tern_kernel *k = a->k;
    const uint32_t rp = t->rp;
    /* qT [D, rp] */
    tern_view q = t->q;
    tern_view qb = q;
    if ((tern_dtype)q.ap.dtype != a->mdt) {
        qb = tern_kernel_sbuf(k, a->mdt, rp, (uint32_t)a->D, "att_qb");
        tern_kernel_tensor_copy(k, TERN_ENGINE_VECTOR, qb, q);
    }
    tern_view qT[ATT_DC];
    for (uint64_t c = 0; c < a->ND; c++) {
        uint64_t dc, d0 = dchunk(a, c, &dc);
        tern_view qps = tern_kernel_psum(k, a->pdt, (uint32_t)dc, rp, "att_qT_psum");
        tern_lib_transpose_block(a->k, qps, a->ND > 1 ? tern_view_block(k, qb, 0, rp, d0, d0 + dc) : qb, a->ident);
        qT[c] = tern_kernel_sbuf(k, a->mdt, (uint32_t)dc, rp, "att_qT");
        tern_lib_copy_scalar(a->k, qT[c], qps);
        tern_kernel_release(k, qps);
    }
    if (qb.region != q.region)
        tern_kernel_release(k, qb);
    if (!a->G)
        tern_kernel_release(k, q);
    /* raw scores in PSUM, the head-size chunks accumulated */
    for (uint64_t s0 = 0; s0 < a->Sk; s0 += 512) {
        uint64_t sw = min_u64(512, a->Sk - s0);
        t->ps[s0 / 512] = tern_kernel_psum(k, TERN_DTYPE_FP32, rp, (uint32_t)sw, "att_scores_psum");
        for (uint64_t c = 0; c < a->ND; c++) {
            uint64_t dc;
            dchunk(a, c, &dc);
            tern_kernel_matmul(k, t->ps[s0 / 512], qT[c], tern_view_block(k, h->kT[c], 0, dc, s0, s0 + sw), c > 0);
        }
    }
    for (uint64_t c = 0; c < a->ND; c++)
        tern_kernel_release(k, qT[c]);
}

/* The second half of the scores stage: scaled out of PSUM into the fp32 row tile x, then the mask. */
static void tile_scale(att *a, att_tile *t)
{
    tern_kernel *k = a->k;
    compile_ctx *c = a->c;
    const uint64_t bh = t->bh, q0 = t->q0;
    const uint32_t rp = t->rp, Sk = (uint32_t)a->Sk;
    tern_view x = tern_kernel_sbuf(k, TERN_DTYPE_FP32, rp, Sk, "att_scores");
    for (uint64_t s0 = 0; s0 < a->Sk; s0 += 512) {
        uint64_t sw = min_u64(512, a->Sk - s0);
        tern_view ps = t->ps[s0 / 512];
        tern_view xs = tern_view_block(k, x, 0, rp, s0, s0 + sw);
        if (a->scale_op == 1)
            tern_kernel_tensor_scalar(k, TERN_ENGINE_VECTOR, xs, ps, TERN_ALU_DIVIDE, a->scale, TERN_ALU_BYPASS, 0.0f);
        else if (a->scale_op == 2)
            tern_kernel_tensor_scalar(k, TERN_ENGINE_VECTOR, xs, ps, TERN_ALU_MULT, a->scale, TERN_ALU_BYPASS, 0.0f);
        else
            tern_kernel_tensor_copy(k, TERN_ENGINE_VECTOR, xs, ps);
        tern_kernel_release(k, ps);
    }
    /* mask */
    if (a->mode) {
        tern_view m = tern_kernel_sbuf(k, TERN_DTYPE_FP32, rp, Sk, "att_mask");
        uint32_t nums[1] = {Sk};
        int32_t steps[1] = {(int32_t)a->mstride[a->nsd + 1]};
        tern_kernel_load(k, m, cc_view(c, a->M, mask_offset(a, bh, q0), rp, a->mstride[a->nsd], 1, nums, steps));
        if (a->mode == 3) {
            tern_kernel_tensor_tensor(k, TERN_ENGINE_VECTOR, x, x, m, TERN_ALU_ADD);
        } else {
            tern_view f = tern_view_block(k, a->fill_tile, 0, rp, 0, Sk);
            if (a->mode == 1)
                tern_kernel_select(k, x, m, f, x);
            else
                tern_kernel_select(k, x, m, x, f);
        }
        tern_kernel_release(k, m);
    }
    t->x = x;
}

static void tile_softmax(att *a, att_tile *t)
{
    tern_kernel *k = a->k;
    /* softmax over the keys (tern_lib_softmax's sequence), its last step writing P in the matmul dtype */
    t->pb = t->x;
    if (a->mdt != TERN_DTYPE_FP32)
        t->pb = tern_kernel_sbuf(k, a->mdt, t->rp, (uint32_t)a->Sk, "att_p");
    tern_lib_softmax_tile_to(k, t->x, t->pb);
}

static void tile_output(att *a, const att_head *h, att_tile *t)
{
    tern_kernel *k = a->k;
    const uint32_t rp = t->rp;
    /* P transposed per key block and accumulated against V. The accumulation group owns a whole PSUM bank (512
     * fp32): the simulator, like the hardware, tracks accumulation per bank, and the transposes in between must
     * not land in it. */
    tern_view o_bank = tern_kernel_psum(k, TERN_DTYPE_FP32, rp, 512, "att_out_psum");
    tern_view o_ps = tern_view_block(k, o_bank, 0, rp, 0, a->Dv);
    for (unsigned j = 0; j < h->nv; j++) {
        uint64_t s0 = (uint64_t)j * a->T, kc = min_u64(a->T, a->Sk - s0);
        tern_view tps = tern_kernel_psum(k, a->pdt, (uint32_t)kc, rp, "att_pT_psum");
        tern_lib_transpose_block(a->k, tps, tern_view_block(k, t->pb, 0, rp, s0, s0 + kc), a->ident);
        tern_view pT = tern_kernel_sbuf(k, a->mdt, (uint32_t)kc, rp, "att_pT");
        tern_lib_copy_scalar(a->k, pT, tps);
        tern_kernel_release(k, tps);
        tern_kernel_matmul(k, o_ps, pT, h->v[j], j > 0);
        tern_kernel_release(k, pT);
    }
    if (t->pb.region != t->x.region)
        tern_kernel_release(k, t->pb);
    tern_kernel_release(k, t->x);
    if (a->G) { /* into the group's merged output, stored with the group */
        uint64_t j = t->bh % a->G;
        tern_lib_copy_scalar(a->k, tern_view_block(k, a->grp[(t->bh / a->G) % ATT_GSLOTS].o, 0, rp, j * a->Dv, (j + 1) * a->Dv),
                             o_ps);
        tern_kernel_release(k, o_bank);
        if (j == a->G - 1)
            group_finish(a, t->bh / a->G);
        return;
    }
    tern_view o = tern_kernel_sbuf(k, out_tile_dtype(a), rp, (uint32_t)a->Dv, "att_out");
    tern_lib_copy_scalar(a->k, o, o_ps);
    tern_kernel_release(k, o_bank);
    /* stored from ScalarE's own DMA queue, right behind its copy, so SyncE's stream (the next tiles' and heads'
     * loads) never waits behind this tile's compute */
    tern_kernel_dma_copy_on(k, TERN_ENGINE_SCALAR, opnd_rows(a, &a->o, t->bh, t->q0, rp, a->Dv), o, -1);
    tern_kernel_release(k, o);
}

/* The node that takes the merged output rows of a single group in SBUF instead of from HBM, or -1: the next node
 * in order, the output's only reader, a linear layer with a constant 2-D weight taking it as its input (lower_linear.c
 * runs tern_lib_linear_rows on them), when the rows are the whole output [Sq, H x Dv], row after row. */
static int keep_reader(const att *a)
{
    compile_ctx *c = a->c;
    const tern_graph *g = c->g;
    const tern_graph_node *self = cc_node(c);
    int yid = self->n_outputs > 0 ? self->outputs[0] : -1, j = c->node + 1;
    if (c->o->no_keep_on_chip || yid < 0 || !a->G || a->bdims[0] != 1 || a->o.off != 0 ||
        a->o.sS != (int64_t)(a->G * a->Dv) || a->Y->numel != a->Sq * a->G * a->Dv || c->v[yid].last_use != j ||
        j >= tern_graph_node_count(g) || cc_fuse_member(c, j) || cc_msum_member(c, j) || cc_conv_epi_member(c, j) ||
        !cc_readers_only(c, yid, j, 0, -1, 0))
        return -1;
    const tern_graph_node *n = tern_graph_node_at(g, j);
    if (!cc_node_is_linear(g, j) || n->n_inputs < 2 || n->inputs[0] != yid)
        return -1;
    return j;
}

int cc_lower_attention(compile_ctx *c)
{
    const tern_graph_node *n = cc_node(c);
    att a;
    memset(&a, 0, sizeof a);
    a.c = c;
    a.k = c->k;
    cc_value *Q = cc_in(c, 0), *K = cc_in(c, 1), *V = cc_in(c, 2);
    a.M = n->n_inputs > 3 ? cc_in(c, 3) : NULL;
    a.Y = cc_out(c, 0, cc_float_out_dtype(c, 0));
    if (!Q || !K || !V || !a.Y)
        return 1;
    a.scale_op = (int)tern_graph_attr_int(n, "scale_op", 0);
    a.mode = (int)tern_graph_attr_int(n, "mask", 0);
    a.scale = tern_graph_attr_float(n, "scale", 1.0f);
    a.fill = tern_graph_attr_float(n, "fill", 0.0f);
    a.q.v = Q, a.kk.v = K, a.vv.v = V, a.o.v = a.Y;
    if (tern_graph_node_attr(n, "q")) {
        /* the layout form: logical [B, H, S, D] views of the sources (checked against their sizes) */
        const tern_graph_attr *da = tern_graph_node_attr(n, "dims");
        static const char *const names[4] = {"q", "k", "v", "o"};
        att_opnd *ops[4] = {&a.q, &a.kk, &a.vv, &a.o};
        if (!da || da->type != TERN_ATTR_INTS || da->n != 6) {
            cc_fail(c, TERN_ERR_INVALID, "Attention layout form without \"dims\" (6 ints)");
            return 1;
        }
        const int64_t *dm = da->ints;
        for (int d = 0; d < 6; d++)
            if (dm[d] < 1 || dm[d] > (int64_t)1 << 20) {
                cc_fail(c, TERN_ERR_INVALID, "Attention dims[%d] = %lld", d, (long long)dm[d]);
                return 1;
            }
        /* grouped-query heads: K and V hold dims[1] / kv_rep heads, each read by kv_rep query heads */
        int64_t rep = tern_graph_attr_int(n, "kv_rep", 1);
        if (rep < 1 || dm[1] % rep != 0) {
            cc_fail(c, TERN_ERR_INVALID, "Attention kv_rep %lld does not divide its %lld heads", (long long)rep,
                    (long long)dm[1]);
            return 1;
        }
        a.kk.rep = a.vv.rep = (uint64_t)rep;
        a.Sq = (uint64_t)dm[2], a.Sk = (uint64_t)dm[3], a.D = (uint64_t)dm[4], a.Dv = (uint64_t)dm[5];
        int64_t ld[4][4] = {{dm[0], dm[1], dm[2], dm[4]}, {dm[0], dm[1] / rep, dm[3], dm[4]},
                            {dm[0], dm[1] / rep, dm[3], dm[5]}, {dm[0], dm[1], dm[2], dm[5]}};
        for (int i = 0; i < 4; i++) {
            const tern_graph_attr *va = tern_graph_node_attr(n, names[i]);
            if (!va || va->type != TERN_ATTR_INTS || va->n != 5) {
                cc_fail(c, TERN_ERR_INVALID, "Attention layout attribute \"%s\" must be 5 ints", names[i]);
                return 1;
            }
            int64_t hi = va->ints[0];
            for (int d = 0; d < 5; d++) {
                if (va->ints[d] < 0 || va->ints[d] > INT32_MAX) {
                    cc_fail(c, TERN_ERR_INVALID, "Attention layout \"%s\"[%d] = %lld", names[i], d,
                            (long long)va->ints[d]);
                    return 1;
                }
                if (d)
                    hi += (ld[i][d - 1] - 1) * va->ints[d];
            }
            if ((uint64_t)hi >= ops[i]->v->numel) {
                cc_fail(c, TERN_ERR_INVALID, "Attention layout \"%s\" reaches element %lld of a tensor of %llu",
                        names[i], (long long)hi, (unsigned long long)ops[i]->v->numel);
                return 1;
            }
            ops[i]->off = va->ints[0];
            ops[i]->bstride[0] = va->ints[1];
            ops[i]->bstride[1] = va->ints[2];
            ops[i]->sS = va->ints[3];
            ops[i]->sD = va->ints[4];
        }
        a.nb = 2;
        a.bdims[0] = dm[0], a.bdims[1] = dm[1];
        a.nsd = 2;
        a.sdims[0] = dm[0], a.sdims[1] = dm[1];
    } else {
        int r = Q->rank;
        if (r < 2 || K->rank != r || V->rank != r || a.Y->rank != r) {
            cc_fail(c, TERN_ERR_INVALID, "Attention needs Q, KT, V and the output of one rank >= 2");
            return 1;
        }
        a.Sq = (uint64_t)Q->dims[r - 2], a.D = (uint64_t)Q->dims[r - 1];
        a.Sk = (uint64_t)K->dims[r - 1], a.Dv = (uint64_t)V->dims[r - 1];
        /* one flattened batch dim; K is KT [.., D, Sk] seen as [.., Sk, D] */
        a.nb = 1;
        a.kk.rep = a.vv.rep = 1;
        a.bdims[0] = (a.Sq && a.D) ? (int64_t)(Q->numel / (a.Sq * a.D)) : 0;
        a.q.bstride[0] = (int64_t)(a.Sq * a.D), a.q.sS = (int64_t)a.D, a.q.sD = 1;
        a.kk.bstride[0] = (int64_t)(a.D * a.Sk), a.kk.sS = 1, a.kk.sD = (int64_t)a.Sk;
        a.vv.bstride[0] = (int64_t)(a.Sk * a.Dv), a.vv.sS = (int64_t)a.Dv, a.vv.sD = 1;
        a.o.bstride[0] = (int64_t)(a.Sq * a.Dv), a.o.sS = (int64_t)a.Dv, a.o.sD = 1;
        a.nsd = r - 2;
        for (int d = 0; d < r - 2; d++)
            a.sdims[d] = a.Y->dims[d];
    }
    a.BH = 1;
    for (int d = 0; d < a.nb; d++)
        a.BH *= (uint64_t)a.bdims[d];
    a.T = c->cfg.pe_rows < c->cfg.pe_cols ? c->cfg.pe_rows : c->cfg.pe_cols;
    if (a.T > c->cfg.partitions)
        a.T = c->cfg.partitions;
    if (a.scale_op < 0 || a.scale_op > 2 || a.mode < 0 || a.mode > 3 || (a.mode != 0) != (a.M != NULL)) {
        cc_fail(c, TERN_ERR_INVALID, "Attention with scale_op %d and mask %d (%s mask input)", a.scale_op, a.mode,
                a.M ? "a" : "no");
        return 1;
    }
    if (a.D > ATT_DC * a.T || a.Dv > 512 || a.Sk > ATT_KB * a.T || a.BH == 0) {
        cc_fail(c, TERN_ERR_UNSUPPORTED,
                "Attention with head size %llu (at most %llu), value size %llu (at most 512), %llu keys (at most %llu) "
                "on a %llu x %llu PE array",
                (unsigned long long)a.D, (unsigned long long)(ATT_DC * a.T), (unsigned long long)a.Dv,
                (unsigned long long)a.Sk, (unsigned long long)(ATT_KB * a.T), (unsigned long long)c->cfg.pe_rows,
                (unsigned long long)c->cfg.pe_cols);
        return 1;
    }
    a.ND = (a.D + a.T - 1) / a.T;
    if (a.M) {
        int mr = a.M->rank, r = a.nsd + 2;
        int64_t ms[CC_MAX_RANK];
        cc_strides(a.M, ms);
        if (mr > r || mr < 1 || a.M->dims[mr - 1] != (int64_t)a.Sk) {
            cc_fail(c, TERN_ERR_UNSUPPORTED, "Attention mask of rank %d whose last dim is not the %llu keys", mr,
                    (unsigned long long)a.Sk);
            return 1;
        }
        for (int d = 0; d < r; d++) {
            int md = d - (r - mr);
            int64_t sd = d == r - 1 ? (int64_t)a.Sk : d == r - 2 ? (int64_t)a.Sq : a.sdims[d];
            if (md >= 0 && a.M->dims[md] != 1 && a.M->dims[md] != sd) {
                cc_fail(c, TERN_ERR_INVALID, "Attention mask dim %d is %lld, the scores' is %lld", md,
                        (long long)a.M->dims[md], (long long)sd);
                return 1;
            }
            a.mstride[d] = (md < 0 || a.M->dims[md] == 1) ? 0 : ms[md];
        }
    }
    a.mdt = c->o->matmul_dtype;
    /* Grouped mode (att_group): the layout form with one row tile of queries and keys (Sq, Sk <= 128), rows
     * contiguous and the heads side by side (head stride = head size) in Q, K, V and the output, and the
     * group's tiles small; else each head loads its own operands. */
    for (int s = 0; s < ATT_GSLOTS; s++)
        a.grp[s].g = -1;
    a.G = 0;
    if (a.nb == 2 && a.bdims[1] > 1 && a.Sq <= a.T && a.Sk <= a.T && a.q.sD == 1 && a.kk.sD == 1 && a.vv.sD == 1 &&
        a.o.sD == 1 && a.q.bstride[1] == (int64_t)a.D && a.kk.bstride[1] == (int64_t)a.D &&
        a.vv.bstride[1] == (int64_t)a.Dv && a.o.bstride[1] == (int64_t)a.Dv &&
        (uint64_t)a.bdims[1] * (a.D + a.Dv) * 4 <= 16384)
        a.G = (uint64_t)a.bdims[1];
    a.reader = keep_reader(&a);
    a.pe_mode = c->cfg.generation >= 3;
    a.pdt = a.pe_mode ? a.mdt : TERN_DTYPE_FP32;
    tern_kernel *k = c->k;
    a.ident = tern_view_none();
    a.fill_tile = tern_view_none();
    if (!a.pe_mode) {
        a.ident = tern_kernel_sbuf(k, a.mdt, (uint32_t)a.T, (uint32_t)a.T, "att_identity");
        tern_lib_identity(k, a.ident);
    }
    if (a.mode == 1 || a.mode == 2) {
        a.fill_tile = tern_kernel_sbuf(k, TERN_DTYPE_FP32, (uint32_t)min_u64(a.T, a.Sq), (uint32_t)a.Sk, "att_fill");
        tern_kernel_memset(k, TERN_ENGINE_GPSIMD, a.fill_tile, a.fill);
    }
    /* A three-stage software pipeline over the (batch-head, query tile) items: at step i, item i's scores
     * (stage A), item i-1's softmax (B) and item i-2's P @ V (C) are emitted, in that order, so TensorE computes
     * scores and products of neighbouring items while ScalarE and VectorE run a softmax, and the next Q rows load
     * meanwhile. Each item's arithmetic is unchanged, so the outputs are too. Four head slots: the heads of the
     * three items in flight and the prefetch of the next one (K and V of head h+1 load when head h starts). */
    att_head heads[4];
    att_tile tl[4];
    const uint64_t tiles = (a.Sq + a.T - 1) / a.T, items = a.BH * tiles;
    if (items) {
        load_head(&a, 0, &heads[0]);
        tile_start(&a, 0, &tl[0]);
    }
    for (uint64_t i = 0; i < items + 2 && cc_ok(c); i++) {
        if (i + 1 < items)
            tile_start(&a, i + 1, &tl[(i + 1) % 4]);
        if (i < items) {
            att_tile *t = &tl[i % 4];
            if (t->q0 == 0) { /* a new head: prefetch the next one, build this one's K^T */
                if (t->bh + 1 < a.BH)
                    load_head(&a, t->bh + 1, &heads[(t->bh + 1) % 4]);
                head_kT(&a, &heads[t->bh % 4], &heads[(t->bh + 3) % 4]);
            }
            tile_scores(&a, &heads[t->bh % 4], t);
        }
        if (i >= 1 && i - 1 < items)
            tile_softmax(&a, &tl[(i - 1) % 4]);
        if (i < items) /* after the softmax: VectorE's softmax never waits behind this item's products */
            tile_scale(&a, &tl[i % 4]);
        if (i >= 2) {
            att_tile *t = &tl[(i - 2) % 4];
            tile_output(&a, &heads[t->bh % 4], t);
            if (t->q0 + a.T >= a.Sq) /* the head's last tile */
                release_head(&a, &heads[t->bh % 4]);
        }
    }
    a.Y->stored_off_sync = 1; /* every store of the output is on ScalarE's queue */
    if (a.fill_tile.region >= 0)
        tern_kernel_release(k, a.fill_tile);
    if (a.ident.region >= 0)
        tern_kernel_release(k, a.ident);
    c->model_flops += 2.0 * (double)a.BH * (double)a.Sq * (double)a.Sk * (double)(a.D + a.Dv);
    return 1;
}

static const cc_rule attention_rules[] = {
    {TERN_GOP_ATTENTION, "attention.fused", NULL, cc_lower_attention},
    {TERN_GOP_ATTENTION_GRAD, "attention.grad_fused", NULL, cc_lower_attention_grad}, /* lower_attention_bwd.c */
};
const cc_rule_set cc_rules_attention = CC_RULE_SET("lower_attention.c", attention_rules);
