/* The fused optimizer update (tern_lib_optim_update): one kernel per weight that streams the weight, its gradient
 * and its optimizer state through SBUF once, tile by tile ([rows, cols] views, 128 partitions by OPT_CHUNK
 * columns), and stores the new weight and state. Each tile runs the instructions the node-by-node step graph
 * lowers to (lower_elementwise.c: a constant operand as tensor_scalar's immediate, a one-element run-time scalar
 * as tensor_scalar's per-partition column, tensor by tensor as tensor_tensor, Sqrt as ScalarE's activation), in
 * the same order on the same operands, so every element gets the same fp32 operations with the same rounding:
 * the result is bit-identical to the unfused graph's; only the HBM round trips of the intermediates are gone.
 * LAMB (TERN_OPTIM_LAMB) is its first pass: the new state and the direction r, stored in place of the weight. */
#include <stdio.h>
#include <string.h>

#include "kernel/builder_internal.h"
#include "tern/kernel_lib.h"

#define OPT_CHUNK 1024u /* free elements per tile: up to 12 tiles live per step (and the next step's loads) */
#define VEC TERN_ENGINE_VECTOR

static uint64_t min_u64(uint64_t a, uint64_t b) { return a < b ? a : b; }

static int have(const tern_view *v) { return v->region >= 0; }

static int check_view(tern_kernel *k, const char *what, const tern_view *v, uint64_t R, uint64_t C)
{
    char label[64];
    snprintf(label, sizeof label, "optim_update %s", what);
    if (!kview_ok(k, v, label))
        return 0;
    if (tern_view_rank(v) != 2 || tern_view_dim(v, 0) != R || tern_view_dim(v, 1) != C) {
        kfail(k, TERN_ERR_INVALID, "optim_update: %s must be a 2-D [%llu, %llu] view (rank %u, first dim %llu)", what,
              (unsigned long long)R, (unsigned long long)C, tern_view_rank(v),
              (unsigned long long)(tern_view_rank(v) ? tern_view_dim(v, 0) : 0));
        return 0;
    }
    return 1;
}

/* A [rp, 1] fp32 column of a run-time scalar for rows r0 .. r0 + rp (widened on chip as ew_load does). */
static tern_view load_col(tern_kernel *k, tern_view col, uint64_t r0, uint64_t rp)
{
    tern_view src = tern_view_block(k, col, r0, r0 + rp, 0, 1);
    tern_view t = tern_kernel_sbuf(k, TERN_DTYPE_FP32, (uint32_t)rp, 1, "opt_col");
    if (col.ap.dtype == TERN_DTYPE_FP32) {
        tern_kernel_load(k, t, src);
    } else {
        tern_view raw = tern_kernel_sbuf(k, (tern_dtype)col.ap.dtype, (uint32_t)rp, 1, "opt_col_raw");
        tern_kernel_load(k, raw, src);
        tern_kernel_tensor_copy(k, VEC, t, raw);
        tern_kernel_release(k, raw);
    }
    return t;
}

static void ts_col(tern_kernel *k, tern_view y, tern_view x, tern_alu_op op, tern_view col)
{
    tern_kernel_tensor_scalar_ap(k, VEC, y, x, op, col, 0.0f, TERN_ALU_BYPASS, kview_invalid(), 0.0f, 0u);
}

static void ts_imm(tern_kernel *k, tern_view y, tern_view x, tern_alu_op op, float s)
{
    tern_kernel_tensor_scalar(k, VEC, y, x, op, s, TERN_ALU_BYPASS, 0.0f);
}

typedef struct {
    uint64_t r0, rp, c0, cw;
    tern_view p, g, s0, s1;
} opt_tile;

static tern_view load_tile(tern_kernel *k, tern_view src, const opt_tile *t, const char *name)
{
    if (!have(&src))
        return kview_invalid();
    tern_view x = tern_kernel_sbuf(k, (tern_dtype)src.ap.dtype, (uint32_t)t->rp, (uint32_t)t->cw, name);
    tern_kernel_load(k, x, tern_view_block(k, src, t->r0, t->r0 + t->rp, t->c0, t->c0 + t->cw));
    return x;
}

static void load_all(tern_kernel *k, const tern_optim_update *u, opt_tile *t)
{
    t->p = load_tile(k, u->p, t, "opt_p");
    t->g = load_tile(k, u->g, t, "opt_g");
    t->s0 = load_tile(k, u->s0, t, "opt_s0");
    t->s1 = load_tile(k, u->s1, t, "opt_s1");
}

static void store(tern_kernel *k, tern_view dst, const opt_tile *t, tern_view y)
{
    tern_kernel_store(k, tern_view_block(k, dst, t->r0, t->r0 + t->rp, t->c0, t->c0 + t->cw), y);
}

static tern_view tmp(tern_kernel *k, const opt_tile *t, const char *name)
{
    return tern_kernel_sbuf(k, TERN_DTYPE_FP32, (uint32_t)t->rp, (uint32_t)t->cw, name);
}

/* One tile of the update; every comment's operation is one node of step_graph.c's build_update. */
static void update_tile(tern_kernel *k, const tern_optim_update *u, const opt_tile *t)
{
    tern_view coef = have(&u->coef) ? load_col(k, u->coef, t->r0, t->rp) : kview_invalid();
    tern_view lr = load_col(k, u->lr, t->r0, t->rp);
    tern_view g = t->g, a = tmp(k, t, "opt_a"), b = tmp(k, t, "opt_b"), gs = kview_invalid();
    if (have(&coef)) { /* g * clip coefficient */
        gs = tmp(k, t, "opt_gc");
        ts_col(k, gs, g, TERN_ALU_MULT, coef);
        g = gs;
    }
    if (u->kind == TERN_OPTIM_SGD) {
        tern_view d = g, dd = kview_invalid(), buf = kview_invalid();
        if (u->weight_decay != 0) { /* d = g + p * wd */
            dd = tmp(k, t, "opt_d");
            ts_imm(k, a, t->p, TERN_ALU_MULT, u->weight_decay);
            tern_kernel_tensor_tensor(k, VEC, dd, d, a, TERN_ALU_ADD);
            d = dd;
        }
        if (have(&u->s0)) { /* buf = buf * mu + d; d = nesterov ? d + buf * mu : buf */
            buf = tmp(k, t, "opt_buf");
            ts_imm(k, a, t->s0, TERN_ALU_MULT, u->momentum);
            tern_kernel_tensor_tensor(k, VEC, buf, a, d, TERN_ALU_ADD);
            store(k, u->out_s0, t, buf);
            if (u->nesterov) {
                ts_imm(k, a, buf, TERN_ALU_MULT, u->momentum);
                tern_kernel_tensor_tensor(k, VEC, b, d, a, TERN_ALU_ADD);
                d = b;
            } else {
                d = buf;
            }
        }
        tern_view np = tmp(k, t, "opt_np"); /* p - d * lr */
        ts_col(k, a, d, TERN_ALU_MULT, lr);
        tern_kernel_tensor_tensor(k, VEC, np, t->p, a, TERN_ALU_SUBTRACT);
        store(k, u->out_p, t, np);
        tern_kernel_release(k, np);
        if (have(&buf))
            tern_kernel_release(k, buf);
        if (have(&dd))
            tern_kernel_release(k, dd);
    } else {
        const int lamb = u->kind == TERN_OPTIM_LAMB;
        tern_view bc2 = load_col(k, u->bc2_sqrt, t->r0, t->rp);
        tern_view decay = !lamb && u->adamw && u->weight_decay != 0 ? load_col(k, u->decay, t->r0, t->rp)
                                                                    : kview_invalid();
        tern_view pp = t->p, pd = kview_invalid(), gw = kview_invalid();
        if (have(&decay)) { /* AdamW: p * (1 - lr wd) */
            pd = tmp(k, t, "opt_pd");
            ts_col(k, pd, t->p, TERN_ALU_MULT, decay);
            pp = pd;
        }
        if (!lamb && !u->adamw && u->weight_decay != 0) { /* Adam: g + p * wd */
            gw = tmp(k, t, "opt_gw");
            ts_imm(k, a, t->p, TERN_ALU_MULT, u->weight_decay);
            tern_kernel_tensor_tensor(k, VEC, gw, g, a, TERN_ALU_ADD);
            g = gw;
        }
        /* Two nodes in one instruction where the first's fp32 result is read only by the second: (m b1) + ...
         * and (v b2) + ... as scalar_tensor_tensor, / sqrt(bc2) then + eps as one two-op tensor_scalar. Each
         * computes the first op in fp32 and applies the second to that fp32 value, as the two instructions did
         * through the fp32 tile between them: the same bits, one VectorE pass fewer each. */
        tern_view m = tmp(k, t, "opt_m"), v = tmp(k, t, "opt_v");
        ts_imm(k, b, g, TERN_ALU_MULT, u->one_minus_beta1); /* m = m b1 + g (1 - b1) */
        tern_kernel_scalar_tensor_tensor(k, m, t->s0, TERN_ALU_MULT, u->beta1, TERN_ALU_ADD, b);
        store(k, u->out_s0, t, m);
        tern_kernel_tensor_tensor(k, VEC, b, g, g, TERN_ALU_MULT); /* v = v b2 + (g g) (1 - b2) */
        ts_imm(k, b, b, TERN_ALU_MULT, u->one_minus_beta2);
        tern_kernel_scalar_tensor_tensor(k, v, t->s1, TERN_ALU_MULT, u->beta2, TERN_ALU_ADD, b);
        store(k, u->out_s1, t, v);
        /* denom = sqrt(v) / sqrt(bc2) + eps */
        tern_kernel_activation(k, a, v, TERN_ACT_SQRT, 1.0f, kview_invalid(), kview_invalid(), kview_invalid());
        tern_kernel_tensor_scalar_ap(k, VEC, a, a, TERN_ALU_DIVIDE, bc2, 0.0f, TERN_ALU_ADD, kview_invalid(), u->eps,
                                     0u);
        if (lamb) { /* r = (m / bc1) / denom [+ p * wd] */
            tern_kernel_scalar_tensor_tensor_ap(k, b, m, TERN_ALU_DIVIDE, lr, 0.0f, TERN_ALU_DIVIDE, a);
            if (u->weight_decay != 0) {
                ts_imm(k, a, t->p, TERN_ALU_MULT, u->weight_decay);
                tern_kernel_tensor_tensor(k, VEC, b, b, a, TERN_ALU_ADD);
            }
            store(k, u->out_p, t, b);
        } else {
            tern_kernel_tensor_tensor(k, VEC, b, m, a, TERN_ALU_DIVIDE); /* pp - (m / denom) * step */
            ts_col(k, b, b, TERN_ALU_MULT, lr);
            tern_kernel_tensor_tensor(k, VEC, a, pp, b, TERN_ALU_SUBTRACT);
            store(k, u->out_p, t, a);
        }
        tern_kernel_release(k, m);
        tern_kernel_release(k, v);
        if (have(&gw))
            tern_kernel_release(k, gw);
        if (have(&pd))
            tern_kernel_release(k, pd);
        if (have(&decay))
            tern_kernel_release(k, decay);
        tern_kernel_release(k, bc2);
    }
    if (have(&gs))
        tern_kernel_release(k, gs);
    tern_kernel_release(k, a);
    tern_kernel_release(k, b);
    tern_kernel_release(k, lr);
    if (have(&coef))
        tern_kernel_release(k, coef);
}

void tern_lib_optim_update(tern_kernel *k, const tern_optim_update *u)
{
    if (!u || !kview_ok(k, &u->p, "optim_update p"))
        return;
    if (tern_view_rank(&u->p) != 2) {
        kfail(k, TERN_ERR_INVALID, "optim_update: p must be a 2-D [rows, cols] view, has rank %u", tern_view_rank(&u->p));
        return;
    }
    if (u->kind != TERN_OPTIM_SGD && u->kind != TERN_OPTIM_ADAM && u->kind != TERN_OPTIM_LAMB) {
        kfail(k, TERN_ERR_INVALID, "optim_update: kind %d is not TERN_OPTIM_SGD (0), TERN_OPTIM_ADAM (1) or "
              "TERN_OPTIM_LAMB (2)", u->kind);
        return;
    }
    const uint64_t R = tern_view_dim(&u->p, 0), C = tern_view_dim(&u->p, 1), P = k->cfg.partitions;
    int adam = u->kind != TERN_OPTIM_SGD, mom = have(&u->s0);
    if (!check_view(k, "g", &u->g, R, C) || !check_view(k, "out_p", &u->out_p, R, C) ||
        !check_view(k, "lr", &u->lr, R, 1) || (have(&u->coef) && !check_view(k, "coef", &u->coef, R, 1)))
        return;
    if ((adam || mom) && (!check_view(k, "s0", &u->s0, R, C) || !check_view(k, "out_s0", &u->out_s0, R, C)))
        return;
    if (adam && (!check_view(k, "s1", &u->s1, R, C) || !check_view(k, "out_s1", &u->out_s1, R, C) ||
                 !check_view(k, "bc2_sqrt", &u->bc2_sqrt, R, 1) ||
                 (u->kind == TERN_OPTIM_ADAM && u->adamw && u->weight_decay != 0 &&
                  !check_view(k, "decay", &u->decay, R, 1))))
        return;
    /* row tiles of 128 outside, column chunks inside; the next tile's loads are issued before this tile's
     * computation so the DMA queues run ahead of VectorE (double buffering, as lib_elementwise.c's walk) */
    opt_tile cur = {0, min_u64(P, R), 0, min_u64(OPT_CHUNK, C), {0}, {0}, {0}, {0}};
    load_all(k, u, &cur);
    for (;;) {
        if (k->failed)
            return;
        opt_tile nxt = cur;
        int more = kernel_tile_next(R, C, P, OPT_CHUNK, &nxt.r0, &nxt.rp, &nxt.c0, &nxt.cw);
        if (more)
            load_all(k, u, &nxt);
        update_tile(k, u, &cur);
        tern_view *ts[4] = {&cur.p, &cur.g, &cur.s0, &cur.s1};
        for (int i = 0; i < 4; i++)
            if (have(ts[i]))
                tern_kernel_release(k, *ts[i]);
        if (!more)
            return;
        cur = nxt;
    }
}
