/* The compiler's batch split as data parallelism (issue 13): a batch-4 MLP (a symbolic batch bound to 4, two outputs, made by Debian's python3
 * onnx) compiled with --cores 1, 2 and 4 for trn1.32xlarge (4: two chips) and trn2.48xlarge runs its shares as the ranks of one
 * multi-rank launch and gathers both outputs on the device. Checks: the outputs are bit-identical to one core's;
 * the predicted time is when the last share finished plus the two all-gathers, each exactly tern_collective_time
 * for its size over the same ranks; the last share finishes no earlier than the slowest share alone; a
 * timing-only run predicts the same time; TERN_THREADS=1 and 2 give the same bits and picoseconds. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "tern/collective.h"
#include "tern/compiler.h"
#include "tern/runtime.h"

enum { B = 4, K = 48, H = 96, N = 40 };
static char dir[] = "/tmp/tern_batch_ranks_XXXXXX";

static const char *gen =
    "import sys, numpy as np, onnx\n"
    "from onnx import helper as h, TensorProto as T, numpy_helper as nh\n"
    "r = np.random.default_rng(7)\n"
    "w1 = nh.from_array((r.standard_normal((48, 96)) * 0.2).astype(np.float32), 'w1')\n"
    "b1 = nh.from_array(r.standard_normal(96).astype(np.float32), 'b1')\n"
    "w2 = nh.from_array((r.standard_normal((96, 40)) * 0.2).astype(np.float32), 'w2')\n"
    "b2 = nh.from_array(r.standard_normal(40).astype(np.float32), 'b2')\n"
    "n = [h.make_node('MatMul', ['x', 'w1'], ['m1']), h.make_node('Add', ['m1', 'b1'], ['a1']),\n"
    "     h.make_node('Relu', ['a1'], ['hid']), h.make_node('MatMul', ['hid', 'w2'], ['m2']),\n"
    "     h.make_node('Add', ['m2', 'b2'], ['y'])]\n"
    "g = h.make_graph(n, 'mlp_b4', [h.make_tensor_value_info('x', T.FLOAT, ['batch', 48])],\n"
    "    [h.make_tensor_value_info('y', T.FLOAT, ['batch', 40]), h.make_tensor_value_info('hid', T.FLOAT, ['batch', 96])],\n"
    "    [w1, b1, w2, b2])\n"
    "m = h.make_model(g, opset_imports=[h.make_opsetid('', 17)]); m.ir_version = 8\n"
    "onnx.save(m, sys.argv[1])\n";

typedef struct {
    float y[B * N], hid[B * H];
    int64_t time_ps;
    tern_rt_gather_info info;
    int gathered;
} result;

static int run(const char *machine, unsigned cores, const char *threads, tern_sim_mode mode, const float *x,
               result *out)
{
    char path[512];
    tern_error err;
    tern_compile_opts o;
    tern_compile_opts_default(&o);
    o.machine = machine;
    o.cores = cores;
    o.matmul_dtype = TERN_DTYPE_FP32;
    tern_dim_binding batch = {"batch", B};
    o.dims = &batch;
    o.num_dims = 1;
    tern_exe exe;
    snprintf(path, sizeof path, "%s/mlp_b4.onnx", dir);
    setenv("TERN_THREADS", threads, 1);
    if (tern_compile_onnx(path, &o, &exe, NULL, &err)) {
        CHECK_MSG(0, "%s --cores %u: compile: %s", machine, cores, err.msg);
        return -1;
    }
    tern_rt_options ro;
    memset(&ro, 0, sizeof ro);
    ro.mode = mode;
    tern_rt *rt = NULL;
    tern_run_stats s;
    int rc = -1;
    memset(out, 0, sizeof *out);
    if (tern_rt_create(&exe, machine, &ro, &rt, &err) || tern_rt_set_input(rt, "x", x, sizeof(float) * B * K, &err) ||
        tern_rt_execute(rt, &s, &err) ||
        (mode == TERN_MODE_FUNCTIONAL && (tern_rt_get_output(rt, "y", out->y, sizeof out->y, &err) ||
                                          tern_rt_get_output(rt, "hid", out->hid, sizeof out->hid, &err)))) {
        CHECK_MSG(0, "%s --cores %u (threads %s): %s", machine, cores, threads, err.msg);
    } else {
        out->time_ps = s.time_ps;
        const tern_rt_gather_info *gi = tern_rt_gather(rt);
        if ((out->gathered = gi != NULL))
            out->info = *gi;
        rc = 0;
    }
    tern_rt_free(rt);
    tern_exe_free(&exe);
    unsetenv("TERN_THREADS");
    return rc;
}

/* tern_collective_time of an all-gather of `bytes` (the whole output) over the first `ranks` cores, one per rank. */
static int64_t gather_time(const char *machine, unsigned ranks, uint64_t bytes)
{
    tern_fabric *f = NULL;
    tern_error err;
    tern_fabric_opts fo = {0, ranks, 1};
    if (tern_fabric_load(machine, &fo, &f, &err)) {
        CHECK_MSG(0, "fabric %s: %s", machine, err.msg);
        return -1;
    }
    tern_coll_desc d;
    memset(&d, 0, sizeof d);
    d.op = TERN_COLL_ALL_GATHER;
    d.dtype = TERN_DTYPE_INT32;
    d.count = bytes / 4;
    tern_coll_result r;
    int64_t t = -1;
    if (tern_collective_time(f, &d, &r, &err))
        CHECK_MSG(0, "collective time: %s", err.msg);
    else
        t = (int64_t)r.time_ps;
    tern_fabric_free(f);
    return t;
}

int main(void)
{
    if (!mkdtemp(dir)) {
        fprintf(stderr, "mkdtemp failed\n");
        return 1;
    }
    char cmd[1024], path[512];
    snprintf(path, sizeof path, "%s/gen.py", dir);
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(gen, f);
        fclose(f);
    }
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s/gen.py %s/mlp_b4.onnx", dir, dir);
    TEST_BEGIN("model generation");
    int ok = f && system(cmd) == 0;
    CHECK_MSG(ok, "%s failed", cmd);
    float x[B * K];
    uint64_t seed = 12345;
    for (int i = 0; i < B * K; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = (float)((double)(seed >> 40) / (double)(1 << 24) * 2.0 - 1.0);
    }
    const char *machines[2] = {"trn1.32xlarge", "trn2.48xlarge"};
    for (int mi = 0; ok && mi < 2; mi++) {
        const char *m = machines[mi];
        result one, many, many2, timing;
        TEST_BEGIN(m);
        if (run(m, 1, "1", TERN_MODE_FUNCTIONAL, x, &one))
            continue;
        CHECK_MSG(!one.gathered, "%s: one core is gathered", m);
        /* trn1.32xlarge: 2 cores are chip 0's, 4 span chips 0 and 1 (NeuronLink between them) */
        for (unsigned cores = 2; cores <= 4; cores *= 2) {
            if (run(m, cores, "1", TERN_MODE_FUNCTIONAL, x, &many) || run(m, cores, "2", TERN_MODE_FUNCTIONAL, x, &many2) ||
                run(m, cores, "2", TERN_MODE_TIMING_ONLY, x, &timing))
                continue;
            CHECK_MSG(!memcmp(one.y, many.y, sizeof one.y) && !memcmp(one.hid, many.hid, sizeof one.hid),
                      "%s --cores %u: outputs differ from one core's", m, cores);
            CHECK_MSG(!memcmp(many.y, many2.y, sizeof many.y) && !memcmp(many.hid, many2.hid, sizeof many.hid),
                      "%s --cores %u: outputs differ between 1 and 2 host threads", m, cores);
            CHECK_MSG(many.time_ps == many2.time_ps, "%s --cores %u: %lld ps on 1 host thread, %lld on 2", m, cores,
                      (long long)many.time_ps, (long long)many2.time_ps);
            CHECK_MSG(timing.time_ps == many.time_ps, "%s --cores %u: timing-only %lld ps, functional %lld", m, cores,
                      (long long)timing.time_ps, (long long)many.time_ps);
            CHECK_MSG(many.gathered, "%s --cores %u: not gathered", m, cores);
            if (!many.gathered)
                continue;
            const tern_rt_gather_info *gi = &many.info;
            CHECK_MSG(gi->ranks == cores && gi->gathers == 2, "%s --cores %u: %u ranks, %u gathers", m, cores,
                      gi->ranks, gi->gathers);
            int64_t gy = gather_time(m, cores, sizeof one.y), gh = gather_time(m, cores, sizeof one.hid);
            CHECK_MSG(gi->gather_ps == gy + gh, "%s --cores %u: gathers %lld ps, tern_collective_time %lld + %lld", m,
                      cores, (long long)gi->gather_ps, (long long)gy, (long long)gh);
            CHECK_MSG(gi->compute_ps >= gi->share_max_ps && gi->compute_ps < gi->share_max_ps + 1000000,
                      "%s --cores %u: last share done at %lld ps, slowest share alone %lld", m, cores,
                      (long long)gi->compute_ps, (long long)gi->share_max_ps);
            /* the gathers run back to back from the last share's end; the Sync engine's final wait then ends */
            CHECK_MSG(many.time_ps >= gi->compute_ps + gi->gather_ps &&
                          many.time_ps < gi->compute_ps + gi->gather_ps + 1000000,
                      "%s --cores %u: predicted %lld ps, last share %lld + gathers %lld", m, cores,
                      (long long)many.time_ps, (long long)gi->compute_ps, (long long)gi->gather_ps);
            CHECK_MSG(many.time_ps > gi->share_max_ps + gy + gh - 1, "%s --cores %u: predicted below the share + gather",
                      m, cores);
            printf("%s --cores %u: predicted %.3f us = last share %.3f us (slowest alone %.3f us) + gathers %.3f us "
                   "(%.3f + %.3f); one core %.3f us\n",
                   m, cores, many.time_ps / 1e6, gi->compute_ps / 1e6, gi->share_max_ps / 1e6, gi->gather_ps / 1e6,
                   gy / 1e6, gh / 1e6, one.time_ps / 1e6);
        }
    }
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return check_report();
}
