/* The profiler against synthetic events with hand-computed answers: summary arithmetic (busy-time unions with
 * overlaps, active %, DMA union across queues, MFU/HFU/MBU as AWS defines them, the top list and its order), the
 * trace parsed by a real JSON parser (cJSON: tracks, slice names, exact ts/dur, operand text, wait slices,
 * TensorE's LoadStationary and TensorMatrix rows, overlap sub-lanes), aggregation past the slice limit (file bounded,
 * every event accounted for), the SVG's well-formedness (a small XML checker here, and python3's xml.dom.minidom when
 * present), error paths; and a real simulated GEMM with the profiler attached, whose FLOPs and time must agree with the
 * run's stats. */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "tern/kernel.h"
#include "tern/kernel_lib.h"
#include "tern/prof.h"

static char tmpdir[256];

static void tmp_path(char *buf, size_t cap, const char *name)
{
    snprintf(buf, cap, "%s/%s", tmpdir, name);
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    if (b)
        b[n] = 0;
    if (len)
        *len = (size_t)n;
    return b;
}

/* A minimal XML well-formedness check: declaration, comments, balanced start/end tags with matching names,
 * quoted attributes, exactly one root, no stray '<' or '&' in text. Returns NULL if fine, else the problem. */
static const char *xml_check(const char *s)
{
    static char why[128];
    const char *stack[64];
    size_t lens[64];
    int depth = 0, roots = 0;
    const char *p = s;
    while (*p) {
        if (*p != '<') {
            if (*p == '&') {
                const char *semi = strchr(p, ';');
                if (!semi || semi - p > 8)
                    return "bare '&' in text";
            }
            if (depth == 0 && roots && *p != '\n' && *p != ' ')
                return "text after the root element";
            p++;
            continue;
        }
        if (!strncmp(p, "<?", 2)) {
            const char *e = strstr(p, "?>");
            if (!e)
                return "unterminated <?";
            p = e + 2;
            continue;
        }
        if (!strncmp(p, "<!--", 4)) {
            const char *e = strstr(p, "-->");
            if (!e)
                return "unterminated comment";
            p = e + 3;
            continue;
        }
        int closing = p[1] == '/';
        const char *n = p + 1 + closing;
        size_t nl = strcspn(n, " \t\n/>");
        if (nl == 0)
            return "empty tag name";
        const char *q = n + nl;
        while (*q && *q != '>') {
            if (*q == '"') {
                const char *e = strchr(q + 1, '"');
                if (!e)
                    return "unterminated attribute value";
                if (memchr(q + 1, '<', (size_t)(e - q - 1)))
                    return "'<' in an attribute value";
                q = e + 1;
                continue;
            }
            if (*q == '<')
                return "'<' inside a tag";
            q++;
        }
        if (!*q)
            return "unterminated tag";
        int selfclose = q[-1] == '/';
        if (closing) {
            if (depth == 0 || lens[depth - 1] != nl || strncmp(stack[depth - 1], n, nl)) {
                snprintf(why, sizeof why, "end tag </%.*s> does not match", (int)nl, n);
                return why;
            }
            depth--;
        } else if (!selfclose) {
            if (depth == 0 && roots++)
                return "more than one root element";
            if (depth == 64)
                return "nesting too deep";
            stack[depth] = n;
            lens[depth++] = nl;
        } else if (depth == 0 && roots++) {
            return "more than one root element";
        }
        p = q + 1;
    }
    if (depth)
        return "unclosed element";
    if (!roots)
        return "no root element";
    return NULL;
}

static int have_python(void)
{
    return access("/usr/bin/python3", X_OK) == 0;
}

static void check_svg(const char *path)
{
    char *svg = slurp(path, NULL);
    CHECK_MSG(svg != NULL, "SVG %s not written", path);
    if (!svg)
        return;
    const char *why = xml_check(svg);
    CHECK_MSG(why == NULL, "SVG %s is not well-formed XML: %s", path, why ? why : "");
    CHECK_STR_CONTAINS(svg, "<svg xmlns=\"http://www.w3.org/2000/svg\"");
    free(svg);
    if (have_python()) {
        char cmd[600];
        snprintf(cmd, sizeof cmd,
                 "/usr/bin/python3 -c \"import xml.dom.minidom,sys; xml.dom.minidom.parse(sys.argv[1])\" %s", path);
        CHECK_MSG(system(cmd) == 0, "python3 xml.dom.minidom rejects %s", path);
    }
}

static tern_instr mk_instr(tern_opcode op, tern_engine e)
{
    tern_instr ins;
    memset(&ins, 0, sizeof ins);
    ins.opcode = (uint16_t)op;
    ins.engine = (uint8_t)e;
    ins.wait_sem = ins.signal_sem = TERN_SEM_NONE;
    for (int k = 0; k < TERN_INSTR_OPERANDS; k++)
        ins.ap[k].offset_reg = TERN_REG_NONE;
    return ins;
}

static void set_ap(tern_ap *ap, tern_mem mem, unsigned p0, unsigned np, uint64_t off, tern_dtype dt, uint32_t n)
{
    ap->mem = (uint8_t)mem;
    ap->dtype = (uint8_t)dt;
    ap->ndims = 1;
    ap->start_partition = (uint16_t)p0;
    ap->num_partitions = (uint16_t)np;
    ap->offset = off;
    ap->dims[0].step = 1;
    ap->dims[0].num = n;
}

static tern_event mk_event(tern_event_kind kind, tern_engine e, unsigned q, size_t pc, const tern_instr *ins, int64_t s,
                           int64_t end)
{
    tern_event ev;
    memset(&ev, 0, sizeof ev);
    ev.kind = kind;
    ev.engine = e;
    ev.queue = q;
    ev.pc = pc;
    ev.ins = ins;
    ev.start_ps = s;
    ev.end_ps = end;
    return ev;
}

static void base_opts(tern_prof_opts *o)
{
    tern_prof_opts_init(o);
    snprintf(o->name, sizeof o->name, "test \"core\"");
    o->pe_rows = o->pe_cols = 128;
    for (int e = 0; e < TERN_ENGINE_COUNT; e++)
        o->clock_hz[e] = 1e9;
    o->hbm_bandwidth = 1e9;
}

#define MM_FLOPS (2ull * 128 * 128 * 512)

/* The synthetic run (times in ps):
 *   TensorE  multiply_moving [0, 1e6) and [5e5, 1.5e6)   (overlap: busy 1.5e6, second goes to a sub-lane)
 *   VectorE  wait s3>=12 [1e6, 2e6), tensor_tensor [2e6, 3e6)
 *   SyncE    nop [3.5e6, 4e6)
 *   DMA q0   [0, 2e6) 1000 B (HBM 1000), q1 [1e6, 3e6) 3000 B (HBM 2000)   (union 3e6)
 *   ScalarE  a zero-length wait (not a wait: ignored) */
static void feed(tern_prof *p)
{
    tern_instr mm = mk_instr(TERN_OP_MULTIPLY_MOVING, TERN_ENGINE_TENSOR);
    set_ap(&mm.ap[TERN_AP_DST], TERN_MEM_PSUM, 0, 128, 0, TERN_DTYPE_FP32, 512);
    set_ap(&mm.ap[TERN_AP_IN0], TERN_MEM_SBUF, 0, 128, 0x100, TERN_DTYPE_BF16, 512);
    tern_event ev = mk_event(TERN_EVENT_INSTR, TERN_ENGINE_TENSOR, 0, 7, &mm, 0, 1000000);
    ev.flops = MM_FLOPS;
    tern_prof_event(p, &ev);
    ev = mk_event(TERN_EVENT_INSTR, TERN_ENGINE_TENSOR, 0, 8, &mm, 500000, 1500000);
    ev.flops = MM_FLOPS;
    tern_prof_event(p, &ev);

    tern_instr tt = mk_instr(TERN_OP_TENSOR_TENSOR, TERN_ENGINE_VECTOR);
    tt.wait_sem = 3;
    tt.wait_value = 12;
    ev = mk_event(TERN_EVENT_WAIT, TERN_ENGINE_VECTOR, 0, 2, &tt, 1000000, 2000000);
    ev.wait_sem = 3;
    ev.wait_value = 12;
    tern_prof_event(p, &ev);
    ev = mk_event(TERN_EVENT_INSTR, TERN_ENGINE_VECTOR, 0, 2, &tt, 2000000, 3000000);
    ev.flops = 65536;
    tern_prof_event(p, &ev);

    tern_instr nop = mk_instr(TERN_OP_NOP, TERN_ENGINE_SYNC);
    ev = mk_event(TERN_EVENT_INSTR, TERN_ENGINE_SYNC, 0, 0, &nop, 3500000, 4000000);
    tern_prof_event(p, &ev);

    tern_instr dma = mk_instr(TERN_OP_DMA_COPY, TERN_ENGINE_SYNC);
    set_ap(&dma.ap[TERN_AP_DST], TERN_MEM_SBUF, 0, 1, 0, TERN_DTYPE_BF16, 500);
    set_ap(&dma.ap[TERN_AP_IN0], TERN_MEM_HBM, 0, 1, 0x1000, TERN_DTYPE_BF16, 500);
    ev = mk_event(TERN_EVENT_DMA, TERN_ENGINE_SYNC, 0, 1, &dma, 0, 2000000);
    ev.bytes = 1000;
    ev.hbm_bytes = 1000;
    tern_prof_event(p, &ev);
    ev = mk_event(TERN_EVENT_DMA, TERN_ENGINE_SYNC, 1, 2, &dma, 1000000, 3000000);
    ev.bytes = 3000;
    ev.hbm_bytes = 2000;
    tern_prof_event(p, &ev);

    tern_instr act = mk_instr(TERN_OP_ACTIVATION, TERN_ENGINE_SCALAR);
    ev = mk_event(TERN_EVENT_WAIT, TERN_ENGINE_SCALAR, 0, 0, &act, 100, 100);
    tern_prof_event(p, &ev);
}

static void test_summary(void)
{
    TEST_BEGIN("summary arithmetic on synthetic events");
    tern_prof_opts o;
    base_opts(&o);
    o.model_flops = 1e7;
    tern_prof *p = NULL;
    tern_error err;
    CHECK_EQ_INT(tern_prof_create(&o, &p, &err), TERN_OK);
    if (!p)
        return;
    feed(p);
    tern_prof_summary s;
    CHECK_EQ_INT(tern_prof_finish(p, NULL, &s, &err), TERN_OK);
    CHECK_EQ_INT(s.total_ps, 4000000);
    CHECK_EQ_INT(s.busy_ps[TERN_ENGINE_TENSOR], 1500000);
    CHECK_NEAR(s.active_pct[TERN_ENGINE_TENSOR], 37.5, 1e-12);
    CHECK_EQ_INT(s.busy_ps[TERN_ENGINE_VECTOR], 1000000);
    CHECK_NEAR(s.active_pct[TERN_ENGINE_VECTOR], 25.0, 1e-12);
    CHECK_EQ_INT(s.busy_ps[TERN_ENGINE_SCALAR], 0);
    CHECK_EQ_INT(s.busy_ps[TERN_ENGINE_SYNC], 500000);
    CHECK_EQ_INT(s.wait_ps[TERN_ENGINE_VECTOR], 1000000);
    CHECK_EQ_INT(s.wait_ps[TERN_ENGINE_SCALAR], 0);
    CHECK_EQ_INT(s.instructions[TERN_ENGINE_TENSOR], 2);
    CHECK_EQ_INT(s.instructions[TERN_ENGINE_VECTOR], 1);
    CHECK_EQ_INT(s.instructions_total, 4);
    CHECK_EQ_INT(s.dma_busy_ps, 3000000);
    CHECK_NEAR(s.dma_active_pct, 75.0, 1e-12);
    CHECK_EQ_INT(s.dma_bytes, 4000);
    CHECK_EQ_INT(s.dma_transfers, 2);
    CHECK_NEAR(s.dma_avg_bytes, 2000.0, 0);
    CHECK_EQ_INT(s.dma_queues_used, 2);
    CHECK_EQ_INT(s.hbm_bytes, 3000);
    /* peak = 2 x 128 x 128 x 1 GHz = 32.768 TFLOP/s; peak x 4 us = 131072000 FLOP */
    CHECK_NEAR(s.peak_flops, 3.2768e13, 1);
    CHECK_NEAR(s.hardware_flops, 2.0 * MM_FLOPS, 0);
    CHECK_NEAR(s.hfu_pct, 100.0 * 2.0 * MM_FLOPS / 131072000.0, 1e-9); /* 25.6 % */
    CHECK_NEAR(s.hfu_pct, 25.6, 1e-9);
    CHECK_NEAR(s.model_flops, 1e7, 0);
    CHECK_NEAR(s.mfu_pct, 100.0 * 1e7 / 131072000.0, 1e-9);
    CHECK_NEAR(s.mbu_pct, 75.0, 1e-9); /* 3000 B / (1 GB/s x 4 us) */
    CHECK_EQ_INT(s.engine_flops[TERN_ENGINE_VECTOR], 65536);
    /* top: dma_copy on the queues (4 us, 100 %), multiply_moving (2 us, 50 %), tensor_tensor, nop */
    CHECK_EQ_INT(s.top_count, 4);
    CHECK_EQ_INT(s.top[0].opcode, TERN_OP_DMA_COPY);
    CHECK_EQ_INT(s.top[0].engine, TERN_ENGINE_COUNT);
    CHECK_EQ_INT(s.top[0].count, 2);
    CHECK_EQ_INT(s.top[0].total_ps, 4000000);
    CHECK_NEAR(s.top[0].percent, 100.0, 1e-12);
    CHECK_EQ_INT(s.top[1].opcode, TERN_OP_MULTIPLY_MOVING);
    CHECK_EQ_INT(s.top[1].engine, TERN_ENGINE_TENSOR);
    CHECK_EQ_INT(s.top[1].total_ps, 2000000);
    CHECK_NEAR(s.top[1].percent, 50.0, 1e-12);
    CHECK_EQ_INT(s.top[2].opcode, TERN_OP_TENSOR_TENSOR);
    CHECK_EQ_INT(s.top[3].opcode, TERN_OP_NOP);
    CHECK_NEAR(s.top[3].percent, 12.5, 1e-12);
    CHECK_EQ_INT(tern_prof_finish(p, NULL, &s, &err), TERN_ERR_INVALID);
    tern_prof_free(p);

    TEST_BEGIN("the run's stats extend the total time and fill what events lack");
    base_opts(&o);
    CHECK_EQ_INT(tern_prof_create(&o, &p, &err), TERN_OK);
    if (!p)
        return;
    feed(p);
    tern_run_stats st;
    memset(&st, 0, sizeof st);
    st.time_ps = 8000000;
    st.macs = 1; /* ignored: the events carry FLOPs */
    CHECK_EQ_INT(tern_prof_finish(p, &st, &s, &err), TERN_OK);
    CHECK_EQ_INT(s.total_ps, 8000000);
    CHECK_NEAR(s.active_pct[TERN_ENGINE_TENSOR], 18.75, 1e-12);
    CHECK_NEAR(s.hfu_pct, 12.8, 1e-9);
    CHECK_NEAR(s.mfu_pct, 12.8, 1e-9); /* model FLOPs default to the hardware FLOPs */
    tern_prof_free(p);

    base_opts(&o);
    o.hbm_bandwidth = 0;
    o.pe_rows = 0;
    CHECK_EQ_INT(tern_prof_create(&o, &p, &err), TERN_OK);
    if (!p)
        return;
    memset(&st, 0, sizeof st);
    st.time_ps = 1000000;
    st.macs = 1000;
    st.dma_bytes = 64;
    st.dma_transfers = 2;
    st.hbm_bytes = 32;
    st.instructions[TERN_ENGINE_VECTOR] = 3;
    CHECK_EQ_INT(tern_prof_finish(p, &st, &s, &err), TERN_OK);
    CHECK_NEAR(s.hardware_flops, 2000.0, 0);
    CHECK_EQ_INT(s.dma_transfers, 2);
    CHECK_NEAR(s.dma_avg_bytes, 32.0, 0);
    CHECK_EQ_INT(s.hbm_bytes, 32);
    CHECK_EQ_INT(s.instructions_total, 3);
    CHECK_NEAR(s.hfu_pct, 0, 0); /* no peak: 0, printed as n/a */
    CHECK_NEAR(s.mbu_pct, 0, 0);
    CHECK_EQ_INT(s.top_count, 0);
    tern_prof_free(p);
}

static const cJSON *find_meta(const cJSON *evs, const char *what, const char *name)
{
    const cJSON *e;
    cJSON_ArrayForEach(e, evs)
    {
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(e, "name");
        const cJSON *args = cJSON_GetObjectItemCaseSensitive(e, "args");
        const cJSON *an = args ? cJSON_GetObjectItemCaseSensitive(args, "name") : NULL;
        if (cJSON_IsString(n) && !strcmp(n->valuestring, what) && cJSON_IsString(an) && !strcmp(an->valuestring, name))
            return e;
    }
    return NULL;
}

static int tid_of(const cJSON *e)
{
    const cJSON *t = e ? cJSON_GetObjectItemCaseSensitive(e, "tid") : NULL;
    return cJSON_IsNumber(t) ? t->valueint : -1;
}

static const cJSON *find_slice(const cJSON *evs, const char *name, int tid, double ts)
{
    const cJSON *e;
    cJSON_ArrayForEach(e, evs)
    {
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(e, "name");
        const cJSON *ph = cJSON_GetObjectItemCaseSensitive(e, "ph");
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(e, "ts");
        if (cJSON_IsString(n) && !strcmp(n->valuestring, name) && cJSON_IsString(ph) && !strcmp(ph->valuestring, "X") &&
            tid_of(e) == tid && cJSON_IsNumber(t) && t->valuedouble == ts)
            return e;
    }
    return NULL;
}

static double num(const cJSON *o, const char *key)
{
    const cJSON *v = o ? cJSON_GetObjectItemCaseSensitive(o, key) : NULL;
    return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

static const char *str(const cJSON *o, const char *key)
{
    const cJSON *v = o ? cJSON_GetObjectItemCaseSensitive(o, key) : NULL;
    return cJSON_IsString(v) ? v->valuestring : "";
}

static void test_trace(void)
{
    TEST_BEGIN("trace: Chrome trace-event JSON with tracks, slices, operands and waits");
    char trace[512], svg[512];
    tmp_path(trace, sizeof trace, "t.json");
    tmp_path(svg, sizeof svg, "t.svg");
    tern_prof_opts o;
    base_opts(&o);
    o.trace_path = trace;
    o.svg_path = svg;
    tern_prof *p = NULL;
    tern_error err;
    CHECK_EQ_INT(tern_prof_create(&o, &p, &err), TERN_OK);
    if (!p)
        return;
    feed(p);
    tern_prof_summary s;
    CHECK_EQ_INT(tern_prof_finish(p, NULL, &s, &err), TERN_OK);
    tern_prof_free(p);
    CHECK_EQ_INT(s.trace_slices, 7); /* 2 mm, wait, tt, nop, 2 dma; the zero wait is dropped */
    CHECK_EQ_INT(s.trace_aggregated, 0);

    char *text = slurp(trace, NULL);
    cJSON *root = text ? cJSON_Parse(text) : NULL;
    CHECK_MSG(root != NULL, "trace does not parse as JSON near: %.80s",
              text && cJSON_GetErrorPtr() ? cJSON_GetErrorPtr() : "(no file)");
    free(text);
    if (!root)
        return;
    const cJSON *evs = cJSON_GetObjectItemCaseSensitive(root, "traceEvents");
    CHECK(cJSON_IsArray(evs));
    CHECK(find_meta(evs, "process_name", "test \"core\"") != NULL);
    /* matmuls go to AWS's "TensorMatrix" row; the overlapping second one to a further TensorE lane */
    int t_tensor = tid_of(find_meta(evs, "thread_name", "TensorMatrix"));
    int t_tensor2 = tid_of(find_meta(evs, "thread_name", "TensorE (3)"));
    int t_vector = tid_of(find_meta(evs, "thread_name", "VectorE"));
    int t_sync = tid_of(find_meta(evs, "thread_name", "SyncE"));
    int t_q0 = tid_of(find_meta(evs, "thread_name", "DMA q0"));
    int t_q1 = tid_of(find_meta(evs, "thread_name", "DMA q1"));
    CHECK(t_tensor > 0 && t_tensor2 > 0 && t_vector > 0 && t_sync > 0 && t_q0 > 0 && t_q1 > 0);
    CHECK(t_tensor != t_tensor2 && t_q0 != t_q1 && t_tensor != t_vector);
    CHECK(find_meta(evs, "thread_name", "ScalarE") == NULL); /* its only event was a zero-length wait */

    const cJSON *mm = find_slice(evs, "multiply_moving", t_tensor, 0.0);
    CHECK(mm != NULL);
    CHECK_NEAR(num(mm, "dur"), 1.0, 0);
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(mm, "args");
    CHECK_NEAR(num(args, "pc"), 7, 0);
    CHECK_NEAR(num(args, "flops"), (double)MM_FLOPS, 0);
    CHECK_NEAR(num(args, "cycles"), 1000, 0);
    CHECK_STR_CONTAINS(str(args, "dst"), "psum[0:128]+0x0:fp32[[1,512]]");
    CHECK_STR_CONTAINS(str(args, "in0"), "sbuf[0:128]+0x100:bf16[[1,512]]");
    CHECK_STR_CONTAINS(str(mm, "cat"), "matmul");
    const cJSON *mm2 = find_slice(evs, "multiply_moving", t_tensor2, 0.5);
    CHECK_MSG(mm2 != NULL, "the overlapping matmul is not on the TensorE (3) track at 0.5 us");
    CHECK(find_meta(evs, "thread_name", "TensorE") == NULL); /* no LoadStationary, no TensorE waits */

    const cJSON *w = find_slice(evs, "wait s3>=12", t_vector, 1.0);
    CHECK_MSG(w != NULL, "no wait slice 'wait s3>=12' on VectorE at 1 us");
    CHECK_STR_CONTAINS(str(w, "cat"), "wait");
    CHECK_NEAR(num(w, "dur"), 1.0, 0);
    CHECK_STR_CONTAINS(str(cJSON_GetObjectItemCaseSensitive(w, "args"), "before"), "tensor_tensor");

    const cJSON *d1 = find_slice(evs, "dma_copy", t_q1, 1.0);
    CHECK(d1 != NULL);
    CHECK_NEAR(num(d1, "dur"), 2.0, 0);
    args = cJSON_GetObjectItemCaseSensitive(d1, "args");
    CHECK_NEAR(num(args, "bytes"), 3000, 0);
    CHECK_NEAR(num(args, "hbm_bytes"), 2000, 0);
    CHECK_NEAR(num(args, "queue"), 1, 0);
    CHECK_STR_CONTAINS(str(args, "in0"), "hbm[0:1]+0x1000:bf16[[1,500]]");
    CHECK(find_slice(evs, "nop", t_sync, 3.5) != NULL);

    const cJSON *other = cJSON_GetObjectItemCaseSensitive(root, "otherData");
    CHECK(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(other, "aggregated")));
    CHECK_NEAR(num(other, "total_us"), 4.0, 0);
    cJSON_Delete(root);

    TEST_BEGIN("SVG: well-formed, lanes and legend");
    check_svg(svg);
    char *sv = slurp(svg, NULL);
    if (sv) {
        CHECK_STR_CONTAINS(sv, ">TensorE 38%<");
        CHECK_STR_CONTAINS(sv, ">DMA q1<");
        CHECK_STR_CONTAINS(sv, ">matmul<");
        CHECK_STR_CONTAINS(sv, ">wait<");
        CHECK_STR_CONTAINS(sv, "test &quot;core&quot;");
        CHECK_STR_CONTAINS(sv, "\xc2\xb5s</text>"); /* labelled ticks */
    }
    free(sv);
}

static void test_aggregation(void)
{
    TEST_BEGIN("aggregation: the trace stays bounded past the limit and accounts for every event");
    const uint64_t limits[2] = {200000, 2000000};
    size_t sizes[2] = {0, 0};
    char trace[512], svg[512];
    tmp_path(trace, sizeof trace, "agg.json");
    tmp_path(svg, sizeof svg, "agg.svg");
    tern_instr ls = mk_instr(TERN_OP_LOAD_STATIONARY, TERN_ENGINE_TENSOR);
    tern_instr mm = mk_instr(TERN_OP_MULTIPLY_MOVING, TERN_ENGINE_TENSOR);
    tern_instr dma = mk_instr(TERN_OP_DMA_COPY, TERN_ENGINE_SYNC);
    for (int run = 0; run < 2; run++) {
        tern_prof_opts o;
        base_opts(&o);
        o.trace_path = trace;
        o.svg_path = svg;
        o.max_trace_events = 1000;
        tern_prof *p = NULL;
        tern_error err;
        CHECK_EQ_INT(tern_prof_create(&o, &p, &err), TERN_OK);
        if (!p)
            return;
        uint64_t n = limits[run];
        for (uint64_t i = 0; i < n; i++) {
            tern_event ev = mk_event(TERN_EVENT_INSTR, TERN_ENGINE_TENSOR, 0, i, (i & 1) ? &mm : &ls, (int64_t)i * 1000,
                                     (int64_t)i * 1000 + 900);
            ev.flops = (i & 1) ? 100 : 0;
            tern_prof_event(p, &ev);
            if (i % 16 == 0) {
                ev = mk_event(TERN_EVENT_DMA, TERN_ENGINE_SYNC, (unsigned)(i / 16) % 4, i / 16, &dma, (int64_t)i * 1000,
                              (int64_t)i * 1000 + 8000);
                ev.bytes = 64;
                tern_prof_event(p, &ev);
            }
        }
        tern_prof_summary s;
        CHECK_EQ_INT(tern_prof_finish(p, NULL, &s, &err), TERN_OK);
        tern_prof_free(p);
        CHECK_EQ_INT(s.trace_aggregated, 1);
        CHECK(s.trace_slices <= 1000 + 5 * 2048);
        CHECK(s.trace_bin_ps > 0);
        CHECK_EQ_INT(s.instructions[TERN_ENGINE_TENSOR], n);
        CHECK_EQ_INT(s.dma_transfers, n / 16);
        CHECK_NEAR(s.hardware_flops, 100.0 * (double)(n / 2), 0);
        CHECK_EQ_INT(s.busy_ps[TERN_ENGINE_TENSOR], (int64_t)n * 900);

        char *text = slurp(trace, &sizes[run]);
        cJSON *root = text ? cJSON_Parse(text) : NULL;
        CHECK_MSG(root != NULL, "aggregated trace does not parse");
        free(text);
        if (!root)
            return;
        const cJSON *other = cJSON_GetObjectItemCaseSensitive(root, "otherData");
        CHECK(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(other, "aggregated")));
        CHECK(num(other, "bin_us") > 0);
        /* every event is either a slice of its own or counted by an aggregated slice */
        uint64_t events = 0, agg_slices = 0;
        const cJSON *e;
        cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(root, "traceEvents"))
        {
            if (strcmp(str(e, "ph"), "X"))
                continue;
            const cJSON *args = cJSON_GetObjectItemCaseSensitive(e, "args");
            if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(args, "aggregated"))) {
                events += (uint64_t)num(args, "count");
                agg_slices++;
            } else {
                events++;
            }
        }
        CHECK_EQ_INT(events, n + n / 16);
        CHECK(agg_slices > 0);
        cJSON_Delete(root);
        check_svg(svg);
    }
    /* ten times the events, about the same file: bounded */
    CHECK_MSG(sizes[1] < 2 * sizes[0] && sizes[1] < (8u << 20), "trace sizes %zu then %zu bytes", sizes[0], sizes[1]);
    size_t svg_size = 0;
    free(slurp(svg, &svg_size));
    CHECK_MSG(svg_size < (1u << 20), "SVG of 2M events is %zu bytes", svg_size);
}

static void test_errors(void)
{
    TEST_BEGIN("errors: unwritable paths, bad options");
    tern_prof_opts o;
    base_opts(&o);
    o.trace_path = "/nonexistent-dir/x/trace.json";
    tern_prof *p = (tern_prof *)&o;
    tern_error err;
    CHECK_EQ_INT(tern_prof_create(&o, &p, &err), TERN_ERR_IO);
    CHECK(p == NULL);
    CHECK_STR_CONTAINS(err.msg, "/nonexistent-dir/x/trace.json");
    CHECK_STR_CONTAINS(err.msg, "cannot open");
    base_opts(&o);
    o.svg_path = "/nonexistent-dir/x/t.svg";
    CHECK_EQ_INT(tern_prof_create(&o, &p, &err), TERN_ERR_IO);
    CHECK_STR_CONTAINS(err.msg, "t.svg");
    base_opts(&o);
    o.clock_hz[TERN_ENGINE_VECTOR] = -1;
    CHECK_EQ_INT(tern_prof_create(&o, &p, &err), TERN_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "VectorE clock");
    CHECK_EQ_INT(tern_prof_create(NULL, &p, &err), TERN_ERR_INVALID);
    if (access("/dev/full", W_OK) == 0) {
        base_opts(&o);
        o.trace_path = "/dev/full";
        CHECK_EQ_INT(tern_prof_create(&o, &p, &err), TERN_OK);
        if (p) {
            feed(p);
            tern_prof_summary s;
            CHECK_EQ_INT(tern_prof_finish(p, NULL, &s, &err), TERN_ERR_IO);
            CHECK_STR_CONTAINS(err.msg, "/dev/full");
            CHECK_EQ_INT(s.total_ps, 4000000); /* the summary is still filled */
            tern_prof_free(p);
        }
    }
    tern_prof_free(NULL);
}

static void test_machine_opts(void)
{
    TEST_BEGIN("options from a machine: PE array, clocks, per-core HBM share");
    tern_machine *m = NULL;
    tern_error err;
    CHECK_EQ_INT(tern_machine_load("trainium1", &m, &err), TERN_OK);
    if (!m)
        return;
    tern_prof_opts o;
    tern_prof_opts_init(&o);
    o.trace_path = "keep";
    tern_prof_opts_from_machine(m, &o);
    const tern_core_spec *c = tern_machine_core(m);
    const tern_chip_spec *chip = tern_machine_chip(m);
    CHECK_STR_CONTAINS(o.name, "trainium1");
    CHECK_EQ_INT(o.pe_rows, c->tensor.pe_rows);
    CHECK_NEAR(o.clock_hz[TERN_ENGINE_TENSOR], c->tensor.clock_hz, 0);
    CHECK_NEAR(o.clock_hz[TERN_ENGINE_SYNC], c->scalar.clock_hz, 0);
    CHECK_NEAR(o.hbm_bandwidth, chip->hbm_bandwidth / chip->cores, 1e-3);
    CHECK(o.trace_path && !strcmp(o.trace_path, "keep"));
    tern_machine_free(m);
    CHECK_EQ_INT(tern_machine_load("neuroncore-v2", &m, &err), TERN_OK);
    if (m) {
        tern_prof_opts_from_machine(m, &o);
        CHECK_NEAR(o.hbm_bandwidth, 0, 0); /* a bare core describes no HBM */
        tern_machine_free(m);
    }
}

static void test_real_gemm(void)
{
    TEST_BEGIN("a simulated GEMM with the profiler attached agrees with the run's stats");
    const unsigned M = 256, N = 512, K = 256;
    tern_core_config cfg;
    tern_error err;
    tern_machine *m = NULL;
    CHECK_EQ_INT(tern_machine_load("trainium1", &m, &err), TERN_OK);
    if (!m)
        return;
    CHECK_EQ_INT(tern_core_config_from_machine(m, &cfg, &err), TERN_OK);
    tern_kernel *k = NULL;
    CHECK_EQ_INT(tern_kernel_create(&cfg, "gemm", &k, &err), TERN_OK);
    tern_view lhsT = tern_kernel_input2d(k, "lhsT", TERN_DTYPE_BF16, K, M);
    tern_view rhs = tern_kernel_input2d(k, "rhs", TERN_DTYPE_BF16, K, N);
    tern_view out = tern_kernel_output2d(k, "out", TERN_DTYPE_BF16, M, N);
    tern_lib_gemm(k, out, lhsT, rhs, NULL);
    CHECK_EQ_INT(tern_kernel_status(k, &err), TERN_OK);

    char trace[512], svg[512];
    tmp_path(trace, sizeof trace, "gemm.json");
    tmp_path(svg, sizeof svg, "gemm.svg");
    tern_prof_opts po;
    tern_prof_opts_init(&po);
    tern_prof_opts_from_machine(m, &po);
    po.trace_path = trace;
    po.svg_path = svg;
    tern_prof *p = NULL;
    CHECK_EQ_INT(tern_prof_create(&po, &p, &err), TERN_OK);
    tern_core_options co = {0};
    co.mode = TERN_MODE_TIMING_ONLY;
    co.on_event = tern_prof_event;
    co.event_ctx = p;
    tern_core *core = NULL;
    CHECK_EQ_INT(tern_core_create(&cfg, &co, &core, &err), TERN_OK);
    tern_run_stats st;
    memset(&st, 0, sizeof st);
    tern_status rs = core && p ? tern_kernel_run(k, core, &st, &err) : TERN_ERR_INVALID;
    CHECK_MSG(rs == TERN_OK, "run failed: %s", err.msg);
    tern_prof_summary s;
    memset(&s, 0, sizeof s);
    if (p)
        CHECK_EQ_INT(tern_prof_finish(p, &st, &s, &err), TERN_OK);
    CHECK_NEAR(s.hardware_flops, 2.0 * M * N * K, 0);
    CHECK_EQ_INT(s.total_ps, st.time_ps);
    CHECK(s.total_ps > 0);
    for (int e = 0; e < TERN_ENGINE_COUNT; e++)
        CHECK_EQ_INT(s.instructions[e], st.instructions[e]);
    CHECK_EQ_INT(s.dma_bytes, st.dma_bytes);
    CHECK_EQ_INT(s.hbm_bytes, st.hbm_bytes);
    CHECK(s.hfu_pct > 0 && s.hfu_pct <= 100);
    CHECK(s.mbu_pct > 0 && s.mbu_pct <= 100);
    CHECK(s.top_count > 0);
    CHECK(s.busy_ps[TERN_ENGINE_TENSOR] <= s.total_ps);
    /* the simulator sums occupancies; the profiler's busy time is their union, smaller where a LoadStationary
     * overlaps a running MultiplyMoving, equal on the in-order engines */
    CHECK(s.busy_ps[TERN_ENGINE_TENSOR] <= st.busy_ps[TERN_ENGINE_TENSOR]);
    CHECK(s.busy_ps[TERN_ENGINE_TENSOR] > 0);
    for (int e = TERN_ENGINE_VECTOR; e < TERN_ENGINE_COUNT; e++)
        CHECK_EQ_INT(s.busy_ps[e], st.busy_ps[e]);
    if (st.dma_busy_ps)
        CHECK_EQ_INT(s.dma_busy_ps, st.dma_busy_ps);
    char *text = slurp(trace, NULL);
    cJSON *root = text ? cJSON_Parse(text) : NULL;
    CHECK_MSG(root != NULL, "GEMM trace does not parse");
    if (root) {
        const cJSON *evs = cJSON_GetObjectItemCaseSensitive(root, "traceEvents");
        CHECK(find_meta(evs, "thread_name", "TensorE") != NULL);
        CHECK(find_meta(evs, "thread_name", "TensorMatrix") != NULL);
        CHECK(cJSON_GetArraySize(evs) > 10);
    }
    cJSON_Delete(root);
    free(text);
    check_svg(svg);
    FILE *devnull = fopen("/dev/null", "w");
    if (devnull) {
        tern_prof_summary_print(devnull, &s);
        fclose(devnull);
    }
    tern_core_free(core);
    tern_prof_free(p);
    tern_kernel_free(k);
    tern_machine_free(m);
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/tern_test_prof_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    test_summary();
    test_trace();
    test_aggregation();
    test_errors();
    test_machine_opts();
    test_real_gemm();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tmpdir);
    return check_report();
}
