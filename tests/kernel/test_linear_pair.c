/* tern_lib_linear_rows: a linear layer reading its rows from SBUF (an attention's output) must give the bits of the
 * same layer reading them from HBM, with residual and layer norm, bf16 and fp32 rows, v2 and v3; rows not in SBUF are
 * an error naming the rule.
 * tern_lib_linear_pair: two linear layers in one kernel with the middle kept in SBUF must give the bits of
 * tern_lib_linear into an HBM middle tensor of w2's dtype followed by tern_lib_linear_ext (bias or not on each
 * layer, every activation path of the first layer's on-chip epilogue: bias in PSUM, the broadcast bias tile under
 * 16 rows, with and without an activation; the second layer's residual (a tensor of its own, or a itself, then
 * read from the first layer's rows kept on chip), layer norm, several weight blocks; v2's
 * identity-matmul transposes and v3's transpose_pe; fp32 and bf16 weights; NaN, infinities and -0 in the input),
 * with fewer DMA bytes and less predicted time for BERT-base's FFN; more rows than one row tile are declined
 * (0, nothing emitted); a w2 that does not follow w1 is an error naming both. */
#include <math.h>
#include <string.h>

#include "../kernel/kernel_test_util.h"
#include "tern/kernel_lib.h"

typedef struct {
    const char *machine;
    uint64_t M, K, H, N; /* a [M, K] @ w1 [K, H] -> middle [M, H] @ w2 [H, N] */
    int b1, b2, residual, ln; /* residual 2: a itself (a post-LN FFN: read from the first layer's rows on chip) */
    tern_act_func act1, act2;
    tern_dtype wdt, odt;
    int special; /* NaN, +-inf and -0 in a's first row (v3+: v2's identity-matmul transposes multiply the NaN by
                  * the identity's zeros, which spreads it over the whole tile in either variant) */
    int wf;      /* weights_first: the first layer's first weight block before its rows */
} pair_case;

static void case_name(char *buf, size_t n, const char *what, const pair_case *c)
{
    snprintf(buf, n, "%s %s M=%llu K=%llu H=%llu N=%llu b=%d%d res=%d ln=%d act=%d,%d w=%s out=%s%s", what,
             c->machine, (unsigned long long)c->M, (unsigned long long)c->K, (unsigned long long)c->H,
             (unsigned long long)c->N, c->b1, c->b2, c->residual, c->ln, (int)c->act1, (int)c->act2,
             tern_dtype_name(c->wdt), tern_dtype_name(c->odt), c->special ? " special" : "");
}

/* Builds the pair (pair = 1) or the two separate layers, runs it (timing only when out is NULL) and returns 1 when
 * it ran; the pair's return value goes to *took. */
static int run_variant(const pair_case *c, int pair, unsigned char *out, tern_run_stats *stats, int *took)
{
    tern_core_config cfg;
    tern_error err;
    tern_core *core = NULL;
    if (out) {
        core = ktu_core(c->machine, &cfg);
    } else {
        if (tern_core_config_load(c->machine, &cfg, &err)) {
            CHECK_MSG(0, "cannot load %s: %s", c->machine, err.msg);
            return 0;
        }
        tern_core_options o = {0};
        o.mode = TERN_MODE_TIMING_ONLY;
        if (tern_core_create(&cfg, &o, &core, &err)) {
            CHECK_MSG(0, "cannot create core: %s", err.msg);
            return 0;
        }
    }
    tern_kernel *k = NULL;
    CHECK_EQ_INT(tern_kernel_create(&cfg, pair ? "pair" : "two", &k, &err), TERN_OK);
    const uint64_t M = c->M, K = c->K, H = c->H, N = c->N;
    tern_view a = tern_kernel_input2d(k, "a", TERN_DTYPE_FP32, M, K);
    tern_view w1 = tern_kernel_input2d(k, "w1", c->wdt, K, H);
    tern_view w2 = tern_kernel_input2d(k, "w2", c->wdt, H, N);
    tern_view b1 = c->b1 ? tern_kernel_hbm_tensor(k, "b1", TERN_KIO_INPUT, TERN_DTYPE_FP32, 1, &H) : tern_view_none();
    tern_view b2 = c->b2 ? tern_kernel_hbm_tensor(k, "b2", TERN_KIO_INPUT, TERN_DTYPE_FP32, 1, &N) : tern_view_none();
    tern_view r = c->residual == 2 ? a : c->residual ? tern_kernel_input2d(k, "r", TERN_DTYPE_FP32, M, N) : tern_view_none();
    tern_view g = c->ln ? tern_kernel_hbm_tensor(k, "g", TERN_KIO_INPUT, TERN_DTYPE_FP32, 1, &N) : tern_view_none();
    tern_view be = c->ln ? tern_kernel_hbm_tensor(k, "be", TERN_KIO_INPUT, TERN_DTYPE_FP32, 1, &N) : tern_view_none();
    tern_view y = tern_kernel_output2d(k, "y", c->odt, M, N);
    tern_linear_ext x = {r, g, be, 1e-5f, c->wf, tern_view_none()};
    if (pair) {
        *took = tern_lib_linear_pair(k, y, a, w1, b1, c->act1, w2, b2, c->act2, &x);
    } else {
        tern_view mid = tern_kernel_hbm_tensor(k, "mid", TERN_KIO_SCRATCH, c->wdt, 2, (uint64_t[]){M, H});
        tern_lib_linear(k, mid, a, w1, b1, c->act1);
        x.weights_first = 0;
        CHECK_MSG(tern_lib_linear_ext(k, y, mid, w2, b2, c->act2, &x) == 1, "the second layer declined its norm");
    }
    tern_status st = tern_kernel_status(k, &err);
    CHECK_MSG(st == TERN_OK, "build failed: %s", err.msg);
    int ran = 0;
    if (!st && (!pair || *took)) {
        if (out) {
            float *v = malloc(sizeof(float) * (M * K + K * H + H * N + H + 3 * N + M * N));
            float *xa = v, *xw1 = xa + M * K, *xw2 = xw1 + K * H, *xb1 = xw2 + H * N, *xb2 = xb1 + H, *xg = xb2 + N,
                  *xe = xg + N, *xr = xe + N;
            ktu_fill(xa, M * K, TERN_DTYPE_FP32, 1);
            for (size_t i = 0; i < M * K; i++)
                xa[i] *= 3.0f; /* both signs and large arguments for the activations */
            if (c->special && K >= 4) {
                const float sv[4] = {NAN, INFINITY, -INFINITY, -0.0f};
                memcpy(xa, sv, sizeof sv);
            }
            ktu_fill(xw1, K * H, c->wdt, 2);
            ktu_fill(xw2, H * N, c->wdt, 3);
            ktu_fill(xb1, H, TERN_DTYPE_FP32, 4);
            ktu_fill(xb2, N, TERN_DTYPE_FP32, 5);
            ktu_fill(xg, N, TERN_DTYPE_FP32, 6);
            ktu_fill(xe, N, TERN_DTYPE_FP32, 7);
            ktu_fill(xr, M * N, TERN_DTYPE_FP32, 8);
            CHECK_EQ_INT(tern_kernel_write_f32(k, core, "a", xa, M * K, &err), TERN_OK);
            CHECK_EQ_INT(tern_kernel_write_f32(k, core, "w1", xw1, K * H, &err), TERN_OK);
            CHECK_EQ_INT(tern_kernel_write_f32(k, core, "w2", xw2, H * N, &err), TERN_OK);
            if (c->b1)
                CHECK_EQ_INT(tern_kernel_write_f32(k, core, "b1", xb1, H, &err), TERN_OK);
            if (c->b2)
                CHECK_EQ_INT(tern_kernel_write_f32(k, core, "b2", xb2, N, &err), TERN_OK);
            if (c->ln) {
                CHECK_EQ_INT(tern_kernel_write_f32(k, core, "g", xg, N, &err), TERN_OK);
                CHECK_EQ_INT(tern_kernel_write_f32(k, core, "be", xe, N, &err), TERN_OK);
            }
            if (c->residual == 1)
                CHECK_EQ_INT(tern_kernel_write_f32(k, core, "r", xr, M * N, &err), TERN_OK);
            free(v);
        }
        st = tern_kernel_run(k, core, stats, &err);
        CHECK_MSG(st == TERN_OK, "run failed: %s", err.msg);
        if (!st && out)
            CHECK_EQ_INT(tern_kernel_read(k, core, "y", out, M * N * tern_dtype_size(c->odt), &err), TERN_OK);
        ran = !st;
    }
    tern_kernel_free(k);
    tern_core_free(core);
    return ran;
}

static void same_bits(const pair_case *c)
{
    char name[240];
    case_name(name, sizeof name, "linear pair == two layers through HBM", c);
    TEST_BEGIN(name);
    size_t n = c->M * c->N, es = tern_dtype_size(c->odt);
    unsigned char *o1 = malloc(n * es), *o2 = malloc(n * es);
    int took = 0;
    if (run_variant(c, 1, o1, NULL, &took) && run_variant(c, 0, o2, NULL, &took)) {
        size_t diff = 0, first = n, nans = 0;
        for (size_t i = 0; i < n; i++) {
            if (memcmp(o1 + i * es, o2 + i * es, es)) {
                if (!diff)
                    first = i;
                diff++;
            }
            if (es == 4) {
                float f;
                memcpy(&f, o1 + i * 4, 4);
                nans += f != f;
            }
        }
        CHECK_MSG(diff == 0, "%zu of %zu elements differ (first at row %zu, column %zu)", diff, n, first / c->N,
                  first % c->N);
        if (c->special && es == 4) /* the NaN in a's first row reaches the output's first row, and only it */
            CHECK_MSG(nans >= c->N && (c->M == 1 || nans < n), "%zu NaN outputs of %zu", nans, n);
    }
    CHECK_MSG(took == 1, "the pair declined");
    free(o1);
    free(o2);
}

static void cheaper(const pair_case *c)
{
    char name[240];
    case_name(name, sizeof name, "linear pair vs two layers, cost", c);
    TEST_BEGIN(name);
    tern_run_stats p, t;
    memset(&p, 0, sizeof p);
    memset(&t, 0, sizeof t);
    int took = 0;
    if (run_variant(c, 1, NULL, &p, &took) && run_variant(c, 0, NULL, &t, &took)) {
        printf("%s: pair %.2f us, %.3f MB DMA; two layers %.2f us, %.3f MB DMA\n", name, p.time_ps * 1e-6,
               p.dma_bytes * 1e-6, t.time_ps * 1e-6, t.dma_bytes * 1e-6);
        /* the middle is neither stored nor loaded (nor a residual that is a: it is on chip already) */
        uint64_t saved = 2 * c->M * c->H * tern_dtype_size(c->wdt) + (c->residual == 2 ? c->M * c->K * 4 : 0);
        CHECK_EQ_INT((long long)(t.dma_bytes - p.dma_bytes), (long long)saved);
        CHECK_MSG(p.time_ps > 0 && p.time_ps < t.time_ps, "time: pair %lld ps, two layers %lld ps",
                  (long long)p.time_ps, (long long)t.time_ps);
    }
}

/* tern_lib_linear_rows (the rows of a already in SBUF, as an attention leaves them) against tern_lib_linear_ext
 * reading the same rows from HBM, in one kernel. */
static void rows_same_bits(const char *machine, uint64_t M, uint64_t K, uint64_t N, int bias, tern_act_func act,
                           int residual, int ln, tern_dtype rdt)
{
    char name[200];
    snprintf(name, sizeof name, "linear rows on chip == from HBM %s M=%llu K=%llu N=%llu b=%d act=%d res=%d ln=%d rows %s",
             machine, (unsigned long long)M, (unsigned long long)K, (unsigned long long)N, bias, (int)act, residual,
             ln, tern_dtype_name(rdt));
    TEST_BEGIN(name);
    tern_core_config cfg;
    tern_core *core = ktu_core(machine, &cfg);
    tern_kernel *k = NULL;
    tern_error err;
    CHECK_EQ_INT(tern_kernel_create(&cfg, "rows", &k, &err), TERN_OK);
    tern_view a = tern_kernel_input2d(k, "a", rdt, M, K);
    tern_view w = tern_kernel_input2d(k, "w", TERN_DTYPE_BF16, K, N);
    tern_view b = bias ? tern_kernel_hbm_tensor(k, "b", TERN_KIO_INPUT, TERN_DTYPE_FP32, 1, &N) : tern_view_none();
    tern_view r = residual ? tern_kernel_input2d(k, "r", TERN_DTYPE_FP32, M, N) : tern_view_none();
    tern_view g = ln ? tern_kernel_hbm_tensor(k, "g", TERN_KIO_INPUT, TERN_DTYPE_FP32, 1, &N) : tern_view_none();
    tern_view y1 = tern_kernel_output2d(k, "y1", TERN_DTYPE_FP32, M, N);
    tern_view y2 = tern_kernel_output2d(k, "y2", TERN_DTYPE_FP32, M, N);
    tern_linear_ext x = {r, g, tern_view_none(), 1e-5f, 0, tern_view_none()};
    tern_view rows = tern_kernel_sbuf(k, rdt, (uint32_t)M, (uint32_t)K, "rows");
    tern_kernel_load(k, rows, a);
    CHECK_EQ_INT(tern_lib_linear_rows(k, y1, rows, w, b, act, &x), 1);
    CHECK_EQ_INT(tern_lib_linear_ext(k, y2, a, w, b, act, &x), 1);
    tern_status st = tern_kernel_status(k, &err);
    CHECK_MSG(st == TERN_OK, "build failed: %s", err.msg);
    if (!st) {
        float *v = malloc(sizeof(float) * (M * K + K * N + 2 * N + M * N)), *o1 = malloc(sizeof(float) * M * N),
              *o2 = malloc(sizeof(float) * M * N);
        float *xa = v, *xw = xa + M * K, *xb = xw + K * N, *xg = xb + N, *xr = xg + N;
        ktu_fill(xa, M * K, rdt, 11);
        ktu_fill(xw, K * N, TERN_DTYPE_BF16, 12);
        ktu_fill(xb, N, TERN_DTYPE_FP32, 13);
        ktu_fill(xg, N, TERN_DTYPE_FP32, 14);
        ktu_fill(xr, M * N, TERN_DTYPE_FP32, 15);
        CHECK_EQ_INT(tern_kernel_write_f32(k, core, "a", xa, M * K, &err), TERN_OK);
        CHECK_EQ_INT(tern_kernel_write_f32(k, core, "w", xw, K * N, &err), TERN_OK);
        if (bias)
            CHECK_EQ_INT(tern_kernel_write_f32(k, core, "b", xb, N, &err), TERN_OK);
        if (ln)
            CHECK_EQ_INT(tern_kernel_write_f32(k, core, "g", xg, N, &err), TERN_OK);
        if (residual)
            CHECK_EQ_INT(tern_kernel_write_f32(k, core, "r", xr, M * N, &err), TERN_OK);
        CHECK_EQ_INT(tern_kernel_run(k, core, NULL, &err), TERN_OK);
        CHECK_EQ_INT(tern_kernel_read_f32(k, core, "y1", o1, M * N, &err), TERN_OK);
        CHECK_EQ_INT(tern_kernel_read_f32(k, core, "y2", o2, M * N, &err), TERN_OK);
        size_t diff = 0;
        for (size_t i = 0; i < M * N; i++)
            diff += memcmp(&o1[i], &o2[i], 4) != 0;
        CHECK_MSG(diff == 0, "%zu of %llu elements differ", diff, (unsigned long long)(M * N));
        free(v);
        free(o1);
        free(o2);
    }
    tern_kernel_free(k);
    tern_core_free(core);
}

/* A BERT block's tail on chip: the attention projection on rows in SBUF with its layer norm's rows kept there
 * (tern_lib_linear_keep_norm, stored too or not), then the FFN pair on those rows with them as its residual
 * (tern_lib_linear_pair_rows), against the same through HBM (tern_lib_linear_ext, tern_lib_linear_pair with the
 * residual a). Outputs: the pair's, the norm's store (when asked), and the kept rows stored at the end. */
static void block_on_chip(const char *machine, uint64_t M, uint64_t D, uint64_t H, int store, int pre_ln)
{
    char name[200];
    snprintf(name, sizeof name, "linear block on chip (norm kept, pair on it) == through HBM %s M=%llu D=%llu H=%llu "
             "store=%d%s", machine, (unsigned long long)M, (unsigned long long)D, (unsigned long long)H, store,
             pre_ln ? " pre-LN" : "");
    TEST_BEGIN(name);
    tern_core_config cfg;
    tern_core *core = ktu_core(machine, &cfg);
    tern_kernel *k = NULL;
    tern_error err;
    CHECK_EQ_INT(tern_kernel_create(&cfg, "block", &k, &err), TERN_OK);
    tern_view a = tern_kernel_input2d(k, "a", TERN_DTYPE_BF16, M, D);
    tern_view r = tern_kernel_input2d(k, "r", TERN_DTYPE_FP32, M, D);
    tern_view wo = tern_kernel_input2d(k, "wo", TERN_DTYPE_BF16, D, D);
    tern_view w1 = tern_kernel_input2d(k, "w1", TERN_DTYPE_BF16, D, H);
    tern_view w2 = tern_kernel_input2d(k, "w2", TERN_DTYPE_BF16, H, D);
    tern_view bo = tern_kernel_hbm_tensor(k, "bo", TERN_KIO_INPUT, TERN_DTYPE_FP32, 1, &D);
    tern_view b1 = tern_kernel_hbm_tensor(k, "b1", TERN_KIO_INPUT, TERN_DTYPE_FP32, 1, &H);
    tern_view b2 = tern_kernel_hbm_tensor(k, "b2", TERN_KIO_INPUT, TERN_DTYPE_FP32, 1, &D);
    tern_view g1 = tern_kernel_hbm_tensor(k, "g1", TERN_KIO_INPUT, TERN_DTYPE_FP32, 1, &D);
    tern_view g2 = tern_kernel_hbm_tensor(k, "g2", TERN_KIO_INPUT, TERN_DTYPE_FP32, 1, &D);
    tern_view h1 = tern_kernel_output2d(k, "h1", pre_ln ? TERN_DTYPE_BF16 : TERN_DTYPE_FP32, M, D);
    tern_view y1 = tern_kernel_output2d(k, "y1", TERN_DTYPE_FP32, M, D);
    tern_view k1 = tern_kernel_output2d(k, "k1", TERN_DTYPE_FP32, M, D);
    /* pre-LN (GPT-2's): the projection's output before the norm is stored (p1, p2) and is the FFN's residual; the
     * norm's output is stored in bf16, as the compiler stores a value only matmuls read */
    tern_view h2 = tern_kernel_output2d(k, "h2", pre_ln ? TERN_DTYPE_BF16 : TERN_DTYPE_FP32, M, D);
    tern_view p1 = pre_ln ? tern_kernel_output2d(k, "p1", TERN_DTYPE_FP32, M, D) : tern_view_none();
    tern_view p2 = pre_ln ? tern_kernel_output2d(k, "p2", TERN_DTYPE_FP32, M, D) : tern_view_none();
    tern_view y2 = tern_kernel_output2d(k, "y2", TERN_DTYPE_FP32, M, D);
    /* on chip */
    tern_view rows = tern_kernel_sbuf(k, TERN_DTYPE_BF16, (uint32_t)M, (uint32_t)D, "rows");
    tern_kernel_load(k, rows, a);
    tern_view norm = tern_kernel_sbuf(k, TERN_DTYPE_FP32, (uint32_t)M, (uint32_t)D, "norm");
    tern_linear_ext xo = {r, g1, tern_view_none(), 1e-5f, 0, p1};
    CHECK_EQ_INT(tern_lib_linear_keep_norm(k, h1, tern_view_none(), rows, wo, bo, TERN_ACT_COPY, &xo, norm, store), 1);
    tern_kernel_store(k, k1, norm); /* the kept rows, as the pair will read them */
    tern_linear_ext xf = {p1, g2, tern_view_none(), 1e-5f, 0, tern_view_none()};
    CHECK_EQ_INT(tern_lib_linear_pair_rows(k, y1, norm, !pre_ln, w1, b1, TERN_ACT_GELU, w2, b2, TERN_ACT_COPY, &xf), 1);
    /* through HBM */
    xo.pre_out = p2;
    CHECK_EQ_INT(tern_lib_linear_ext(k, h2, a, wo, bo, TERN_ACT_COPY, &xo), 1);
    tern_linear_ext xf2 = {pre_ln ? p2 : h2, g2, tern_view_none(), 1e-5f, 0, tern_view_none()};
    CHECK_EQ_INT(tern_lib_linear_pair(k, y2, h2, w1, b1, TERN_ACT_GELU, w2, b2, TERN_ACT_COPY, &xf2), 1);
    tern_status st = tern_kernel_status(k, &err);
    CHECK_MSG(st == TERN_OK, "build failed: %s", err.msg);
    if (!st) {
        const char *names[10] = {"a", "r", "wo", "w1", "w2", "bo", "b1", "b2", "g1", "g2"};
        const uint64_t sizes[10] = {M * D, M * D, D * D, D * H, H * D, D, H, D, D, D};
        for (int i = 0; i < 10; i++) {
            float *v = malloc(sizeof(float) * sizes[i]);
            ktu_fill(v, sizes[i], i < 5 && i != 1 ? TERN_DTYPE_BF16 : TERN_DTYPE_FP32, 40 + (uint64_t)i);
            CHECK_EQ_INT(tern_kernel_write_f32(k, core, names[i], v, sizes[i], &err), TERN_OK);
            free(v);
        }
        CHECK_EQ_INT(tern_kernel_run(k, core, NULL, &err), TERN_OK);
        float *o[5];
        const char *outs[5] = {"y1", "y2", "k1", "h2", "h1"};
        for (int i = 0; i < 5; i++) {
            o[i] = malloc(sizeof(float) * M * D);
            CHECK_EQ_INT(tern_kernel_read_f32(k, core, outs[i], o[i], M * D, &err), TERN_OK);
        }
        CHECK_MSG(!memcmp(o[0], o[1], sizeof(float) * M * D), "the block's output differs from the HBM route's");
        if (pre_ln) { /* the kept fp32 rows against the bf16 store: the same values once rounded */
            size_t diff = 0;
            for (size_t i = 0; i < M * D; i++) {
                uint32_t u;
                memcpy(&u, &o[2][i], 4);
                u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u; /* RNE to bf16 (finite values) */
                float f;
                memcpy(&f, &u, 4);
                diff += memcmp(&f, &o[3][i], 4) != 0;
            }
            CHECK_MSG(diff == 0, "%zu kept norm values differ from the stored bf16 norm once rounded", diff);
        } else {
            CHECK_MSG(!memcmp(o[2], o[3], sizeof(float) * M * D), "the kept norm rows differ from the stored norm");
        }
        if (store) {
            CHECK_MSG(!memcmp(o[4], o[3], sizeof(float) * M * D), "the norm stored beside the kept rows differs");
        } else {
            size_t same = 0; /* out is left as the run found it (unwritten HBM reads as NaN): no norm value there */
            for (size_t i = 0; i < M * D; i++)
                same += !memcmp(&o[4][i], &o[3][i], 4);
            CHECK_MSG(same == 0, "store = 0, but %zu elements of the norm's output were written", same);
        }
        if (pre_ln) {
            float *q1 = malloc(sizeof(float) * M * D), *q2 = malloc(sizeof(float) * M * D);
            CHECK_EQ_INT(tern_kernel_read_f32(k, core, "p1", q1, M * D, &err), TERN_OK);
            CHECK_EQ_INT(tern_kernel_read_f32(k, core, "p2", q2, M * D, &err), TERN_OK);
            CHECK_MSG(!memcmp(q1, q2, sizeof(float) * M * D), "the output before the norm differs");
            free(q1);
            free(q2);
        }
        for (int i = 0; i < 5; i++)
            free(o[i]);
    }
    tern_kernel_free(k);
    tern_core_free(core);
}

static void bad_rows(void)
{
    TEST_BEGIN("linear rows error: rows not in SBUF");
    tern_core_config cfg;
    tern_error err;
    CHECK_EQ_INT(tern_core_config_load("neuroncore-v2", &cfg, &err), TERN_OK);
    tern_kernel *k = NULL;
    CHECK_EQ_INT(tern_kernel_create(&cfg, "errk", &k, &err), TERN_OK);
    tern_view a = tern_kernel_input2d(k, "a", TERN_DTYPE_FP32, 8, 64);
    tern_view w = tern_kernel_input2d(k, "w", TERN_DTYPE_BF16, 64, 30);
    tern_view y = tern_kernel_output2d(k, "y", TERN_DTYPE_FP32, 8, 30);
    CHECK_EQ_INT(tern_lib_linear_rows(k, y, a, w, tern_view_none(), TERN_ACT_COPY, NULL), 1);
    CHECK(tern_kernel_status(k, &err) != TERN_OK);
    CHECK_STR_CONTAINS(err.msg, "kernel errk: linear: rows must be a float 2-D SBUF tile of at most 128 partitions");
    CHECK_STR_CONTAINS(err.msg, "hbm");
    tern_kernel_free(k);
}

/* Seeded random shapes, options and machines: the pair against the two layers, byte for byte. */
static void random_cases(unsigned n)
{
    static const char *const machines[3] = {"neuroncore-v2", "neuroncore-v3", "neuroncore-v4"};
    static const tern_act_func acts[4] = {TERN_ACT_COPY, TERN_ACT_RELU, TERN_ACT_GELU, TERN_ACT_GELU_TANH};
    uint64_t st = 0x9e3779b97f4a7c15ull;
    for (unsigned i = 0; i < n; i++) {
        pair_case c;
        memset(&c, 0, sizeof c);
        c.machine = machines[ktu_rng(&st) % 3];
        c.M = 1 + ktu_rng(&st) % 128;
        c.K = 1 + ktu_rng(&st) % 400;
        c.H = 1 + ktu_rng(&st) % 1200;
        c.N = 1 + ktu_rng(&st) % 700;
        c.b1 = (int)(ktu_rng(&st) % 2);
        c.b2 = (int)(ktu_rng(&st) % 2);
        c.residual = (int)(ktu_rng(&st) % 2);
        if (c.residual && c.N == c.K && ktu_rng(&st) % 2)
            c.residual = 2;
        c.ln = (int)(ktu_rng(&st) % 2);
        c.act1 = acts[ktu_rng(&st) % 4];
        c.act2 = acts[ktu_rng(&st) % 4];
        c.wdt = ktu_rng(&st) % 4 ? TERN_DTYPE_BF16 : TERN_DTYPE_FP32;
        c.odt = ktu_rng(&st) % 4 ? TERN_DTYPE_FP32 : TERN_DTYPE_BF16;
        c.special = strcmp(c.machine, "neuroncore-v2") && ktu_rng(&st) % 2;
        c.wf = (int)(ktu_rng(&st) % 2);
        same_bits(&c);
    }
}

/* The two layers do not fit SBUF with the second's weights streaming during the first (a contraction of 8,192
 * and a 2,048-wide middle): the pair still runs, the second's weights loading after the first; the same bits. */
static void no_prefetch(void)
{
    const pair_case c = {"neuroncore-v2", 8, 8192, 2048, 2048, 1, 1, 0, 0, TERN_ACT_GELU, TERN_ACT_COPY,
                         TERN_DTYPE_BF16, TERN_DTYPE_FP32, 0, 1};
    same_bits(&c);
}

/* A v2 kernel named kname with a [M, 64] (fp32), w1 [64, 100], w2 [w2_rows, N] (bf16) and y [M, N] (fp32). */
static tern_kernel *small_pair(const char *kname, uint64_t M, uint64_t w2_rows, uint64_t N, tern_view *a, tern_view *w1,
                               tern_view *w2, tern_view *y)
{
    tern_core_config cfg;
    tern_error err;
    tern_kernel *k = NULL;
    CHECK_EQ_INT(tern_core_config_load("neuroncore-v2", &cfg, &err), TERN_OK);
    CHECK_EQ_INT(tern_kernel_create(&cfg, kname, &k, &err), TERN_OK);
    *a = tern_kernel_input2d(k, "a", TERN_DTYPE_FP32, M, 64);
    *w1 = tern_kernel_input2d(k, "w1", TERN_DTYPE_BF16, 64, 100);
    *w2 = tern_kernel_input2d(k, "w2", TERN_DTYPE_BF16, w2_rows, N);
    *y = tern_kernel_output2d(k, "y", TERN_DTYPE_FP32, M, N);
    return k;
}

/* A second layer whose norm cannot be fused (a row of 3,000 columns: more than one weight block): declined,
 * nothing emitted, no error; the caller runs the two layers. */
static void declined_ln(void)
{
    TEST_BEGIN("linear pair: a second layer's norm that does not fit is declined, nothing emitted");
    tern_error err;
    uint64_t N = 3000;
    tern_view a, w1, w2, y;
    tern_kernel *k = small_pair("pair", 64, 100, N, &a, &w1, &w2, &y);
    tern_view g = tern_kernel_hbm_tensor(k, "g", TERN_KIO_INPUT, TERN_DTYPE_FP32, 1, &N);
    tern_linear_ext x = {tern_view_none(), g, tern_view_none(), 1e-5f, 0, tern_view_none()};
    CHECK_EQ_INT(tern_lib_linear_pair(k, y, a, w1, tern_view_none(), TERN_ACT_RELU, w2, tern_view_none(),
                                      TERN_ACT_COPY, &x),
                 0);
    CHECK_EQ_INT(tern_kernel_status(k, &err), TERN_OK);
    CHECK_EQ_INT(tern_program_instr_count(tern_kernel_program(k)), 0);
    tern_kernel_free(k);
}

/* More rows than one row tile: declined, nothing emitted, no error. */
static void declined(void)
{
    TEST_BEGIN("linear pair: 129 rows are declined, nothing emitted");
    tern_error err;
    tern_view a, w1, w2, y;
    tern_kernel *k = small_pair("pair", 129, 100, 30, &a, &w1, &w2, &y);
    CHECK_EQ_INT(tern_lib_linear_pair(k, y, a, w1, tern_view_none(), TERN_ACT_RELU, w2, tern_view_none(),
                                      TERN_ACT_COPY, NULL),
                 0);
    CHECK_EQ_INT(tern_kernel_status(k, &err), TERN_OK);
    CHECK_EQ_INT(tern_program_instr_count(tern_kernel_program(k)), 0);
    tern_kernel_free(k);
}

static void bad_w2(void)
{
    TEST_BEGIN("linear pair error: w2's rows do not match w1's columns");
    tern_error err;
    tern_view a, w1, w2, y;
    tern_kernel *k = small_pair("errk", 8, 99, 30, &a, &w1, &w2, &y);
    CHECK_EQ_INT(tern_lib_linear_pair(k, y, a, w1, tern_view_none(), TERN_ACT_RELU, w2, tern_view_none(),
                                      TERN_ACT_COPY, NULL),
                 1);
    CHECK(tern_kernel_status(k, &err) != TERN_OK);
    CHECK_STR_CONTAINS(err.msg, "kernel errk: linear pair: w2 is bf16 [99, 30]");
    CHECK_STR_CONTAINS(err.msg, "w1 is [64, 100]");
    tern_kernel_free(k);
}

int main(void)
{
    const tern_dtype F = TERN_DTYPE_FP32, B = TERN_DTYPE_BF16;
    const tern_act_func C = TERN_ACT_COPY, G = TERN_ACT_GELU, GT = TERN_ACT_GELU_TANH, R = TERN_ACT_RELU;
    const pair_case cases[] = {
        /* BERT-base's FFN: bias in PSUM, GELU on chip; residual and layer norm on the second layer */
        {"neuroncore-v2", 128, 768, 3072, 768, 1, 1, 1, 1, G, C, B, F, 0, 0},
        {"neuroncore-v3", 128, 768, 3072, 768, 1, 1, 1, 1, G, C, B, F, 1, 0},
        {"neuroncore-v2", 128, 768, 3072, 768, 1, 1, 2, 1, G, C, B, F, 0, 0}, /* BERT's: the residual is a */
        {"neuroncore-v3", 100, 256, 1100, 256, 1, 0, 2, 0, GT, C, B, B, 1, 0},
        {"neuroncore-v2", 77, 200, 700, 300, 1, 0, 0, 0, R, C, B, F, 0, 0},
        /* under 16 rows the first bias is a broadcast tile: added by VectorE, then the activation (or not) */
        {"neuroncore-v2", 8, 64, 130, 40, 1, 1, 0, 0, GT, R, B, F, 0, 0},
        {"neuroncore-v2", 8, 64, 130, 40, 1, 0, 0, 0, C, G, B, F, 0, 0},
        /* no bias, no activation (VectorE's copy out of PSUM); a second layer of several weight blocks */
        {"neuroncore-v2", 100, 130, 1100, 2100, 0, 1, 1, 0, C, G, B, F, 0, 0},
        {"neuroncore-v3", 50, 300, 513, 200, 1, 1, 0, 0, G, C, B, B, 1, 0},
        {"neuroncore-v3", 8, 64, 130, 40, 1, 1, 0, 0, R, C, B, F, 1, 0},
        {"neuroncore-v2", 64, 100, 300, 90, 1, 1, 0, 0, R, C, F, F, 0, 0}, /* fp32 weights: an fp32 middle */
        {"neuroncore-v4", 1, 96, 160, 50, 1, 1, 0, 0, GT, C, B, F, 1, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        same_bits(&cases[i]);
    cheaper(&cases[0]);
    cheaper(&cases[1]);
    cheaper(&cases[2]);
    /* BERT's attention output projection (bf16 rows, bias, residual, layer norm); GELU, no bias; fp32 rows */
    rows_same_bits("neuroncore-v2", 128, 768, 768, 1, C, 1, 1, B);
    rows_same_bits("neuroncore-v3", 128, 768, 768, 1, C, 1, 1, B);
    rows_same_bits("neuroncore-v3", 50, 200, 300, 0, G, 0, 0, B);
    rows_same_bits("neuroncore-v2", 77, 130, 513, 1, R, 0, 0, F);
    no_prefetch();
    random_cases(24);
    block_on_chip("neuroncore-v2", 128, 768, 3072, 0, 0);
    block_on_chip("neuroncore-v3", 128, 768, 3072, 1, 0);
    block_on_chip("neuroncore-v2", 77, 256, 600, 1, 0);
    block_on_chip("neuroncore-v2", 128, 768, 3072, 0, 1);
    block_on_chip("neuroncore-v3", 100, 256, 1024, 1, 1);
    declined();
    declined_ln();
    bad_w2();
    bad_rows();
    return check_report();
}
