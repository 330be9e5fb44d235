/* Every op the device runs, against the host evaluator (ggml's test-backend-ops idea for tern's op registry).
 * scripts/gen_op_rules.py writes small one-op ONNX models with seeded random shapes, several per op where the op
 * has several compiler rules; each is evaluated on the host (tern_graph_run after shape inference, so an
 * expansion's primitive rows run there too), compiled (FP32 matmuls, --explain rows) and run on a simulated trn1
 * core with the same seeded inputs, and every output is compared element by element:
 *
 *   |device - host| <= atol + rtol * |host|, per family of the op (include/tern/ops.def):
 *     exact (integer and bool outputs; layout, index, generator and pool ops move or pick values): 0, 0
 *     a scatter with reduction add or mul (duplicate indices combine in another order): rtol 1e-6, atol 1e-6
 *     elementwise unary: rtol 2e-3, atol 1e-5 (ScalarE's function approximations and the composed
 *       trigonometry/hyperbolics agree with libm to about 1e-3 relative, as the ONNX backend tests allow)
 *     other families (binary, variadic, axis, reduce, norm, conv, linear, recurrent, loss, control): rtol 1e-4,
 *       atol 1e-5 (fp32 on both sides; only the order of the sums and exp/log/rsqrt differ)
 *
 * Coverage is checked too: every registry row the device runs (tern_op_device_support, the rule arrays and the
 * expansions) must have a case, and every lowering rule (tern_op_rule_names) must fire on at least one case, so a
 * new row or rule without a test fails here. The fused tern-domain rows (MatMulBias, Attention, AttentionGrad) are
 * made only by the fusion pass from whole subgraphs and are checked by test_attention, test_models and the
 * training tests. TERN_OP_RULES_SEED picks other shapes (default 1). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "tern/compiler.h"
#include "tern/graph.h"
#include "tern/num.h"
#include "tern/runtime.h"

#define MAX_CASES 400
#define MAX_IO 8

typedef struct {
    char name[96], op[64], domains[256];
} op_case;

/* rules[id][k] fired on some case */
typedef struct {
    const char *names[TERN_GOP_COUNT][16];
    int n[TERN_GOP_COUNT];
    int fired[TERN_GOP_COUNT][16];
    int cases[TERN_GOP_COUNT];
} coverage;

static uint64_t rng_state;
static double rnd(void) /* uniform [0, 1): splitmix64 */
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (double)(z >> 11) / 9007199254740992.0;
}

/* The domain of graph input k ("any", "pos", "unit", "ge1", "bool", "int:LO:HI") from the comma list. */
static void domain_of(const char *list, int k, char *out, size_t len)
{
    const char *p = list;
    for (int i = 0; i < k && p; i++) {
        p = strchr(p, ',');
        if (p)
            p++;
    }
    if (!p) {
        snprintf(out, len, "any");
        return;
    }
    size_t n = strcspn(p, ",");
    snprintf(out, len, "%.*s", (int)n, p);
}

static void fill(tern_host_tensor *t, const char *dom)
{
    for (size_t i = 0; i < t->count; i++) {
        double u = rnd(), v;
        long lo = 0, hi = 2;
        if (!strncmp(dom, "int:", 4) && sscanf(dom + 4, "%ld:%ld", &lo, &hi) == 2)
            v = (double)(lo + (long)(u * (double)(hi - lo)));
        else if (!strcmp(dom, "bool"))
            v = u < 0.5 ? 0 : 1;
        else if (!strcmp(dom, "pos"))
            v = 0.1 + 2.9 * u;
        else if (!strcmp(dom, "unit"))
            v = -0.9 + 1.8 * u;
        else if (!strcmp(dom, "ge1"))
            v = 1.1 + 1.9 * u;
        else
            v = -2.0 + 4.0 * u;
        if (t->f)
            t->f[i] = (float)v;
        else if (t->i)
            t->i[i] = (int64_t)v;
    }
}

static int to_device(const tern_host_tensor *t, tern_dtype dt, void *out)
{
    size_t es = tern_dtype_size(dt);
    if (tern_dtype_is_float(dt))
        return tern_convert_from_f32(dt, out, t->f, t->count, NULL, NULL) != TERN_OK;
    for (size_t i = 0; i < t->count; i++) {
        int64_t x = t->i ? t->i[i] : (int64_t)t->f[i];
        uint8_t *p = (uint8_t *)out + i * es;
        switch (dt) {
        case TERN_DTYPE_INT8: { int8_t s = (int8_t)x; memcpy(p, &s, 1); break; }
        case TERN_DTYPE_UINT8: { uint8_t s = (uint8_t)x; memcpy(p, &s, 1); break; }
        case TERN_DTYPE_INT16: { int16_t s = (int16_t)x; memcpy(p, &s, 2); break; }
        case TERN_DTYPE_UINT16: { uint16_t s = (uint16_t)x; memcpy(p, &s, 2); break; }
        case TERN_DTYPE_INT32: { int32_t s = (int32_t)x; memcpy(p, &s, 4); break; }
        case TERN_DTYPE_UINT32: { uint32_t s = (uint32_t)x; memcpy(p, &s, 4); break; }
        default: return 1;
        }
    }
    return 0;
}

static double from_device(const void *raw, tern_dtype dt, size_t i)
{
    const uint8_t *p = (const uint8_t *)raw + i * tern_dtype_size(dt);
    switch (dt) {
    case TERN_DTYPE_INT8: return (int8_t)p[0];
    case TERN_DTYPE_UINT8: return p[0];
    case TERN_DTYPE_INT16: { int16_t s; memcpy(&s, p, 2); return s; }
    case TERN_DTYPE_UINT16: { uint16_t s; memcpy(&s, p, 2); return s; }
    case TERN_DTYPE_INT32: { int32_t s; memcpy(&s, p, 4); return s; }
    case TERN_DTYPE_UINT32: { uint32_t s; memcpy(&s, p, 4); return s; }
    default: {
        float f = 0;
        tern_convert_to_f32(&f, dt, p, 1, NULL);
        return f;
    }
    }
}

/* The tolerance of an op's outputs (the table in the opening comment). */
static void tolerance(tern_op_id id, int integer_out, int accumulates, double *rtol, double *atol)
{
    *rtol = 1e-4;
    *atol = 1e-5;
    tern_op_family f = tern_op_family_of(id);
    if (accumulates) { /* a scatter with reduction add/mul: duplicates combine in another order than the host's */
        *rtol = 1e-6;
        *atol = 1e-6;
    } else if (integer_out || f == TERN_OP_FAMILY_LAYOUT || f == TERN_OP_FAMILY_INDEX || f == TERN_OP_FAMILY_GENERATOR ||
        id == TERN_GOP_MAX_POOL || id == TERN_GOP_GLOBAL_MAX_POOL) {
        *rtol = 0;
        *atol = 0;
    } else if (f == TERN_OP_FAMILY_ELEMENTWISE_UNARY) {
        *rtol = 2e-3;
    }
}

static void note_rules(coverage *cv, tern_op_id id, const tern_compile_report *rep)
{
    for (int r = 0; r < rep->num_rules; r++) {
        const tern_compile_node_rule *row = &rep->rules[r];
        tern_op_id rid = TERN_GOP_UNKNOWN;
        for (int k = 1; k < TERN_GOP_COUNT; k++) { /* the row's op: "domain.Op" or "Op" */
            const tern_op_row *info = tern_op_info((tern_op_id)k);
            char full[96];
            snprintf(full, sizeof full, "%s%s%s", info->domain, info->domain[0] ? "." : "", info->name);
            if (!strcmp(full, row->op))
                rid = (tern_op_id)k;
        }
        if (!row->rule || rid == TERN_GOP_UNKNOWN)
            continue;
        for (int k = 0; k < cv->n[rid] && k < 16; k++)
            if (!strcmp(cv->names[rid][k], row->rule))
                cv->fired[rid][k] = 1;
    }
    (void)id;
}

/* One case: host reference, device run, comparison. */
static void run_case(const char *dir, const op_case *cs, int index, coverage *cv)
{
    char path[512];
    snprintf(path, sizeof path, "%.300s/%.96s.onnx", dir, cs->name);
    tern_error err;
    tern_graph *gh = NULL, *gd = NULL;
    tern_host_tensor *ins[MAX_IO] = {0}, *ref[MAX_IO] = {0};
    tern_exe exe;
    int have_exe = 0;
    tern_rt *rt = NULL;
    void *raw = NULL;
    tern_compile_report rep;
    memset(&rep, 0, sizeof rep);
    tern_op_id id = tern_op_lookup("", cs->op);
    TEST_BEGIN(cs->name);
    int accumulates = 0;
    if (!tern_graph_load_onnx(path, &gh, &err) && tern_graph_node_count(gh) > 0) {
        const char *red = tern_graph_attr_string(tern_graph_node_at(gh, 0), "reduction", "none");
        accumulates = !strcmp(red, "add") || !strcmp(red, "mul");
    }
    if (!gh || tern_graph_infer(gh, &err)) {
        CHECK_MSG(0, "%s: load/infer: %s", cs->name, err.msg);
        goto done;
    }
    int nin = tern_graph_input_count(gh), nout = tern_graph_output_count(gh);
    if (nin > MAX_IO || nout > MAX_IO) {
        CHECK_MSG(0, "%s: %d inputs, %d outputs (at most %d)", cs->name, nin, nout, MAX_IO);
        goto done;
    }
    rng_state = 0x1234567ull + (uint64_t)index * 7919u;
    for (int k = 0; k < nin; k++) {
        const tern_graph_value *v = tern_graph_value_at(gh, tern_graph_input_id(gh, k));
        char dom[32];
        domain_of(cs->domains, k, dom, sizeof dom);
        if (tern_host_tensor_new(v->type, v->rank, v->dims, &ins[k], &err)) {
            CHECK_MSG(0, "%s: input %d: %s", cs->name, k, err.msg);
            goto done;
        }
        fill(ins[k], dom);
    }
    if (tern_graph_run(gh, (const tern_host_tensor *const *)ins, ref, &err)) {
        CHECK_MSG(0, "%s: host evaluator: %s", cs->name, err.msg);
        goto done;
    }
    tern_compile_opts o;
    tern_compile_opts_default(&o);
    o.matmul_dtype = TERN_DTYPE_FP32;
    o.explain = 1;
    if (tern_graph_load_onnx(path, &gd, &err)) {
        CHECK_MSG(0, "%s: load: %s", cs->name, err.msg);
        goto done;
    }
    if (tern_compile(gd, &o, &exe, &rep, &err)) {
        CHECK_MSG(0, "%s: compile: %s", cs->name, err.msg);
        goto done;
    }
    have_exe = 1;
    note_rules(cv, id, &rep);
    if (tern_rt_create(&exe, "trn1.2xlarge", NULL, &rt, &err)) {
        CHECK_MSG(0, "%s: runtime: %s", cs->name, err.msg);
        goto done;
    }
    for (int k = 0; k < nin; k++) {
        const char *name = tern_graph_value_at(gh, tern_graph_input_id(gh, k))->name;
        const tern_exe_io *io = NULL;
        for (size_t j = 0; j < exe.num_inputs; j++)
            if (!strcmp(tern_exe_io_name(&exe.inputs[j]), name))
                io = &exe.inputs[j];
        if (!io) {
            CHECK_MSG(0, "%s: input '%s' not in the executable", cs->name, name);
            goto done;
        }
        size_t bytes = ins[k]->count * tern_dtype_size(io->dtype);
        free(raw);
        raw = malloc(bytes ? bytes : 1);
        if (!raw || to_device(ins[k], io->dtype, raw) || tern_rt_set_input(rt, name, raw, bytes, &err)) {
            CHECK_MSG(0, "%s: input '%s': %s", cs->name, name, raw ? err.msg : "out of memory");
            goto done;
        }
    }
    tern_run_stats st;
    if (tern_rt_execute(rt, &st, &err)) {
        CHECK_MSG(0, "%s: execute: %s", cs->name, err.msg);
        goto done;
    }
    for (int k = 0; k < nout; k++) {
        const char *name = tern_graph_value_at(gh, tern_graph_output_id(gh, k))->name;
        const tern_exe_io *io = NULL;
        for (size_t j = 0; j < exe.num_outputs; j++)
            if (!strcmp(tern_exe_io_name(&exe.outputs[j]), name))
                io = &exe.outputs[j];
        if (!io) {
            CHECK_MSG(0, "%s: output '%s' not in the executable", cs->name, name);
            goto done;
        }
        size_t n = ref[k]->count, bytes = n * tern_dtype_size(io->dtype);
        free(raw);
        raw = malloc(bytes ? bytes : 1);
        if (!raw || tern_rt_get_output(rt, name, raw, bytes, &err)) {
            CHECK_MSG(0, "%s: output '%s': %s", cs->name, name, raw ? err.msg : "out of memory");
            goto done;
        }
        double rtol, atol;
        tolerance(id, !tern_elem_is_float(ref[k]->type), accumulates, &rtol, &atol);
        size_t bad = 0, worst_i = 0;
        double worst = 0;
        for (size_t i = 0; i < n; i++) {
            double h = tern_host_tensor_get(ref[k], i), d = from_device(raw, io->dtype, i);
            double e = fabs(d - h);
            if (isnan(h) && isnan(d))
                continue;
            if (!(e <= atol + rtol * fabs(h))) {
                if (!bad || e > worst) {
                    worst = e;
                    worst_i = i;
                }
                bad++;
            }
        }
        CHECK_MSG(bad == 0, "%s: output '%s': %zu of %zu elements beyond rtol %g atol %g; worst [%zu] device %.9g, "
                  "host %.9g", cs->name, name, bad, n, rtol, atol, worst_i,
                  bad ? from_device(raw, io->dtype, worst_i) : 0.0, bad ? tern_host_tensor_get(ref[k], worst_i) : 0.0);
    }
done:
    if ((int)id > TERN_GOP_UNKNOWN && (int)id < TERN_GOP_COUNT)
        cv->cases[id]++;
    free(raw);
    tern_rt_free(rt);
    if (have_exe)
        tern_exe_free(&exe);
    tern_compile_report_free(&rep);
    for (int k = 0; k < MAX_IO; k++) {
        tern_host_tensor_free(ins[k]);
        tern_host_tensor_free(ref[k]);
    }
    tern_graph_free(gh);
    tern_graph_free(gd);
}

int main(void)
{
    char dir[] = "/tmp/tern_op_rules_XXXXXX";
    if (!mkdtemp(dir)) {
        fprintf(stderr, "mkdtemp failed\n");
        return 1;
    }
    const char *seed = getenv("TERN_OP_RULES_SEED");
    char cmd[1024];
    /* run from the source tree (CTest's working directory) */
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 scripts/gen_op_rules.py %s %s", dir, seed && *seed ? seed : "1");
    TEST_BEGIN("generate");
    int gen_ok = system(cmd) == 0;
    CHECK_MSG(gen_ok, "%s failed", cmd);
    static op_case cases[MAX_CASES];
    int nc = 0;
    char path[512];
    snprintf(path, sizeof path, "%s/cases.tsv", dir);
    FILE *f = gen_ok ? fopen(path, "r") : NULL;
    char line[512];
    while (f && nc < MAX_CASES && fgets(line, sizeof line, f)) {
        op_case *c = &cases[nc];
        memset(c, 0, sizeof *c);
        if (sscanf(line, "%95[^\t]\t%63[^\t]\t%255[^\n]", c->name, c->op, c->domains) >= 2)
            nc++;
    }
    if (f)
        fclose(f);
    CHECK_MSG(nc > 100, "only %d cases in %s", nc, path);
    static coverage cv;
    for (int k = 1; k < TERN_GOP_COUNT; k++)
        cv.n[k] = tern_op_rule_names((tern_op_id)k, cv.names[k], 16);
    for (int i = 0; i < nc; i++)
        run_case(dir, &cases[i], i, &cv);
    /* coverage: every row the device runs has a case; every rule fired somewhere */
    TEST_BEGIN("coverage");
    int rows = 0, rules = 0;
    for (int k = 1; k < TERN_GOP_COUNT; k++) {
        const tern_op_row *r = tern_op_info((tern_op_id)k);
        if (tern_op_device_support((tern_op_id)k) == TERN_OP_DEVICE_NONE || (r->flags & TERN_OPF_FUSED))
            continue;
        rows++;
        CHECK_MSG(cv.cases[k] > 0, "%s runs on the device but scripts/gen_op_rules.py has no case for it", r->name);
        for (int j = 0; j < cv.n[k] && j < 16; j++) {
            rules++;
            CHECK_MSG(cv.fired[k][j], "%s: rule %s fired on no case (add one that reaches it)", r->name,
                      cv.names[k][j]);
        }
    }
    printf("test_op_rules: %d cases, %d registry rows, %d rules\n", nc, rows, rules);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return check_report();
}
