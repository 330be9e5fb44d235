/* Gemm with every attribute (transA, transB, alpha, beta, a broadcast C): the general rule behind lower.c's
 * fused linear layer, which takes only the default Gemm with a constant 2-D weight. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "compiler/lower_tiles.h"
#include "graph/graph_internal.h"
#include "graph/op_params.h"

/* ---- Gemm with every attribute ---- */

static int lower_gemm(cc *c)
{
    const tern_graph_node *n = cc_node(c);
    cc_value *a = cc_in(c, 0), *b = cc_in(c, 1), *cv = cc_in(c, 2);
    cc_value *y = cc_out(c, 0, TERN_DTYPE_FP32);
    if (!a || !b || !y)
        return 1;
    if (a->rank != 2 || b->rank != 2) {
        cc_fail(c, TERN_ERR_INVALID, "Gemm of ranks %d and %d", a->rank, b->rank);
        return 1;
    }
    int ta = (int)tern_graph_attr_int(n, "transA", 0), tb = (int)tern_graph_attr_int(n, "transB", 0);
    float alpha = tern_graph_attr_float(n, "alpha", 1.0f), beta = tern_graph_attr_float(n, "beta", 1.0f);
    uint64_t M = (uint64_t)a->dims[ta ? 1 : 0], K = (uint64_t)a->dims[ta ? 0 : 1];
    uint64_t N = (uint64_t)b->dims[tb ? 0 : 1];
    tern_dtype mdt = c->o->matmul_dtype;
    /* lhsT [K, M] and rhs [K, N] in the matmul dtype */
    tern_view lhsT = cc_temp(c, mdt, K, M);
    if (ta)
        cc_copy(c, lhsT, cc_view2d(c, a, 0, K, M, M));
    else
        tern_lib_transpose(c->k, lhsT, cc_view2d(c, a, 0, M, K, K));
    tern_view rhs;
    int rhs_tmp = 0;
    if (b->host) {
        rhs = cc_const2d(c, b->host, mdt, K, N, tb);
    } else {
        rhs = cc_temp(c, mdt, K, N);
        rhs_tmp = 1;
        if (tb)
            tern_lib_transpose(c->k, rhs, cc_view2d(c, b, 0, N, K, K));
        else
            cc_copy(c, rhs, cc_view2d(c, b, 0, K, N, N));
    }
    tern_gemm_opts go;
    tern_gemm_opts_default(&go);
    go.acc_dtype = TERN_DTYPE_FP32;
    go.tiles_in_block_m = 8;
    int epilogue = alpha != 1.0f || (cv && beta != 0.0f);
    tern_view prod = epilogue ? cc_temp(c, TERN_DTYPE_FP32, M, N) : cc_view2d(c, y, 0, M, N, N);
    tern_lib_gemm(c->k, prod, lhsT, rhs, &go);
    c->model_flops += 2.0 * (double)M * (double)N * (double)K;
    tern_kernel_release(c->k, lhsT);
    if (rhs_tmp)
        tern_kernel_release(c->k, rhs);
    if (epilogue) {
        cc_value pv;
        memset(&pv, 0, sizeof pv);
        pv.dt = TERN_DTYPE_FP32;
        pv.flat = prod;
        pv.rank = 2;
        pv.dims[0] = (int64_t)M;
        pv.dims[1] = (int64_t)N;
        pv.numel = M * N;
        pv.placed = 1;
        tern_view yv = cc_view2d(c, y, 0, 1, M * N, M * N);
        if (cv && beta != 0.0f) {
            cc_value tcb;
            cc_value *cb = lx_bcast(c, cv, y, &tcb);
            if (cb) {
                tern_view cbv = cc_view2d(c, cb, 0, 1, M * N, M * N);
                tern_lib_scalar(c->k, yv, cc_view2d(c, &pv, 0, 1, M * N, M * N), TERN_ALU_MULT, alpha);
                tern_view ct = cc_temp(c, TERN_DTYPE_FP32, 1, M * N);
                tern_lib_scalar(c->k, ct, cbv, TERN_ALU_MULT, beta);
                tern_lib_binary(c->k, yv, yv, ct, TERN_ALU_ADD);
                tern_kernel_release(c->k, ct);
                lx_bcast_free(c, &tcb, cb);
            }
        } else {
            tern_lib_scalar(c->k, yv, cc_view2d(c, &pv, 0, 1, M * N, M * N), TERN_ALU_MULT, alpha);
        }
        tern_kernel_release(c->k, prod);
    }
    return 1;
}

static const cc_rule linear_rules[] = {
    {TERN_GOP_GEMM, "gemm.general", NULL, lower_gemm},
};
const cc_rule_set cc_rules_linear = CC_RULE_SET("lower_linear.c", linear_rules);
