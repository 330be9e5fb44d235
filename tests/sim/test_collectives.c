/* Collectives over the fabric (include/tern/collective.h): every operation x algorithm on small rank counts of
 * trn1.32xlarge, trn2.48xlarge, the Trn2 UltraServer and a 2-instance trn1 cluster. Each functional result is
 * compared bit for bit with the host reference of the algorithm's reduction order, and, with integer-valued
 * inputs where every order gives the same exact answer, with an expectation computed here in int64 from the
 * operation's definition alone. Times must be identical between functional and timing-only runs and between
 * repeated runs; the fabric's routes, ring order and link contention are checked on their own; the 2-rank trn1
 * curve of nccom-test must be met within 15 %. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../check.h"
#include "sim/coll_sched.h"
#include "tern/collective.h"
#include "tern/fabric.h"
#include "tern/num.h"
#include "tern/transport.h"

static tern_fabric *fabric(const char *spec, unsigned nodes, unsigned ranks)
{
    tern_fabric_opts o = {nodes, ranks, 0};
    tern_fabric *f = NULL;
    tern_error err = {0};
    tern_status st = tern_fabric_load(spec, &o, &f, &err);
    CHECK_MSG(st == TERN_OK, "fabric %s: %s", spec, err.msg);
    return f;
}

/* Inputs: random floats in [-4, 4) rounded to the dtype, or (exact) small integers so every order agrees. */
static void fill(tern_dtype t, void *buf, uint64_t n, unsigned rank, int exact)
{
    size_t es = tern_dtype_size(t);
    tern_convert_opts o = TERN_CONVERT_OPTS_DEFAULT;
    for (uint64_t i = 0; i < n; i++) {
        uint32_t h = tern_num_sr_draw(99 + rank, i), bits;
        if (t == TERN_DTYPE_INT32)
            bits = (uint32_t)((int32_t)(h % 201) - 100);
        else if (exact)
            bits = tern_num_encode(t, (float)((int)(h % 7) - 3), &o, 0);
        else
            bits = tern_num_encode(t, (float)(h >> 8) * (8.0f / 16777216.0f) - 4.0f, &o, 0);
        memcpy((unsigned char *)buf + i * es, &bits, es);
    }
}

static double value(tern_dtype t, const void *buf, uint64_t i)
{
    size_t es = tern_dtype_size(t);
    uint32_t bits = 0;
    memcpy(&bits, (const unsigned char *)buf + i * es, es);
    return t == TERN_DTYPE_INT32 ? (double)(int32_t)bits : (double)tern_num_decode(t, bits);
}

static uint64_t blk(uint64_t count, unsigned n, unsigned i) { return count * i / n; }

/* The operation's definition, in exact arithmetic, for the default group (all ranks, member m = rank m). */
static double expected(const tern_coll_desc *d, unsigned R, void **in, unsigned r, uint64_t e)
{
    if (d->op == TERN_COLL_ALL_GATHER) {
        unsigned owner = 0;
        while (blk(d->count, R, owner + 1) <= e)
            owner++;
        return value(d->dtype, in[owner], e);
    }
    if (d->op == TERN_COLL_ALL_TO_ALLV) {
        const uint64_t *c = d->vcounts;
        unsigned p = 0;
        uint64_t at = e;
        while (at >= c[(size_t)p * R + r]) /* the block of r's out that e falls in comes from p */
            at -= c[(size_t)p++ * R + r];
        uint64_t from = 0;
        for (unsigned j = 0; j < r; j++)
            from += c[(size_t)p * R + j];
        return value(d->dtype, in[p], from + at);
    }
    if (d->op == TERN_COLL_ALL_TO_ALL) {
        uint64_t b = d->count / R;
        unsigned p = (unsigned)(e / b);
        return value(d->dtype, in[p], b * r + e % b);
    }
    double acc = value(d->dtype, in[0], e);
    for (unsigned p = 1; p < R; p++) {
        double v = value(d->dtype, in[p], e);
        acc = d->reduce == TERN_REDUCE_SUM ? acc + v : d->reduce == TERN_REDUCE_MAX ? (v > acc ? v : acc)
                                                                                    : (v < acc ? v : acc);
    }
    return acc;
}

static int run_case(const char *spec, unsigned nodes, unsigned ranks, tern_coll_op op, tern_coll_algo algo,
                    tern_dtype dt, tern_reduce_op red, uint64_t count, int exact)
{
    tern_fabric *f = fabric(spec, nodes, ranks);
    if (!f)
        return 0;
    unsigned R = tern_fabric_ranks(f);
    size_t es = tern_dtype_size(dt);
    /* all-to-allv: a skewed pattern with zeros, member i sending ((7i + 3j) mod 5) x count/(5R) to member j */
    uint64_t *vc = malloc(sizeof *vc * R * R);
    for (unsigned i = 0; i < R; i++)
        for (unsigned j = 0; j < R; j++)
            vc[i * R + j] = (uint64_t)((7 * i + 3 * j) % 5) * (count / (5 * R));
    tern_coll_desc d = {op, red, dt, count, algo, NULL, 0, 0, NULL, 0, op == TERN_COLL_ALL_TO_ALLV ? vc : NULL, NULL, NULL, 0};
    void **in = calloc(R, sizeof *in), **out = calloc(R, sizeof *out), **out2 = calloc(R, sizeof *out2);
    void *ref = malloc(count * es);
    for (unsigned r = 0; r < R; r++) {
        in[r] = malloc(count * es);
        out[r] = calloc(count, es);
        out2[r] = calloc(count, es);
        fill(dt, in[r], count, r, exact);
    }
    tern_coll_result fr, tr, fr2;
    tern_error err = {0};
    tern_status st = tern_collective_run(f, &d, (const void *const *)in, out, &fr, &err);
    CHECK_MSG(st == TERN_OK, "%s %s %s: %s", spec, tern_coll_op_name(op), tern_coll_algo_name(algo), err.msg);
    int ok = st == TERN_OK;
    if (ok) {
        st = tern_collective_time(f, &d, &tr, &err);
        CHECK_MSG(st == TERN_OK && tr.time_ps == fr.time_ps && tr.algo == fr.algo,
                  "%s %s %s: timing-only %llu ps, functional %llu ps", spec, tern_coll_op_name(op),
                  tern_coll_algo_name(algo), (unsigned long long)tr.time_ps, (unsigned long long)fr.time_ps);
        st = tern_collective_run(f, &d, (const void *const *)in, out2, &fr2, &err);
        CHECK_MSG(st == TERN_OK && fr2.time_ps == fr.time_ps, "%s %s: rerun time differs", spec,
                  tern_coll_op_name(op));
        unsigned bad = 0, badx = 0;
        for (unsigned r = 0; r < R; r++) {
            uint64_t lo, hi;
            tern_collective_defined(f, &d, r, &lo, &hi);
            tern_collective_reference(f, &d, fr.algo, (const void *const *)in, r, ref, &err);
            if (memcmp((char *)out[r] + lo * es, (char *)ref + lo * es, (hi - lo) * es) ||
                memcmp((char *)out2[r] + lo * es, (char *)out[r] + lo * es, (hi - lo) * es))
                bad++;
            if (exact && op != TERN_COLL_PERMUTE)
                for (uint64_t e = lo; e < hi; e++)
                    if (value(dt, out[r], e) != expected(&d, R, in, r, e)) {
                        badx++;
                        break;
                    }
        }
        CHECK_MSG(bad == 0, "%s %s %s %s: %u ranks differ from the host reference", spec, tern_coll_op_name(op),
                  tern_coll_algo_name(fr.algo), tern_dtype_name(dt), bad);
        CHECK_MSG(badx == 0, "%s %s %s %s: %u ranks differ from the exact definition", spec, tern_coll_op_name(op),
                  tern_coll_algo_name(fr.algo), tern_dtype_name(dt), badx);
        if (algo != TERN_ALGO_AUTO)
            CHECK_EQ_INT(fr.algo, algo);
        ok = bad == 0 && badx == 0;
        /* the conservative parallel engine (pdes.c) on the one-process transport: same picoseconds, same bits */
        CHECK(tern_fabric_set_transport(f, tern_transport_single(), &err) == TERN_OK);
        for (unsigned r = 0; r < R; r++)
            memset(out2[r], 0, count * es);
        tern_coll_result pr, pt;
        st = tern_collective_run(f, &d, (const void *const *)in, out2, &pr, &err);
        CHECK_MSG(st == TERN_OK && pr.time_ps == fr.time_ps && pr.span_ps == fr.span_ps &&
                      pr.host_bytes == fr.host_bytes,
                  "%s %s %s: pdes %llu ps (%s), one-process loop %llu ps", spec, tern_coll_op_name(op),
                  tern_coll_algo_name(fr.algo), (unsigned long long)pr.time_ps, st ? err.msg : "ok",
                  (unsigned long long)fr.time_ps);
        st = tern_collective_time(f, &d, &pt, &err);
        CHECK_MSG(st == TERN_OK && pt.time_ps == fr.time_ps, "%s %s: pdes timing-only differs",
                  spec, tern_coll_op_name(op));
        unsigned pbad = 0;
        for (unsigned r = 0; r < R; r++) {
            uint64_t lo, hi;
            tern_collective_defined(f, &d, r, &lo, &hi);
            if (memcmp((char *)out2[r] + lo * es, (char *)out[r] + lo * es, (hi - lo) * es))
                pbad++;
        }
        CHECK_MSG(pbad == 0, "%s %s %s: %u ranks' pdes bits differ", spec, tern_coll_op_name(op),
                  tern_coll_algo_name(fr.algo), pbad);
        CHECK(tern_fabric_set_transport(f, NULL, &err) == TERN_OK);
    }
    for (unsigned r = 0; r < R; r++) {
        free(in[r]);
        free(out[r]);
        free(out2[r]);
    }
    free(in);
    free(out);
    free(out2);
    free(ref);
    free(vc);
    tern_fabric_free(f);
    return ok;
}

static void test_matrix(void)
{
    TEST_BEGIN("every op x algorithm");
    struct {
        const char *spec;
        unsigned nodes, ranks;
    } fabs_[] = {{"trn1.32xlarge", 0, 2},    {"trn1.32xlarge", 0, 8},    {"trn2.48xlarge", 0, 4},
                 {"trn2.48xlarge", 0, 16},   {"2xtrn1.32xlarge", 0, 4},  {"trn2-ultraserver", 4, 8},
                 {"2xtrn1.32xlarge", 2, 8},  {"trn1.32xlarge", 0, 6}};
    const tern_coll_algo algos[] = {TERN_ALGO_RING, TERN_ALGO_MESH,   TERN_ALGO_RDH,      TERN_ALGO_HIER,
                                    TERN_ALGO_DIRECT, TERN_ALGO_AUTO, TERN_ALGO_KANGARING};
    for (size_t fi = 0; fi < TERN_ARRAY_LEN(fabs_); fi++)
        for (unsigned op = 0; op < TERN_COLL_OP_COUNT; op++)
            for (size_t ai = 0; ai < TERN_ARRAY_LEN(algos); ai++) {
                tern_coll_algo a = algos[ai];
                int reduces = op == TERN_COLL_ALL_REDUCE || op == TERN_COLL_REDUCE_SCATTER;
                int supported = a == TERN_ALGO_AUTO ||
                                (op == TERN_COLL_PERMUTE ? a == TERN_ALGO_DIRECT
                                 : op == TERN_COLL_ALL_TO_ALL || op == TERN_COLL_ALL_TO_ALLV
                                     ? (a == TERN_ALGO_RING || a == TERN_ALGO_MESH)
                                                              : (a != TERN_ALGO_DIRECT &&
                                                                 /* every fabric here pairs its ranks on chips */
                                                                 (a != TERN_ALGO_RDH || fabs_[fi].ranks != 6)));
                if (!supported)
                    continue;
                for (int exact = 0; exact < 2; exact++) {
                    run_case(fabs_[fi].spec, fabs_[fi].nodes, fabs_[fi].ranks, (tern_coll_op)op, a, TERN_DTYPE_FP32,
                             TERN_REDUCE_SUM, 1000 + 37 * fi, exact);
                    if (reduces && exact) {
                        run_case(fabs_[fi].spec, fabs_[fi].nodes, fabs_[fi].ranks, (tern_coll_op)op, a,
                                 TERN_DTYPE_FP32, TERN_REDUCE_MAX, 333, 0);
                        run_case(fabs_[fi].spec, fabs_[fi].nodes, fabs_[fi].ranks, (tern_coll_op)op, a,
                                 TERN_DTYPE_INT32, TERN_REDUCE_MIN, 333, 1);
                    }
                }
            }
}

static void test_dtypes(void)
{
    TEST_BEGIN("dtypes");
    const tern_dtype dts[] = {TERN_DTYPE_BF16, TERN_DTYPE_FP16, TERN_DTYPE_FP8_E4M3, TERN_DTYPE_FP8_E5M2,
                              TERN_DTYPE_FP8_E4M3_NEURON, TERN_DTYPE_INT32};
    const tern_coll_algo algos[] = {TERN_ALGO_RING, TERN_ALGO_MESH, TERN_ALGO_RDH, TERN_ALGO_KANGARING};
    for (size_t i = 0; i < TERN_ARRAY_LEN(dts); i++)
        for (size_t a = 0; a < TERN_ARRAY_LEN(algos); a++)
            for (unsigned r = 0; r < 3; r++)
                run_case("trn2.48xlarge", 0, 8, TERN_COLL_ALL_REDUCE, algos[a], dts[i], (tern_reduce_op)r, 515, 0);
}

/* The reduction order is the algorithm's: values where fp32 rounding depends on the association give different
 * bits for ring and mesh, and each functional run matches its own reference. */
static void test_order_matters(void)
{
    TEST_BEGIN("reduction order");
    tern_fabric *f = fabric("trn1.32xlarge", 0, 4);
    float v[4][4] = {{1e8f, 1, 1, 1}, {1, 1e8f, 1, 1}, {-1e8f, 1, 1e8f, 1}, {1, -1e8f, -1e8f, 1e8f}};
    const void *in[4] = {v[0], v[1], v[2], v[3]};
    float ring[4], mesh[4];
    tern_coll_desc d = {TERN_COLL_ALL_REDUCE, TERN_REDUCE_SUM, TERN_DTYPE_FP32, 4, TERN_ALGO_RING, NULL, 0, 0,
                        NULL, 0, NULL, NULL, NULL, 0};
    tern_error err;
    CHECK(tern_collective_reference(f, &d, TERN_ALGO_RING, in, 0, ring, &err) == TERN_OK);
    CHECK(tern_collective_reference(f, &d, TERN_ALGO_MESH, in, 0, mesh, &err) == TERN_OK);
    CHECK_MSG(memcmp(ring, mesh, sizeof ring) != 0, "ring and mesh orders should round differently here");
    float out[4][4];
    void *o[4] = {out[0], out[1], out[2], out[3]};
    tern_coll_result res;
    for (int a = 0; a < 2; a++) {
        d.algo = a ? TERN_ALGO_MESH : TERN_ALGO_RING;
        CHECK(tern_collective_run(f, &d, in, o, &res, &err) == TERN_OK);
        for (unsigned r = 0; r < 4; r++)
            CHECK_MSG(memcmp(out[r], a ? mesh : ring, sizeof ring) == 0, "rank %u %s", r,
                      tern_coll_algo_name(d.algo));
    }
    tern_fabric_free(f);
}

static void test_groups(void)
{
    TEST_BEGIN("replica groups");
    tern_fabric *f = fabric("trn1.32xlarge", 0, 8);
    unsigned groups[8] = {0, 2, 4, 6, 1, 3, 5, 7};
    float data[8][64], out[8][64];
    const void *in[8];
    void *o[8];
    for (unsigned r = 0; r < 8; r++) {
        for (unsigned i = 0; i < 64; i++)
            data[r][i] = (float)(r * 100 + i);
        in[r] = data[r];
        o[r] = out[r];
    }
    tern_coll_desc d = {TERN_COLL_ALL_REDUCE, TERN_REDUCE_SUM, TERN_DTYPE_FP32, 64, TERN_ALGO_RING, groups, 2, 4,
                        NULL, 0, NULL, NULL, NULL, 0};
    tern_coll_result res;
    tern_error err = {0};
    CHECK(tern_collective_run(f, &d, in, o, &res, &err) == TERN_OK);
    for (unsigned i = 0; i < 64; i++) {
        CHECK_EQ_INT(out[4][i], (0 + 200 + 400 + 600) + 4 * i);
        CHECK_EQ_INT(out[3][i], (100 + 300 + 500 + 700) + 4 * i);
    }
    /* all-gather inside a group: member order is the block order */
    d.op = TERN_COLL_ALL_GATHER;
    CHECK(tern_collective_run(f, &d, in, o, &res, &err) == TERN_OK);
    CHECK_EQ_INT(out[7][0], 100);  /* block 0 of group 1 comes from rank 1 */
    CHECK_EQ_INT(out[7][48], 748); /* block 3 from rank 7 */
    /* not a partition */
    unsigned dup[8] = {0, 1, 2, 3, 3, 4, 5, 6};
    d.groups = dup;
    CHECK(tern_collective_time(f, &d, &res, &err) == TERN_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "rank 3 is in group 0 and in group 1");
    unsigned oor[8] = {0, 1, 2, 3, 4, 5, 6, 9};
    d.groups = oor;
    CHECK(tern_collective_time(f, &d, &res, &err) == TERN_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "rank 9 out of range");
    d.groups = groups;
    d.ngroups = 1;
    CHECK(tern_collective_time(f, &d, &res, &err) == TERN_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "partition");
    /* permute pairs */
    unsigned pairs[4] = {0, 5, 5, 0};
    tern_coll_desc p = {TERN_COLL_PERMUTE, TERN_REDUCE_SUM, TERN_DTYPE_FP32, 64, TERN_ALGO_AUTO, NULL, 0, 0,
                        pairs, 2, NULL, NULL, NULL, 0};
    CHECK(tern_collective_run(f, &p, in, o, &res, &err) == TERN_OK);
    CHECK_EQ_INT(out[5][3], 3);
    CHECK_EQ_INT(out[0][3], 503);
    unsigned bad_pairs[4] = {0, 5, 1, 5};
    p.pairs = bad_pairs;
    CHECK(tern_collective_time(f, &p, &res, &err) == TERN_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "target already used");
    tern_fabric_free(f);
}

static void test_fabric(void)
{
    TEST_BEGIN("fabric");
    tern_fabric *f = fabric("trn1.32xlarge", 0, 0);
    CHECK_EQ_INT(tern_fabric_ranks(f), 32);
    tern_rank_place p;
    tern_fabric_place(f, 1, &p);
    CHECK(p.chip == 0 && p.core == 1);
    tern_fabric_place(f, 2, &p);
    CHECK(p.chip == 1 && p.core == 0);
    unsigned links, efa;
    tern_fabric_route_hops(f, 0, 1, &links, &efa);
    CHECK(links == 0 && efa == 0);
    tern_fabric_route_hops(f, 0, 2, &links, &efa); /* chip 0 -> chip 1: one link */
    CHECK_EQ_INT(links, 1);
    tern_fabric_route_hops(f, 0, 20, &links, &efa); /* chip 10 = (2,2): two hops in each dimension */
    CHECK_EQ_INT(links, 4);
    tern_fabric_route_hops(f, 0, 6, &links, &efa); /* chip 3 = (0,3): one hop over the wrap link */
    CHECK_EQ_INT(links, 1);
    /* contention: two transfers over the same link take longer than one */
    tern_fabric_xfer x = {0, 2, 1 << 20, 0, 0, 0, 0};
    uint64_t one = tern_fabric_transfer(f, &x);
    tern_fabric_xfer y = {1, 3, 1 << 20, 0, 0, 1, 0};
    uint64_t two = tern_fabric_transfer(f, &y);
    CHECK_MSG(two > one, "second transfer on a shared link: %llu ps, first %llu ps", (unsigned long long)two,
              (unsigned long long)one);
    tern_fabric_reset(f);
    CHECK_EQ_INT(tern_fabric_transfer(f, &x), one);
    tern_fabric_free(f);

    /* ring order: consecutive ranks on one chip or one link apart, including the wrap */
    const char *specs[] = {"trn1.32xlarge", "trn2.48xlarge", "trn2-ultraserver"};
    for (size_t s = 0; s < 3; s++) {
        f = fabric(specs[s], 0, 0);
        unsigned R = tern_fabric_ranks(f), *order = malloc(R * sizeof *order), worst = 0;
        tern_fabric_ring_order(f, order);
        for (unsigned k = 0; k < R; k++) {
            tern_fabric_route_hops(f, order[k], order[(k + 1) % R], &links, &efa);
            if (links > worst)
                worst = links;
        }
        CHECK_MSG(worst <= 1, "%s: ring order has a step of %u links", specs[s], worst);
        free(order);
        tern_fabric_free(f);
    }
    f = fabric("trn2-ultraserver", 0, 0);
    CHECK_EQ_INT(tern_fabric_ranks(f), 256);
    CHECK_EQ_INT(tern_fabric_nodes(f), 4);
    tern_fabric_free(f);
    f = fabric("2xtrn1.32xlarge", 0, 0);
    CHECK_EQ_INT(tern_fabric_ranks(f), 64);
    tern_fabric_route_hops(f, 0, 32, &links, &efa);
    CHECK(efa == 1 && links == 0);
    tern_fabric_free(f);

    /* bad specs */
    tern_fabric_opts o = {0, 0, 0};
    tern_error err;
    CHECK(tern_fabric_load("2xnosuch", &o, &f, &err) == TERN_ERR_NOT_FOUND);
    CHECK_STR_CONTAINS(err.msg, "unknown instance 'nosuch'");
    CHECK(tern_fabric_load("2y", &o, &f, &err) == TERN_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "COUNTxINSTANCE");
    o.nodes = 3;
    CHECK(tern_fabric_load("2xtrn1.32xlarge", &o, &f, &err) == TERN_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "--nodes 3");
    o.nodes = 2;
    o.ranks = 5;
    CHECK(tern_fabric_load("2xtrn1.32xlarge", &o, &f, &err) == TERN_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "not divisible");
}

/* The conservative engine on whole machines, timing-only: the UltraServer's 256 ranks and a 2-instance cluster,
 * every algorithm the size picks, against the one-process loop. */
static void test_pdes_large(void)
{
    TEST_BEGIN("pdes on whole machines");
    const struct {
        const char *spec;
        tern_coll_op op;
        uint64_t bytes;
    } cases[] = {{"trn2-ultraserver", TERN_COLL_ALL_REDUCE, 1ull << 30}, {"trn2-ultraserver", TERN_COLL_ALL_GATHER, 4 << 20},
                 {"2xtrn1.32xlarge", TERN_COLL_ALL_REDUCE, 64 << 20}, {"2xtrn1.32xlarge", TERN_COLL_ALL_TO_ALL, 1 << 20},
                 {"trn1.32xlarge", TERN_COLL_REDUCE_SCATTER, 8 << 20}, {"trn1.32xlarge", TERN_COLL_ALL_REDUCE, 100}};
    for (size_t i = 0; i < TERN_ARRAY_LEN(cases); i++) {
        tern_fabric *f = fabric(cases[i].spec, 0, 0);
        tern_coll_desc d = {cases[i].op, TERN_REDUCE_SUM, TERN_DTYPE_FP32, cases[i].bytes / 4, TERN_ALGO_AUTO, NULL,
                            0, 0, NULL, 0, NULL, NULL, NULL, 0};
        tern_coll_result a, b;
        tern_error err;
        CHECK(tern_collective_time(f, &d, &a, &err) == TERN_OK);
        CHECK(tern_fabric_set_transport(f, tern_transport_single(), &err) == TERN_OK);
        CHECK_MSG(tern_collective_time(f, &d, &b, &err) == TERN_OK, "%s", err.msg);
        CHECK_MSG(a.time_ps == b.time_ps && a.algo == b.algo, "%s %s %llu B: pdes %llu ps, loop %llu ps",
                  cases[i].spec, tern_coll_op_name(d.op), (unsigned long long)cases[i].bytes,
                  (unsigned long long)b.time_ps, (unsigned long long)a.time_ps);
        tern_fabric_free(f);
    }
}

/* The SPMD call path: each rank joins with its own call; missing ranks and disagreements are named. */
static void test_comm(void)
{
    TEST_BEGIN("ranks join a collective");
    tern_fabric *f = fabric("trn1.32xlarge", 0, 8);
    tern_coll_comm *c = NULL;
    tern_error err = {0};
    CHECK(tern_coll_comm_create(f, &c, &err) == TERN_OK);
    float in[8][64], out[8][64], direct[8][64];
    const void *pin[8];
    void *pout[8];
    for (unsigned r = 0; r < 8; r++) {
        fill(TERN_DTYPE_FP32, in[r], 64, r, 0);
        pin[r] = in[r];
        pout[r] = direct[r];
    }
    tern_coll_desc d = {TERN_COLL_ALL_REDUCE, TERN_REDUCE_SUM, TERN_DTYPE_FP32, 64, TERN_ALGO_RING, NULL, 0, 0, NULL,
                        0, NULL, NULL, NULL, 0};
    tern_coll_result a, b;
    CHECK(tern_collective_run(f, &d, pin, pout, &a, &err) == TERN_OK);
    for (unsigned r = 0; r < 8; r++)
        CHECK(tern_coll_comm_join(c, r, &d, in[r], out[r], &err) == TERN_OK);
    CHECK_MSG(tern_coll_comm_run(c, &b, &err) == TERN_OK, "%s", err.msg);
    CHECK(a.time_ps == b.time_ps && memcmp(out, direct, sizeof out) == 0);
    CHECK(tern_coll_comm_join(c, 3, &d, in[3], out[3], &err) == TERN_OK);
    CHECK(tern_coll_comm_join(c, 3, &d, in[3], out[3], &err) == TERN_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "all-reduce #2: rank 3 joined twice");
    CHECK(tern_coll_comm_join(c, 9, &d, NULL, NULL, &err) == TERN_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "rank 9 out of range");
    for (unsigned r = 0; r < 8; r++)
        if (r != 3 && r != 5 && r != 6)
            CHECK(tern_coll_comm_join(c, r, &d, in[r], out[r], &err) == TERN_OK);
    CHECK(tern_coll_comm_run(c, &b, &err) == TERN_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "all-reduce #2 (fp32, 64 elements): ranks 5..6 never joined (6 of 8 ranks did");
    tern_coll_desc other = d;
    other.count = 32;
    for (unsigned r = 0; r < 8; r++)
        CHECK(tern_coll_comm_join(c, r, r < 4 ? &d : &other, in[r], out[r], &err) == TERN_OK);
    CHECK(tern_coll_comm_run(c, &b, &err) == TERN_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "all-reduce #3: ranks disagree on the count: ranks 0..3 pass 64 elements, ranks 4..7 "
                                "pass 32 elements");
    other = d;
    other.reduce = TERN_REDUCE_MAX;
    for (unsigned r = 0; r < 8; r++)
        CHECK(tern_coll_comm_join(c, r, r == 6 ? &other : &d, in[r], out[r], &err) == TERN_OK);
    CHECK(tern_coll_comm_run(c, &b, &err) == TERN_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "ranks 0..5 pass sum, rank 6 passes max, rank 7 passes sum");
    for (unsigned r = 0; r < 8; r++) /* timing-only for all: no buffers */
        CHECK(tern_coll_comm_join(c, r, &d, NULL, NULL, &err) == TERN_OK);
    CHECK(tern_coll_comm_run(c, &b, &err) == TERN_OK && b.time_ps == a.time_ps);
    for (unsigned r = 0; r < 8; r++)
        CHECK(tern_coll_comm_join(c, r, &d, r ? in[r] : NULL, r ? out[r] : NULL, &err) == TERN_OK);
    CHECK(tern_coll_comm_run(c, &b, &err) == TERN_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "ranks disagree on the buffers: rank 0 passes no buffers (timing-only)");
    CHECK_EQ_INT(tern_coll_comm_seq(c), 6);
    tern_coll_comm_free(c);
    tern_fabric_free(f);
}

/* all-to-allv with MPI_Alltoallv's displacements: member i puts its block for j in slot n-1-j of its in (offset j mod
 * 2 inside it) and member j receives the block from i in slot n-1-i of its out (offset 1): reversed, with gaps on
 * both sides. The result is checked against a direct copy computed here (gaps keep the sentinel out held), against
 * tern_collective_reference, and its time against timing-only, the distributed engine and the same counts back to
 * back (offsets change no transfer's size or route, so the picoseconds are equal). The empty blocks leave ranks
 * without pulls in some steps; on trn2.48xlarge's 16 ranks the ring once served a step released at the same time
 * by such a rank after later ranks' steps in the one-process loop (82,615,477 ps) but in rank order in the
 * distributed engine (82,615,946 ps): coll_event's idle flag makes both serve the rank order. */
static void test_alltoallv_displs(void)
{
    TEST_BEGIN("all-to-allv displacements");
    const struct {
        const char *spec;
        unsigned nodes, ranks, strided;
    } fabs_[] = {{"trn1.32xlarge", 0, 8, 0}, {"trn1.32xlarge", 0, 8, 1}, {"2xtrn1.32xlarge", 0, 4, 0},
                 {"trn2.48xlarge", 0, 16, 0}, {"trn2-ultraserver", 4, 8, 0}};
    const uint64_t C = 960;
    for (size_t fi = 0; fi < TERN_ARRAY_LEN(fabs_); fi++) {
        tern_fabric *f = fabric(fabs_[fi].spec, fabs_[fi].nodes, fabs_[fi].ranks);
        unsigned R = tern_fabric_ranks(f), n = fabs_[fi].strided ? R / 2 : R;
        unsigned *groups = malloc(sizeof *groups * R);
        for (unsigned g = 0; g < R / n; g++) /* strided: groups {0, 2, 4, ..} and {1, 3, 5, ..} */
            for (unsigned m = 0; m < n; m++)
                groups[g * n + m] = fabs_[fi].strided ? g + 2 * m : m;
        uint64_t *vc = malloc(sizeof *vc * n * n), *sd = malloc(sizeof *sd * n * n), *rd = malloc(sizeof *rd * n * n);
        uint64_t slot = C / n;
        for (unsigned i = 0; i < n; i++)
            for (unsigned j = 0; j < n; j++) {
                vc[i * n + j] = (uint64_t)((3 * i + 5 * j) % 4) * (C / (4 * n));
                sd[i * n + j] = (n - 1 - j) * slot + j % 2;
                rd[j * n + i] = (n - 1 - i) * slot + 1;
            }
        float **in = malloc(sizeof *in * R), **out = malloc(sizeof *out * R), *want = malloc(sizeof *want * C),
              *ref = malloc(sizeof *ref * C);
        for (unsigned r = 0; r < R; r++) {
            in[r] = malloc(sizeof(float) * C);
            out[r] = malloc(sizeof(float) * C);
            fill(TERN_DTYPE_FP32, in[r], C, r, 0);
        }
        for (int a = 0; a < 2; a++) {
            tern_coll_desc d = {TERN_COLL_ALL_TO_ALLV, TERN_REDUCE_SUM, TERN_DTYPE_FP32, C,
                                a ? TERN_ALGO_MESH : TERN_ALGO_RING, fabs_[fi].strided ? groups : NULL,
                                fabs_[fi].strided ? 2 : 0, fabs_[fi].strided ? n : 0, NULL, 0, vc, sd, rd, 0};
            tern_coll_result fr, tr, pr, packed;
            tern_error err = {0};
            for (int pass = 0; pass < 2; pass++) { /* the one-process loop, then the distributed engine */
                for (unsigned r = 0; r < R; r++)
                    for (uint64_t e = 0; e < C; e++)
                        out[r][e] = -1e30f;
                tern_coll_result *res = pass ? &pr : &fr;
                tern_status st = tern_collective_run(f, &d, (const void *const *)in, (void *const *)out, res, &err);
                CHECK_MSG(st == TERN_OK, "%s %s: %s", fabs_[fi].spec, tern_coll_algo_name(d.algo), err.msg);
                unsigned bad = 0, badref = 0;
                for (unsigned g = 0; st == TERN_OK && g < R / n; g++)
                    for (unsigned j = 0; j < n; j++) {
                        unsigned rj = groups[g * n + j];
                        for (uint64_t e = 0; e < C; e++)
                            want[e] = ref[e] = -1e30f;
                        uint64_t hlo = C, hhi = 0; /* the hull of the non-empty receive blocks */
                        for (unsigned i = 0; i < n; i++) { /* the definition: a copy per block */
                            memcpy(want + rd[j * n + i], in[groups[g * n + i]] + sd[i * n + j],
                                   sizeof(float) * vc[i * n + j]);
                            if (vc[i * n + j] && rd[j * n + i] < hlo)
                                hlo = rd[j * n + i];
                            if (vc[i * n + j] && rd[j * n + i] + vc[i * n + j] > hhi)
                                hhi = rd[j * n + i] + vc[i * n + j];
                        }
                        bad += memcmp(out[rj], want, sizeof(float) * C) != 0;
                        uint64_t lo, hi;
                        tern_collective_defined(f, &d, rj, &lo, &hi);
                        CHECK(tern_collective_reference(f, &d, d.algo, (const void *const *)in, rj, ref, &err) ==
                              TERN_OK);
                        badref += memcmp(ref, want, sizeof(float) * C) != 0 || lo != hlo || hi != hhi;
                    }
                CHECK_MSG(bad == 0 && badref == 0, "%s %s %s: %u ranks differ from the definition, %u from the "
                          "reference", fabs_[fi].spec, tern_coll_algo_name(d.algo), pass ? "pdes" : "loop", bad,
                          badref);
                CHECK(tern_fabric_set_transport(f, pass ? NULL : tern_transport_single(), &err) == TERN_OK);
            }
            CHECK(tern_collective_time(f, &d, &tr, &err) == TERN_OK);
            tern_coll_desc b2b = d;
            b2b.sdispls = b2b.rdispls = NULL;
            CHECK(tern_collective_time(f, &b2b, &packed, &err) == TERN_OK);
            CHECK_MSG(fr.time_ps == tr.time_ps && fr.time_ps == pr.time_ps && fr.time_ps == packed.time_ps &&
                          fr.time_ps > 0,
                      "%s %s: functional %llu ps, timing-only %llu, pdes %llu, back to back %llu",
                      fabs_[fi].spec, tern_coll_algo_name(d.algo), (unsigned long long)fr.time_ps,
                      (unsigned long long)tr.time_ps, (unsigned long long)pr.time_ps,
                      (unsigned long long)packed.time_ps);
        }
        for (unsigned r = 0; r < R; r++) {
            free(in[r]);
            free(out[r]);
        }
        free(in), free(out), free(want), free(ref), free(vc), free(sd), free(rd), free(groups);
        tern_fabric_free(f);
    }

    /* bad displacements: each names the members, the offsets and the rule */
    tern_fabric *f = fabric("trn1.32xlarge", 0, 4);
    uint64_t vc[16], sd[16], rd[16];
    for (unsigned i = 0; i < 4; i++)
        for (unsigned j = 0; j < 4; j++) {
            vc[i * 4 + j] = 10;
            sd[i * 4 + j] = 20 * j;
            rd[j * 4 + i] = 20 * i;
        }
    tern_coll_desc d = {TERN_COLL_ALL_TO_ALLV, TERN_REDUCE_SUM, TERN_DTYPE_FP32, 80, TERN_ALGO_AUTO, NULL, 0, 0,
                        NULL, 0, vc, sd, rd, 0};
    tern_coll_result res;
    tern_error err = {0};
    CHECK_MSG(tern_collective_time(f, &d, &res, &err) == TERN_OK, "%s", err.msg);
    sd[1 * 4 + 2] = 71;
    CHECK(tern_collective_time(f, &d, &res, &err) == TERN_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "member 1's block for member 2 (10 elements at send offset 71) ends past the "
                                "buffer's 80 elements");
    sd[1 * 4 + 2] = UINT64_MAX - 3; /* no wrap-around */
    CHECK(tern_collective_time(f, &d, &res, &err) == TERN_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "ends past");
    sd[1 * 4 + 2] = 40;
    rd[3 * 4 + 0] = 75;
    CHECK(tern_collective_time(f, &d, &res, &err) == TERN_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "member 3's block from member 0 (10 elements at receive offset 75) ends past");
    rd[3 * 4 + 0] = 25;
    CHECK(tern_collective_time(f, &d, &res, &err) == TERN_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "member 3 receives the blocks of members 1 ([20, 30)) and 0 ([25, 35)) at "
                                "overlapping offsets");
    vc[1 * 4 + 3] = 0; /* an empty block overlaps nothing */
    CHECK_MSG(tern_collective_time(f, &d, &res, &err) == TERN_OK, "%s", err.msg);
    rd[3 * 4 + 0] = 0;
    vc[1 * 4 + 3] = 10;
    /* ranks that disagree on the displacements are named */
    tern_coll_comm *c = NULL;
    CHECK(tern_coll_comm_create(f, &c, &err) == TERN_OK);
    uint64_t rd2[16];
    memcpy(rd2, rd, sizeof rd);
    rd2[0] = 1;
    tern_coll_desc d2 = d;
    d2.rdispls = rd2;
    for (unsigned r = 0; r < 4; r++)
        CHECK(tern_coll_comm_join(c, r, r == 3 ? &d2 : &d, NULL, NULL, &err) == TERN_OK);
    CHECK(tern_coll_comm_run(c, &res, &err) == TERN_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "all-to-allv #1: ranks disagree on the all-to-allv receive displacements: ranks 0..2 "
                                "pass displacements hash");
    d2 = d;
    d2.sdispls = NULL;
    for (unsigned r = 0; r < 4; r++)
        CHECK(tern_coll_comm_join(c, r, r == 0 ? &d2 : &d, NULL, NULL, &err) == TERN_OK);
    CHECK(tern_coll_comm_run(c, &res, &err) == TERN_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "send displacements: rank 0 passes none (back to back), ranks 1..3 pass");
    tern_coll_comm_free(c);
    tern_fabric_free(f);
}

/* KangaRing: its own reduction order (bits differ from ring's where association matters, and match its reference),
 * half the ring's steps, fewer DMA bytes per rank and so less time than the ring on trn2.48xlarge's 64 ranks at
 * large sizes, chosen by auto there (every chip's four ranks in the group) but not on trn1 (two per chip: the
 * published 2-rank curve is the ring's), the distributed engine's picoseconds, and groups that cannot pair. */
static void test_kangaring(void)
{
    TEST_BEGIN("kangaring");
    tern_fabric *f = fabric("trn2.48xlarge", 0, 0);
    CHECK_EQ_INT(tern_fabric_ranks(f), 64);
    tern_coll_desc d = {TERN_COLL_ALL_REDUCE, TERN_REDUCE_SUM, TERN_DTYPE_FP32, (256ull << 20) / 4, TERN_ALGO_RING,
                        NULL, 0, 0, NULL, 0, NULL, NULL, NULL, 0};
    tern_coll_result ring, kr, au, pd;
    tern_error err = {0};
    CHECK(tern_collective_time(f, &d, &ring, &err) == TERN_OK);
    d.algo = TERN_ALGO_KANGARING;
    CHECK_MSG(tern_collective_time(f, &d, &kr, &err) == TERN_OK, "%s", err.msg);
    d.algo = TERN_ALGO_AUTO;
    CHECK(tern_collective_time(f, &d, &au, &err) == TERN_OK);
    CHECK_EQ_INT(au.algo, TERN_ALGO_KANGARING);
    CHECK_EQ_INT(au.time_ps, kr.time_ps);
    CHECK_EQ_INT(ring.steps, 2 * 63);
    CHECK_EQ_INT(kr.steps, 2 * 32 - 1); /* 32 pairs: M reduce-scatter steps (one a local fold), M - 1 all-gather */
    CHECK_MSG(kr.time_ps < ring.time_ps * 0.8, "256 MiB over 64 trn2 ranks: kangaring %.1f us, ring %.1f us",
              kr.time_ps * 1e-6, ring.time_ps * 1e-6);
    printf("all-reduce 256 MiB over trn2.48xlarge's 64 ranks: ring %.1f us, kangaring %.1f us\n", ring.time_ps * 1e-6,
           kr.time_ps * 1e-6);
    CHECK(tern_fabric_set_transport(f, tern_transport_single(), &err) == TERN_OK);
    CHECK(tern_collective_time(f, &d, &pd, &err) == TERN_OK && pd.time_ps == kr.time_ps);
    tern_fabric_free(f);
    /* 16 ranks = 4 whole chips: auto still picks it; 8 ranks of trn1 (two per chip): ring */
    f = fabric("trn2.48xlarge", 0, 16);
    d.count = (64ull << 20) / 4;
    CHECK(tern_collective_time(f, &d, &au, &err) == TERN_OK && au.algo == TERN_ALGO_KANGARING);
    d.count = 1000; /* small: mesh, as before */
    CHECK(tern_collective_time(f, &d, &au, &err) == TERN_OK && au.algo == TERN_ALGO_MESH);
    tern_fabric_free(f);
    f = fabric("trn1.32xlarge", 0, 8);
    d.count = (256ull << 20) / 4;
    CHECK(tern_collective_time(f, &d, &au, &err) == TERN_OK && au.algo == TERN_ALGO_RING);

    /* the reduction order: 4 trn1 ranks = 2 pairs, random fp32 values (association shows somewhere) */
    d.count = 4096;
    float *in[4], *out[4], *ref = malloc(sizeof(float) * 4096), *rref = malloc(sizeof(float) * 4096);
    for (unsigned r = 0; r < 4; r++) {
        in[r] = malloc(sizeof(float) * 4096);
        out[r] = malloc(sizeof(float) * 4096);
        fill(TERN_DTYPE_FP32, in[r], 4096, r, 0);
    }
    tern_fabric_free(f);
    f = fabric("trn1.32xlarge", 0, 4);
    d.algo = TERN_ALGO_KANGARING;
    tern_coll_result res;
    CHECK(tern_collective_run(f, &d, (const void *const *)in, (void *const *)out, &res, &err) == TERN_OK);
    CHECK(tern_collective_reference(f, &d, TERN_ALGO_KANGARING, (const void *const *)in, 2, ref, &err) == TERN_OK);
    CHECK(tern_collective_reference(f, &d, TERN_ALGO_RING, (const void *const *)in, 2, rref, &err) == TERN_OK);
    CHECK(memcmp(out[2], ref, sizeof(float) * 4096) == 0 && memcmp(out[0], ref, sizeof(float) * 4096) == 0);
    CHECK_MSG(memcmp(ref, rref, sizeof(float) * 4096) != 0, "kangaring and ring orders should round differently");
    /* in place (in == out), as data-parallel training calls it */
    for (unsigned r = 0; r < 4; r++)
        memcpy(out[r], in[r], sizeof(float) * 4096);
    CHECK(tern_collective_run(f, &d, (const void *const *)out, (void *const *)out, &res, &err) == TERN_OK);
    CHECK(memcmp(out[1], ref, sizeof(float) * 4096) == 0 && memcmp(out[3], ref, sizeof(float) * 4096) == 0);
    for (unsigned r = 0; r < 4; r++)
        free(in[r]), free(out[r]);
    free(ref), free(rref);
    tern_fabric_free(f);

    /* groups that do not pair on chips: each rank of a strided group on its own chip; an odd group */
    f = fabric("trn1.32xlarge", 0, 8);
    unsigned strided[8] = {0, 2, 4, 6, 1, 3, 5, 7};
    d.groups = strided;
    d.ngroups = 2;
    d.group_size = 4;
    CHECK(tern_collective_time(f, &d, &res, &err) == TERN_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "all-reduce: algorithm kangaring pairs each chip's ranks");
    tern_fabric_free(f);
    f = fabric("trn1.32xlarge", 0, 6);
    unsigned threes[6] = {0, 1, 2, 3, 4, 5};
    d.groups = threes;
    d.ngroups = 2;
    d.group_size = 3;
    CHECK(tern_collective_time(f, &d, &res, &err) == TERN_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "the 3-rank groups do not pair up that way");
    d.op = TERN_COLL_ALL_TO_ALL;
    d.groups = NULL;
    CHECK(tern_collective_time(f, &d, &res, &err) == TERN_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "all-to-all: algorithm 'kangaring' not supported (mesh or ring)");
    tern_fabric_free(f);
}

/* C7: 2 ranks (the two cores of one trn1 chip), fp32 all-reduce, nccom-test; within 15 % at every size. */
static void test_calibration(void)
{
    TEST_BEGIN("2-rank trn1 curve");
    tern_fabric *f = fabric("trn1.32xlarge", 0, 2);
    const struct {
        uint64_t bytes;
        double us;
    } pts[] = {{1 << 20, 68}, {4 << 20, 107}, {16 << 20, 332}, {64 << 20, 1214}, {256ull << 20, 4750},
               {1ull << 30, 18930}, {8, 58}, {1 << 10, 58}, {32 << 10, 58}};
    for (size_t i = 0; i < TERN_ARRAY_LEN(pts); i++) {
        tern_coll_desc d = {TERN_COLL_ALL_REDUCE, TERN_REDUCE_SUM, TERN_DTYPE_FP32, pts[i].bytes / 4, TERN_ALGO_AUTO,
                            NULL, 0, 0, NULL, 0, NULL, NULL, NULL, 0};
        tern_coll_result res;
        tern_error err;
        CHECK(tern_collective_time(f, &d, &res, &err) == TERN_OK);
        double us = (double)res.time_ps * 1e-6, e = us / pts[i].us - 1;
        CHECK_MSG(fabs(e) <= 0.15, "%llu B: predicted %.1f us, published %.0f us (%+.1f %%)",
                  (unsigned long long)pts[i].bytes, us, pts[i].us, 100 * e);
    }
    tern_fabric_free(f);
}

/* Ring channels (docs/multichip.md): trn1.32xlarge's 4x4 chip torus gives 2 edge-disjoint Hamiltonian cycles, each
 * run in both directions, so 4 channels whose chip hops cover each of the 64 directed links exactly once; a large
 * all-gather is faster over them than over the single ring; one chip (no links) keeps the single ring, to the ps;
 * the channels' bits equal the reference's and differ from the single ring's where association shows. */
static void test_ring_channels(void)
{
    TEST_BEGIN("ring channels");
    tern_fabric *f = fabric("trn1.32xlarge", 0, 0);
    unsigned R = tern_fabric_ranks(f), ring[32], ord[COLL_MAX_CHANNELS * 32];
    CHECK_EQ_INT(R, 32);
    tern_fabric_ring_order(f, ring);
    unsigned C = coll_ring_channels(f, ring, R, ord);
    CHECK_EQ_INT(C, 4);
    unsigned char used[16][16];
    memset(used, 0, sizeof used);
    unsigned links_used = 0;
    for (unsigned c = 0; c < C; c++) {
        unsigned seen[32] = {0};
        for (unsigned k = 0; k < R; k++) {
            unsigned a = ring[ord[c * R + k]], b = ring[ord[c * R + (k + 1) % R]], links = 9, efa = 9;
            seen[ord[c * R + k]]++;
            tern_fabric_route_hops(f, a, b, &links, &efa);
            CHECK_MSG(links <= 1 && efa == 0, "channel %u: ranks %u -> %u take %u links", c, a, b, links);
            tern_rank_place pa, pb;
            tern_fabric_place(f, a, &pa);
            tern_fabric_place(f, b, &pb);
            if (pa.chip != pb.chip) {
                CHECK_MSG(!used[pa.chip][pb.chip], "link %u -> %u in two channels", pa.chip, pb.chip);
                used[pa.chip][pb.chip] = 1;
                links_used++;
            } else {
                CHECK(pa.core + 1 == pb.core); /* a chip's two ranks consecutive, in ring order */
            }
        }
        for (unsigned m = 0; m < R; m++)
            CHECK_MSG(seen[m] == 1, "channel %u visits member %u %u times", c, m, seen[m]);
    }
    CHECK_EQ_INT(links_used, 64); /* every directed link of the torus, once */

    tern_coll_desc d = {TERN_COLL_ALL_GATHER, TERN_REDUCE_SUM, TERN_DTYPE_FP32, (256ull << 20) / 4, TERN_ALGO_RING,
                        NULL, 0, 0, NULL, 0, NULL, NULL, NULL, 0};
    tern_coll_result multi, single, pd;
    tern_error err = {0};
    CHECK(tern_collective_time(f, &d, &multi, &err) == TERN_OK);
    d.channels = 1;
    CHECK(tern_collective_time(f, &d, &single, &err) == TERN_OK);
    CHECK_EQ_INT(multi.channels, 4);
    CHECK_EQ_INT(single.channels, 1);
    CHECK_EQ_INT(multi.steps, single.steps);
    CHECK_MSG(multi.time_ps < single.time_ps * 0.8, "256 MiB all-gather over 32 trn1 ranks: %.1f us over 4 channels, "
              "%.1f us over one ring", multi.time_ps * 1e-6, single.time_ps * 1e-6);
    printf("all-gather 256 MiB over trn1.32xlarge's 32 ranks: one ring %.1f us, 4 channels %.1f us\n",
           single.time_ps * 1e-6, multi.time_ps * 1e-6);
    d.channels = 2; /* a cap: cycle 0 both ways */
    CHECK(tern_collective_time(f, &d, &pd, &err) == TERN_OK && pd.channels == 2);
    d.channels = 0;
    CHECK(tern_fabric_set_transport(f, tern_transport_single(), &err) == TERN_OK);
    CHECK(tern_collective_time(f, &d, &pd, &err) == TERN_OK && pd.time_ps == multi.time_ps);
    tern_fabric_free(f);

    /* one chip: no links, no channels; the same picoseconds as the single ring (the 2-rank calibration curve) */
    f = fabric("trn1.32xlarge", 0, 2);
    d.op = TERN_COLL_ALL_REDUCE;
    d.count = (64ull << 20) / 4;
    CHECK(tern_collective_time(f, &d, &multi, &err) == TERN_OK);
    d.channels = 1;
    CHECK(tern_collective_time(f, &d, &single, &err) == TERN_OK);
    CHECK_EQ_INT(multi.channels, 1);
    CHECK_EQ_INT(multi.time_ps, single.time_ps);
    tern_fabric_free(f);

    /* bits: a reduce-scatter and an all-reduce over the 4 channels equal the reference, and differ from the
     * single ring's order on random fp32 inputs */
    f = fabric("trn1.32xlarge", 0, 0);
    enum { N = 32 * 4 * 64 };
    float *in[32], *out[32], *ref = malloc(sizeof(float) * N), *sref = malloc(sizeof(float) * N);
    for (unsigned r = 0; r < 32; r++) {
        in[r] = malloc(sizeof(float) * N);
        out[r] = malloc(sizeof(float) * N);
        fill(TERN_DTYPE_FP32, in[r], N, r, 0);
    }
    tern_coll_result res;
    for (int op = 0; op < 2; op++) {
        d.op = op ? TERN_COLL_REDUCE_SCATTER : TERN_COLL_ALL_REDUCE;
        d.count = N;
        d.channels = 0;
        CHECK(tern_collective_run(f, &d, (const void *const *)in, (void *const *)out, &res, &err) == TERN_OK);
        CHECK_EQ_INT(res.channels, 4);
        int differs = 0;
        for (unsigned r = 0; r < 32; r++) {
            uint64_t lo = op ? (uint64_t)N / 32 * r : 0, hi = op ? (uint64_t)N / 32 * (r + 1) : N;
            d.channels = 0;
            CHECK(tern_collective_reference(f, &d, TERN_ALGO_RING, (const void *const *)in, r, ref, &err) == TERN_OK);
            d.channels = 1;
            CHECK(tern_collective_reference(f, &d, TERN_ALGO_RING, (const void *const *)in, r, sref, &err) == TERN_OK);
            CHECK_MSG(memcmp(out[r] + lo, ref + lo, sizeof(float) * (hi - lo)) == 0, "%s rank %u: not the reference",
                      tern_coll_op_name(d.op), r);
            differs |= memcmp(ref + lo, sref + lo, sizeof(float) * (hi - lo)) != 0;
        }
        CHECK_MSG(differs, "%s: 4 channels and the single ring should round differently", tern_coll_op_name(d.op));
    }
    for (unsigned r = 0; r < 32; r++)
        free(in[r]), free(out[r]);
    free(ref), free(sref);
    tern_fabric_free(f);
}

int main(void)
{
    test_fabric();
    test_matrix();
    test_dtypes();
    test_order_matters();
    test_groups();
    test_calibration();
    test_pdes_large();
    test_comm();
    test_alltoallv_displs();
    test_kangaring();
    test_ring_channels();
    return check_report();
}
