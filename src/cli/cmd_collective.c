/* `tern collective`: tern's counterpart of Neuron's nccom-test. For each message size of a sweep it runs one
 * collective over a fabric (an instance, a system, or a cluster "NxINSTANCE") and prints the predicted time,
 * algbw and busbw (nccom-test/NCCL definitions) and the algorithm the runtime's size rule picked. Small sizes run
 * functionally (bytes moved and reduced); large ones timing-only, with identical times; --check forces the
 * functional run and compares every rank's output bit for bit with the host reference of the algorithm's
 * reduction order. docs/multichip.md describes the model. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "tern/collective.h"
#include "tern/fabric.h"
#include "tern/num.h"

#define CMD "tern collective"

/* Functional by default while every rank's in and out buffers together stay under this many bytes. */
#define FUNCTIONAL_DEFAULT_BYTES (256ull << 20)
#define FUNCTIONAL_MAX_BYTES (16ull << 30)

static void usage(FILE *out)
{
    fprintf(out,
            "usage: tern collective OP --machine SPEC [--ranks N] [--nodes M] [--lnc K] [--dtype T]\n"
            "                      [--sizes A:B | --size A] [--step F] [--algorithm auto|ring|mesh|rdh|hier|direct]\n"
            "                      [--reduce sum|max|min] [--groups 0,1;2,3] [--check] [--timing-only] [--json]\n"
            "\n"
            "OP: all-reduce, all-gather, reduce-scatter, all-to-all, permute.\n"
            "SPEC: an instance or system (trn1.32xlarge, trn2.48xlarge, trn2-ultraserver) or NxINSTANCE, a cluster\n"
            "over EFA (2xtrn1.32xlarge). Sizes take B, KiB, MiB, GiB; each row is the last times F (default 2).\n"
            "--ranks takes the first N ranks (spread equally over --nodes instances); --check runs functionally and\n"
            "verifies every rank's output bit for bit against the host reference. See docs/multichip.md.\n");
}

static int parse_size(const char *s, uint64_t *out)
{
    char *end;
    if (!s || !*s || *s < '0' || *s > '9')
        return 0;
    unsigned long long v = strtoull(s, &end, 10);
    uint64_t mul = 0;
    if (!strcmp(end, "B") || !*end)
        mul = 1;
    else if (!strcmp(end, "KiB"))
        mul = 1ull << 10;
    else if (!strcmp(end, "MiB"))
        mul = 1ull << 20;
    else if (!strcmp(end, "GiB"))
        mul = 1ull << 30;
    if (!mul || v == 0 || v > (1ull << 40) / mul)
        return 0;
    *out = v * mul;
    return 1;
}

static int parse_groups(const char *s, unsigned **groups, unsigned *ng, unsigned *gsz)
{
    size_t cap = 16, n = 0;
    unsigned *g = malloc(cap * sizeof *g), cur = 0, first = 0, count = 0;
    if (!g)
        return 0;
    const char *p = s;
    for (;;) {
        char *end;
        if (*p < '0' || *p > '9')
            goto bad;
        unsigned long v = strtoul(p, &end, 10);
        if (v > 1000000)
            goto bad;
        if (n == cap) {
            unsigned *ng2 = realloc(g, 2 * cap * sizeof *g);
            if (!ng2)
                goto bad;
            g = ng2;
            cap *= 2;
        }
        g[n++] = (unsigned)v;
        cur++;
        p = end;
        if (*p == ',') {
            p++;
            continue;
        }
        if (*p == ';' || !*p) {
            if (count == 0)
                first = cur;
            else if (cur != first)
                goto bad;
            count++;
            cur = 0;
            if (!*p)
                break;
            p++;
            continue;
        }
        goto bad;
    }
    *groups = g;
    *ng = count;
    *gsz = first;
    return 1;
bad:
    free(g);
    return 0;
}

/* Deterministic inputs: a hash of (rank, element) mapped to [-4, 4) and rounded to the dtype. */
static void fill_input(tern_dtype t, void *buf, uint64_t count, unsigned rank)
{
    size_t es = tern_dtype_size(t);
    tern_convert_opts o = TERN_CONVERT_OPTS_DEFAULT;
    for (uint64_t i = 0; i < count; i++) {
        uint32_t h = tern_num_sr_draw(0x7e51 + rank, i);
        uint32_t bits;
        if (t == TERN_DTYPE_INT32)
            bits = (uint32_t)((int32_t)(h % 2001) - 1000);
        else
            bits = tern_num_encode(t, (float)(h >> 8) * (8.0f / 16777216.0f) - 4.0f, &o, 0);
        memcpy((unsigned char *)buf + i * es, &bits, es);
    }
}

typedef struct {
    int json;
    int first_row;
} printer;

int tern_cmd_collective(int argc, char **argv)
{
    const char *op_name = NULL, *machine = NULL, *dtype_name = "fp32", *algo_name = "auto", *reduce_name = "sum";
    const char *sizes = "8B:1GiB", *groups_text = NULL;
    uint64_t ranks = 0, nodes = 0, lnc = 0, step = 2;
    int check = 0, json = 0, timing_only = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--machine")) {
            if (!(machine = tern_arg_value(CMD, argc, argv, &i, "an instance, system or NxINSTANCE")))
                return 2;
        } else if (!strcmp(a, "--dtype")) {
            if (!(dtype_name = tern_arg_value(CMD, argc, argv, &i, "a dtype")))
                return 2;
        } else if (!strcmp(a, "--algorithm")) {
            if (!(algo_name = tern_arg_value(CMD, argc, argv, &i, "an algorithm")))
                return 2;
        } else if (!strcmp(a, "--reduce")) {
            if (!(reduce_name = tern_arg_value(CMD, argc, argv, &i, "sum, max or min")))
                return 2;
        } else if (!strcmp(a, "--sizes") || !strcmp(a, "--size")) {
            if (!(sizes = tern_arg_value(CMD, argc, argv, &i, "sizes such as 8B:1GiB")))
                return 2;
        } else if (!strcmp(a, "--groups")) {
            if (!(groups_text = tern_arg_value(CMD, argc, argv, &i, "replica groups such as 0,1;2,3")))
                return 2;
        } else if (!strcmp(a, "--ranks") || !strcmp(a, "--nodes") || !strcmp(a, "--lnc") || !strcmp(a, "--step")) {
            if (!(v = tern_arg_value(CMD, argc, argv, &i, "a whole number")))
                return 2;
            uint64_t *dst = !strcmp(a, "--ranks") ? &ranks : !strcmp(a, "--nodes") ? &nodes
                            : !strcmp(a, "--lnc") ? &lnc : &step;
            if (tern_arg_uint(CMD, a, v, !strcmp(a, "--step") ? 2 : 1, 1000000, dst))
                return 2;
        } else if (!strcmp(a, "--check")) {
            check = 1;
        } else if (!strcmp(a, "--json")) {
            json = 1;
        } else if (!strcmp(a, "--timing-only")) {
            timing_only = 1;
        } else if (a[0] == '-') {
            fprintf(stderr, CMD ": unknown option '%s'\n", a);
            return 2;
        } else if (!op_name) {
            op_name = a;
        } else {
            fprintf(stderr, CMD ": unexpected argument '%s'\n", a);
            return 2;
        }
    }
    if (!op_name || !machine) {
        usage(stderr);
        return 2;
    }
    if (check && timing_only) {
        fprintf(stderr, CMD ": --check needs a functional run; it cannot be combined with --timing-only\n");
        return 2;
    }
    tern_error err = {0};
    tern_coll_desc d = {0};
    tern_coll_algo algo;
    tern_dtype dt;
    if (tern_coll_op_from_name(op_name, &d.op, &err) || tern_coll_algo_from_name(algo_name, &algo, &err) ||
        tern_reduce_op_from_name(reduce_name, &d.reduce, &err) || tern_dtype_from_name(dtype_name, &dt, &err)) {
        fprintf(stderr, CMD ": %s\n", err.msg);
        return 1;
    }
    d.algo = algo;
    d.dtype = dt;
    size_t es = tern_dtype_size(dt);
    uint64_t lo, hi;
    {
        const char *colon = strchr(sizes, ':');
        char first[64];
        size_t n = colon ? (size_t)(colon - sizes) : strlen(sizes);
        if (n >= sizeof first || (memcpy(first, sizes, n), first[n] = 0, !parse_size(first, &lo)) ||
            (colon ? !parse_size(colon + 1, &hi) : (hi = lo, 0)) || hi < lo) {
            fprintf(stderr, CMD ": --sizes '%s': expected SIZE or MIN:MAX with MIN <= MAX, each a whole number "
                            "above 0 with B, KiB, MiB or GiB (at most 1 TiB)\n", sizes);
            return 1;
        }
    }
    tern_fabric_opts fo = {(unsigned)nodes, (unsigned)ranks, (unsigned)lnc};
    tern_fabric *f;
    if (tern_fabric_load(machine, &fo, &f, &err)) {
        fprintf(stderr, CMD ": %s\n", err.msg);
        return 1;
    }
    unsigned R = tern_fabric_ranks(f);
    unsigned *groups = NULL, ng = 0, gsz = 0;
    if (groups_text) {
        if (!parse_groups(groups_text, &groups, &ng, &gsz)) {
            fprintf(stderr, CMD ": --groups '%s': expected rank lists of equal length separated by ';' "
                            "(0,1;2,3)\n", groups_text);
            tern_fabric_free(f);
            return 1;
        }
        d.groups = groups;
        d.ngroups = ng;
        d.group_size = gsz;
    }
    unsigned group_n = groups ? gsz : R;
    int rc = 0;
    void **in = calloc(R, sizeof *in), **out = calloc(R, sizeof *out);
    void *expect = NULL;
    if (!in || !out) {
        fprintf(stderr, CMD ": out of memory\n");
        rc = 1;
        goto done;
    }
    {
        /* validate once before printing anything: groups, pairs, the algorithm for this operation */
        tern_coll_desc probe = d;
        tern_coll_algo a;
        probe.count = lo / es;
        if (tern_collective_resolve(f, &probe, &a, &err)) {
            fprintf(stderr, CMD ": %s\n", err.msg);
            rc = 1;
            goto done;
        }
    }
    if (json)
        printf("{\"machine\":\"%s\",\"operation\":\"%s\",\"ranks\":%u,\"nodes\":%u,\"lnc\":%u,\"dtype\":\"%s\","
               "\"reduce\":\"%s\",\"rows\":[",
               tern_fabric_machine_name(f), tern_coll_op_name(d.op), R, tern_fabric_nodes(f), tern_fabric_lnc(f),
               tern_dtype_name(dt), tern_reduce_op_name(d.reduce));
    else
        printf("tern collective %s: %s, %u ranks on %u instance%s (lnc %u), %s%s%s\n"
               "%14s %14s %12s %12s %12s %10s %11s%s\n",
               tern_coll_op_name(d.op), tern_fabric_machine_name(f), R, tern_fabric_nodes(f),
               tern_fabric_nodes(f) == 1 ? "" : "s", tern_fabric_lnc(f), tern_dtype_name(dt),
               d.op == TERN_COLL_ALL_REDUCE || d.op == TERN_COLL_REDUCE_SCATTER ? " " : "",
               d.op == TERN_COLL_ALL_REDUCE || d.op == TERN_COLL_REDUCE_SCATTER ? tern_reduce_op_name(d.reduce) : "",
               "size(B)", "count(elems)", "time(us)", "algbw(GB/s)", "busbw(GB/s)", "algorithm", "mode",
               check ? "       check" : "");
    int first_row = 1;
    for (uint64_t bytes = lo; bytes <= hi; bytes = bytes > hi / step ? hi + 1 : bytes * step) {
        if (bytes % es) {
            fprintf(stderr, CMD ": size %" PRIu64 " B is not a whole number of %s elements (%zu B each)\n", bytes,
                    tern_dtype_name(dt), es);
            rc = 1;
            break;
        }
        d.count = bytes / es;
        uint64_t total = 2 * (uint64_t)R * bytes;
        int functional = check || (!timing_only && total <= FUNCTIONAL_DEFAULT_BYTES);
        if (functional && total > FUNCTIONAL_MAX_BYTES) {
            fprintf(stderr, CMD ": --check at %" PRIu64 " B over %u ranks needs %" PRIu64 " MiB of host buffers, "
                            "above the limit of %llu MiB (use smaller --sizes)\n", bytes, R, total >> 20,
                    FUNCTIONAL_MAX_BYTES >> 20);
            rc = 1;
            break;
        }
        tern_coll_result res;
        const char *verdict = "";
        if (functional) {
            for (unsigned r = 0; r < R; r++) {
                free(in[r]);
                free(out[r]);
                in[r] = malloc(bytes);
                out[r] = calloc(1, bytes);
                if (!in[r] || !out[r]) {
                    fprintf(stderr, CMD ": out of memory for %u buffers of %" PRIu64 " B\n", R, bytes);
                    rc = 1;
                    goto done;
                }
                fill_input(dt, in[r], d.count, r);
            }
            if (tern_collective_run(f, &d, (const void *const *)in, out, &res, &err)) {
                fprintf(stderr, CMD ": %s\n", err.msg);
                rc = 1;
                break;
            }
            if (check) {
                free(expect);
                expect = malloc(bytes);
                if (!expect) {
                    rc = 1;
                    break;
                }
                verdict = "ok";
                for (unsigned r = 0; r < R && rc == 0; r++) {
                    uint64_t a, b;
                    tern_collective_defined(f, &d, r, &a, &b);
                    if (tern_collective_reference(f, &d, res.algo, (const void *const *)in, r, expect, &err)) {
                        fprintf(stderr, CMD ": %s\n", err.msg);
                        rc = 1;
                        break;
                    }
                    for (uint64_t e = a; e < b; e++)
                        if (memcmp((unsigned char *)out[r] + e * es, (unsigned char *)expect + e * es, es)) {
                            uint32_t got = 0, want = 0;
                            memcpy(&got, (unsigned char *)out[r] + e * es, es);
                            memcpy(&want, (unsigned char *)expect + e * es, es);
                            fprintf(stderr, CMD ": --check failed: %s %s of %" PRIu64 " B, rank %u element %" PRIu64
                                            ": got bits 0x%x, the host reference has 0x%x\n",
                                    tern_coll_algo_name(res.algo), tern_coll_op_name(d.op), bytes, r, e, got, want);
                            rc = 1;
                            break;
                        }
                }
                if (rc)
                    break;
            }
        } else if (tern_collective_time(f, &d, &res, &err)) {
            fprintf(stderr, CMD ": %s\n", err.msg);
            rc = 1;
            break;
        }
        double us = (double)res.time_ps * 1e-6;
        double algbw = (double)bytes / ((double)res.time_ps * 1e-12) / 1e9;
        double busbw = algbw * tern_coll_busbw_factor(d.op, group_n);
        const char *mode = functional ? "functional" : "timing-only";
        if (json)
            printf("%s{\"bytes\":%" PRIu64 ",\"count\":%" PRIu64 ",\"time_us\":%.3f,\"algbw_gbps\":%.4f,"
                   "\"busbw_gbps\":%.4f,\"algorithm\":\"%s\",\"mode\":\"%s\"%s%s%s}",
                   first_row ? "" : ",", bytes, d.count, us, algbw, busbw, tern_coll_algo_name(res.algo), mode,
                   check ? ",\"check\":\"" : "", verdict, check ? "\"" : "");
        else
            printf("%14" PRIu64 " %14" PRIu64 " %12.2f %12.3f %12.3f %10s %11s%s%s\n", bytes, d.count, us, algbw,
                   busbw, tern_coll_algo_name(res.algo), mode, check ? "          " : "", verdict);
        first_row = 0;
        if (functional)
            for (unsigned r = 0; r < R; r++) {
                free(in[r]);
                free(out[r]);
                in[r] = out[r] = NULL;
            }
    }
    if (json)
        printf("]}\n");
done:
    if (in && out)
        for (unsigned r = 0; r < R; r++) {
            free(in[r]);
            free(out[r]);
        }
    free(in);
    free(out);
    free(expect);
    free(groups);
    tern_fabric_free(f);
    return rc;
}
