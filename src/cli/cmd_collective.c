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
#include "tern/transport.h"

#define CMD "tern collective"

/* Functional by default while every rank's in and out buffers together stay under this many bytes. */
#define FUNCTIONAL_DEFAULT_BYTES (256ull << 20)
#define FUNCTIONAL_MAX_BYTES (16ull << 30)

static void usage(FILE *out)
{
    fprintf(out,
            "usage: tern collective OP --machine SPEC [--ranks N] [--nodes M] [--lnc K] [--dtype T]\n"
            "                      [--sizes A:B | --size A] [--step F]\n"
            "                      [--algorithm auto|ring|mesh|rdh|hier|direct|kangaring] [--channels N]\n"
            "                      [--reduce sum|max|min] [--groups 0,1;2,3] [--pairs S:T,S:T]\n"
            "                      [--displs packed|reversed]\n"
            "                      [--check] [--timing-only] [--json] [--join-timeout S]\n"
            "\n"
            "OP: all-reduce, all-gather, reduce-scatter, all-to-all, all-to-allv, permute, send-recv (a permute of\n"
            "one pair, by default rank 0 to the last rank). --pairs gives permute's (source:target) rank pairs (default:\n"
            "each group's ring shift); --displs reversed places all-to-allv's blocks in reverse order at the end of\n"
            "the buffers (MPI_Alltoallv displacements; default packed: back to back from 0).\n"
            "SPEC: an instance or system (trn1.32xlarge, trn2.48xlarge, trn2-ultraserver) or NxINSTANCE, a cluster\n"
            "over EFA (2xtrn1.32xlarge). Sizes take B, KiB, MiB, GiB; each row is the last times F (default 2).\n"
            "--channels N caps the ring's channels (default: one per direction of each edge-disjoint Hamiltonian\n"
            "cycle through the group's chips; 1: the single ring).\n"
            "--ranks takes the first N ranks (spread equally over --nodes instances); --check runs functionally and\n"
            "verifies every rank's output bit for bit against the host reference. Under `mpirun -np K` the chips are\n"
            "spread over K processes (same bits and times; only process 0 prints); --join-timeout S (default 60)\n"
            "bounds the wait for a process that never joins a collective. See docs/multichip.md.\n"
            "MPI: %s.\n", tern_mpi_available() ? "built with Open MPI" : "not built (one process only)");
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

/* "S:T,S:T": permute's (source, target) rank pairs; ranks are checked against the fabric by the collective */
static int parse_pairs(const char *s, unsigned **pairs, unsigned *npairs)
{
    size_t cap = 16, n = 0;
    unsigned *p = malloc(cap * sizeof *p);
    if (!p)
        return 0;
    for (const char *c = s;;) {
        for (int side = 0; side < 2; side++) {
            char *end;
            if (*c < '0' || *c > '9')
                goto bad;
            unsigned long v = strtoul(c, &end, 10);
            if (v > 100000000ul || (side == 0 && *end != ':'))
                goto bad;
            if (n == cap) {
                unsigned *q = realloc(p, 2 * cap * sizeof *p);
                if (!q)
                    goto bad;
                p = q;
                cap *= 2;
            }
            p[n++] = (unsigned)v;
            c = end + (side == 0);
        }
        if (!*c)
            break;
        if (*c++ != ',')
            goto bad;
    }
    *pairs = p;
    *npairs = (unsigned)(n / 2);
    return 1;
bad:
    free(p);
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

/* A 64-bit FNV-1a over bytes: each rank's defined output, then the ranks' hashes in rank order. */
static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

/* all-to-allv's counts for the CLI: member i sends floor(2 (count/n) ((i + j) mod n) / n) elements to member j, a
 * skewed pattern (zero to almost twice the even share) whose rows and columns each sum to at most count. With
 * reversed displacements (3 n x n values: counts, sdispls, rdispls) member i's send blocks sit in reverse j order
 * at the end of its in (a gap of count - row sum first) and member j's receive blocks in reverse i order at the end
 * of its out: neither side back to back from 0. */
static uint64_t *make_vcounts(uint64_t count, unsigned n, int reversed)
{
    size_t nn = (size_t)n * n;
    uint64_t *v = malloc(sizeof *v * nn * (reversed ? 3 : 1));
    if (!v)
        return NULL;
    for (unsigned i = 0; i < n; i++)
        for (unsigned j = 0; j < n; j++)
            v[(size_t)i * n + j] = 2 * (count / n) * ((i + j) % n) / n;
    if (reversed) {
        uint64_t *sd = v + nn, *rd = v + 2 * nn;
        for (unsigned i = 0; i < n; i++) {
            uint64_t at = count, rat = count;
            for (unsigned j = n; j-- > 0;) {
                at -= v[(size_t)i * n + j];
                sd[(size_t)i * n + j] = at;
                rat -= v[(size_t)j * n + i];
                rd[(size_t)i * n + j] = rat; /* rdispls[i][j]: where member i puts member j's block */
            }
        }
    }
    return v;
}

/* Output: only process 0 prints (the others compute the same rows). Errors every process reaches alike are
 * printed by process 0 too; an error of one process alone ends the run on every process with its message. */
typedef struct {
    const tern_transport *tr;
    int quiet;
} ctx;

#define OUT(...) (c.quiet ? (void)0 : (void)printf(__VA_ARGS__))
#define ERR(...) (c.quiet ? (void)0 : (void)fprintf(stderr, CMD ": " __VA_ARGS__))

static void local_failure(const ctx *c, const char *msg)
{
    if (c->tr && c->tr->nprocs > 1) {
        char full[1200];
        snprintf(full, sizeof full, CMD ": %.1100s", msg);
        c->tr->abort(c->tr->ctx, full);
    }
    fprintf(stderr, CMD ": %s\n", msg);
}

static int run_collective(int argc, char **argv, const tern_transport *tr);

int tern_cmd_collective(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        }
    tern_transport *tr = NULL;
    tern_error err = {0};
    if (tern_mpi_init(&argc, &argv, &tr, &err)) {
        if (tern_mpi_launched_rank() == 0)
            fprintf(stderr, CMD ": %s\n", err.msg);
        return 1;
    }
    int rc = run_collective(argc, argv, tr);
    tern_mpi_finalize(tr);
    return rc;
}

static int run_collective(int argc, char **argv, const tern_transport *tr)
{
    ctx c = {tr, tr && tr->me != 0};
    const char *op_name = NULL, *machine = NULL, *dtype_name = "fp32", *algo_name = "auto", *reduce_name = "sum";
    const char *sizes = "8B:1GiB", *groups_text = NULL, *pairs_text = NULL, *displs = "packed";
    uint64_t ranks = 0, nodes = 0, lnc = 0, step = 2, join_timeout = 60, channels = 0;
    int check = 0, json = 0, timing_only = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v;
        if (!strcmp(a, "--machine")) {
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
        } else if (!strcmp(a, "--pairs")) {
            if (!(pairs_text = tern_arg_value(CMD, argc, argv, &i, "rank pairs such as 0:5,5:0")))
                return 2;
        } else if (!strcmp(a, "--displs")) {
            if (!(displs = tern_arg_value(CMD, argc, argv, &i, "packed or reversed")))
                return 2;
        } else if (!strcmp(a, "--groups")) {
            if (!(groups_text = tern_arg_value(CMD, argc, argv, &i, "replica groups such as 0,1;2,3")))
                return 2;
        } else if (!strcmp(a, "--ranks") || !strcmp(a, "--nodes") || !strcmp(a, "--lnc") || !strcmp(a, "--step") ||
                   !strcmp(a, "--join-timeout") || !strcmp(a, "--channels")) {
            if (!(v = tern_arg_value(CMD, argc, argv, &i, "a whole number")))
                return 2;
            uint64_t *dst = !strcmp(a, "--ranks") ? &ranks : !strcmp(a, "--nodes") ? &nodes
                            : !strcmp(a, "--lnc") ? &lnc : !strcmp(a, "--step") ? &step
                            : !strcmp(a, "--channels") ? &channels : &join_timeout;
            if (tern_arg_uint(CMD, a, v, !strcmp(a, "--step") ? 2 : 1, !strcmp(a, "--channels") ? 8 : 1000000, dst))
                return 2;
        } else if (!strcmp(a, "--check")) {
            check = 1;
        } else if (!strcmp(a, "--json")) {
            json = 1;
        } else if (!strcmp(a, "--timing-only")) {
            timing_only = 1;
        } else if (a[0] == '-') {
            ERR("unknown option '%s'\n", a);
            return 2;
        } else if (!op_name) {
            op_name = a;
        } else {
            ERR("unexpected argument '%s'\n", a);
            return 2;
        }
    }
    if (!op_name || !machine) {
        if (!c.quiet)
            usage(stderr);
        return 2;
    }
    if (check && timing_only) {
        ERR("--check needs a functional run; it cannot be combined with --timing-only\n");
        return 2;
    }
    int send_recv = !strcmp(op_name, "send-recv"), reversed = !strcmp(displs, "reversed");
    const char *opname = send_recv ? "send-recv" : op_name;
    if ((pairs_text || send_recv) && groups_text) {
        ERR("--groups: permute pairs (--pairs, send-recv) name ranks of the whole fabric, not of replica groups\n");
        return 2;
    }
    if (strcmp(displs, "packed") && !reversed) {
        ERR("--displs '%s': expected packed or reversed\n", displs);
        return 1;
    }
    tern_error err = {0};
    tern_coll_desc d = {0};
    tern_coll_algo algo;
    tern_dtype dt;
    if (tern_coll_op_from_name(send_recv ? "permute" : op_name, &d.op, &err) ||
        tern_coll_algo_from_name(algo_name, &algo, &err) ||
        tern_reduce_op_from_name(reduce_name, &d.reduce, &err) || tern_dtype_from_name(dtype_name, &dt, &err)) {
        ERR("%s\n", err.msg);
        return 1;
    }
    d.algo = algo;
    d.dtype = dt;
    d.channels = (unsigned)channels;
    if (pairs_text && d.op != TERN_COLL_PERMUTE) {
        ERR("--pairs: only permute and send-recv take rank pairs, not %s\n", op_name);
        return 2;
    }
    if (reversed && d.op != TERN_COLL_ALL_TO_ALLV) {
        ERR("--displs reversed: only all-to-allv takes displacements, not %s\n", op_name);
        return 2;
    }
    size_t es = tern_dtype_size(dt);
    uint64_t lo, hi;
    {
        const char *colon = strchr(sizes, ':');
        char first[64];
        size_t n = colon ? (size_t)(colon - sizes) : strlen(sizes);
        if (n >= sizeof first || (memcpy(first, sizes, n), first[n] = 0, !parse_size(first, &lo)) ||
            (colon ? !parse_size(colon + 1, &hi) : (hi = lo, 0)) || hi < lo) {
            ERR("--sizes '%s': expected SIZE or MIN:MAX with MIN <= MAX, each a whole number above 0 with B, KiB, "
                "MiB or GiB (at most 1 TiB)\n", sizes);
            return 1;
        }
    }
    tern_fabric_opts fo = {(unsigned)nodes, (unsigned)ranks, (unsigned)lnc};
    tern_fabric *f;
    if (tern_fabric_load(machine, &fo, &f, &err)) {
        ERR("%s\n", err.msg);
        return 1;
    }
    if (tr && tern_fabric_set_transport(f, tr, &err)) {
        ERR("%s\n", err.msg);
        tern_fabric_free(f);
        return 1;
    }
    unsigned R = tern_fabric_ranks(f);
    unsigned *groups = NULL, ng = 0, gsz = 0;
    if (groups_text) {
        if (!parse_groups(groups_text, &groups, &ng, &gsz)) {
            ERR("--groups '%s': expected rank lists of equal length separated by ';' (0,1;2,3)\n", groups_text);
            tern_fabric_free(f);
            return 1;
        }
        d.groups = groups;
        d.ngroups = ng;
        d.group_size = gsz;
    }
    unsigned group_n = groups ? gsz : R;
    unsigned *pairs = NULL, npairs = 0;
    if (pairs_text || send_recv) {
        if (pairs_text && !parse_pairs(pairs_text, &pairs, &npairs)) {
            ERR("--pairs '%s': expected SOURCE:TARGET rank pairs separated by ',' (0:5,5:0)\n", pairs_text);
            free(groups);
            tern_fabric_free(f);
            return 1;
        }
        if (!pairs_text && (pairs = malloc(2 * sizeof *pairs))) { /* send-recv: rank 0 to the last rank */
            pairs[0] = 0;
            pairs[1] = R - 1;
            npairs = 1;
        }
        if (send_recv && npairs != 1) {
            ERR("send-recv: --pairs '%s' has %u pairs; a send/receive is one pair (use permute for more)\n",
                pairs_text, npairs);
            free(pairs);
            free(groups);
            tern_fabric_free(f);
            return 1;
        }
        d.pairs = pairs;
        d.npairs = npairs;
    }
    int rc = 0;
    int distributed = tr && tr->nprocs > 1;
    void **in = calloc(R, sizeof *in), **out = calloc(R, sizeof *out), **all_in = NULL;
    uint64_t *hashes = calloc(R, sizeof *hashes), *vcounts = NULL;
    void *expect = NULL;
    tern_coll_comm *comm = NULL;
    char msg[1024];
    if (!in || !out || !hashes || tern_coll_comm_create(f, &comm, &err)) {
        ERR("out of memory\n");
        rc = 1;
        goto done;
    }
    tern_coll_comm_set_timeout(comm, join_timeout * 1000);
    {
        /* validate once before printing anything: groups, pairs, the algorithm for this operation */
        tern_coll_desc probe = d;
        tern_coll_algo a;
        probe.count = lo / es;
        if (d.op == TERN_COLL_ALL_TO_ALLV && !(vcounts = make_vcounts(probe.count, group_n, reversed))) {
            ERR("out of memory\n");
            rc = 1;
            goto done;
        }
        probe.vcounts = vcounts;
        probe.sdispls = vcounts && reversed ? vcounts + (size_t)group_n * group_n : NULL;
        probe.rdispls = vcounts && reversed ? vcounts + 2 * (size_t)group_n * group_n : NULL;
        if (tern_collective_resolve(f, &probe, &a, &err)) {
            ERR("%s\n", err.msg);
            rc = 1;
            goto done;
        }
    }
    if (json)
        OUT("{\"machine\":\"%s\",\"operation\":\"%s\",\"ranks\":%u,\"nodes\":%u,\"lnc\":%u,\"dtype\":\"%s\","
            "\"reduce\":\"%s\",\"processes\":%u,\"rows\":[",
            tern_fabric_machine_name(f), opname, R, tern_fabric_nodes(f), tern_fabric_lnc(f),
            tern_dtype_name(dt), tern_reduce_op_name(d.reduce), tern_fabric_procs(f));
    else
        OUT("tern collective %s: %s, %u ranks on %u instance%s (lnc %u), %s%s%s%s\n"
            "%14s %14s %12s %12s %12s %10s %11s%s\n",
            opname, tern_fabric_machine_name(f), R, tern_fabric_nodes(f),
            tern_fabric_nodes(f) == 1 ? "" : "s", tern_fabric_lnc(f), tern_dtype_name(dt),
            d.op == TERN_COLL_ALL_REDUCE || d.op == TERN_COLL_REDUCE_SCATTER ? " " : "",
            d.op == TERN_COLL_ALL_REDUCE || d.op == TERN_COLL_REDUCE_SCATTER ? tern_reduce_op_name(d.reduce) : "",
            distributed ? ", spread over MPI processes" : "",
            "size(B)", "count(elems)", "time(us)", "algbw(GB/s)", "busbw(GB/s)", "algorithm", "mode",
            check ? "       check" : "");
    int first_row = 1;
    for (uint64_t bytes = lo; bytes <= hi; bytes = bytes > hi / step ? hi + 1 : bytes * step) {
        if (bytes % es) {
            ERR("size %" PRIu64 " B is not a whole number of %s elements (%zu B each)\n", bytes, tern_dtype_name(dt),
                es);
            rc = 1;
            break;
        }
        d.count = bytes / es;
        if (d.op == TERN_COLL_ALL_TO_ALLV) {
            free(vcounts);
            if (!(vcounts = make_vcounts(d.count, group_n, reversed))) {
                local_failure(&c, "out of memory for all-to-allv counts");
                rc = 1;
                break;
            }
            d.vcounts = vcounts;
            d.sdispls = reversed ? vcounts + (size_t)group_n * group_n : NULL;
            d.rdispls = reversed ? vcounts + 2 * (size_t)group_n * group_n : NULL;
        }
        uint64_t total = 2 * (uint64_t)R * bytes;
        int functional = check || (!timing_only && total <= FUNCTIONAL_DEFAULT_BYTES);
        if (functional && total > FUNCTIONAL_MAX_BYTES) {
            ERR("--check at %" PRIu64 " B over %u ranks needs %" PRIu64 " MiB of host buffers, above the limit of "
                "%llu MiB (use smaller --sizes)\n", bytes, R, total >> 20, FUNCTIONAL_MAX_BYTES >> 20);
            rc = 1;
            break;
        }
        tern_coll_result res;
        const char *verdict = "";
        uint64_t hash = 0xcbf29ce484222325ull;
        for (unsigned r = 0; r < R; r++) {
            if (!tern_fabric_rank_is_local(f, r))
                continue;
            if (functional) {
                free(in[r]);
                free(out[r]);
                in[r] = malloc(bytes);
                out[r] = calloc(1, bytes);
                if (!in[r] || !out[r]) {
                    snprintf(msg, sizeof msg, "out of memory for %u buffers of %" PRIu64 " B", R, bytes);
                    local_failure(&c, msg);
                    rc = 1;
                    goto done;
                }
                fill_input(dt, in[r], d.count, r);
            }
            if (tern_coll_comm_join(comm, r, &d, functional ? in[r] : NULL, functional ? out[r] : NULL, &err)) {
                local_failure(&c, err.msg);
                rc = 1;
                goto done;
            }
        }
        if (tern_coll_comm_run(comm, &res, &err)) {
            ERR("%s\n", err.msg);
            rc = 1;
            break;
        }
        if (functional) {
            /* each process hashes its own ranks' defined outputs; process 0 combines them in rank order */
            for (unsigned r = 0; r < R; r++) {
                hashes[r] = 0;
                if (tern_fabric_rank_is_local(f, r)) {
                    uint64_t a, b;
                    tern_collective_defined(f, &d, r, &a, &b);
                    hashes[r] = fnv(0xcbf29ce484222325ull, (unsigned char *)out[r] + a * es, (b - a) * es);
                }
            }
            if (distributed && tr->allreduce(tr->ctx, hashes, R, TERN_XOP_SUM, &err)) {
                local_failure(&c, err.msg);
                rc = 1;
                goto done;
            }
            for (unsigned r = 0; r < R; r++)
                hash = fnv(hash, &hashes[r], sizeof hashes[r]);
        }
        if (check) {
            /* the reference needs every rank's input; under MPI this process makes the others' too */
            const void *const *ref_in = (const void *const *)in;
            if (distributed) {
                if (!all_in && !(all_in = calloc(R, sizeof *all_in))) {
                    local_failure(&c, "out of memory");
                    rc = 1;
                    goto done;
                }
                for (unsigned r = 0; r < R; r++) {
                    free(all_in[r]);
                    if (!(all_in[r] = malloc(bytes))) {
                        local_failure(&c, "out of memory for the reference's inputs");
                        rc = 1;
                        goto done;
                    }
                    fill_input(dt, all_in[r], d.count, r);
                }
                ref_in = (const void *const *)all_in;
            }
            free(expect);
            if (!(expect = malloc(bytes))) {
                local_failure(&c, "out of memory");
                rc = 1;
                break;
            }
            verdict = "ok";
            uint64_t failed = 0;
            /* all-reduce and all-gather give every member of a group the same buffer: one reference per group (the
             * reference recomputes each element from every member's input, so per rank it would cost R times) */
            int same = d.op == TERN_COLL_ALL_REDUCE || d.op == TERN_COLL_ALL_GATHER;
            unsigned have = UINT32_MAX;
            for (unsigned r = 0; r < R && !failed; r++) {
                if (!tern_fabric_rank_is_local(f, r))
                    continue;
                uint64_t a, b;
                tern_collective_defined(f, &d, r, &a, &b);
                unsigned grp = 0;
                for (unsigned i = 0; groups && i < ng * gsz; i++)
                    if (groups[i] == r)
                        grp = i / gsz;
                if (same && grp == have)
                    goto compare;
                have = grp;
                if (tern_collective_reference(f, &d, res.algo, ref_in, r, expect, &err)) {
                    local_failure(&c, err.msg);
                    rc = 1;
                    goto done;
                }
            compare:
                for (uint64_t e = a; e < b; e++)
                    if (memcmp((unsigned char *)out[r] + e * es, (unsigned char *)expect + e * es, es)) {
                        uint32_t got = 0, want = 0;
                        memcpy(&got, (unsigned char *)out[r] + e * es, es);
                        memcpy(&want, (unsigned char *)expect + e * es, es);
                        fprintf(stderr, CMD ": --check failed: %s %s of %" PRIu64 " B, rank %u element %" PRIu64
                                        ": got bits 0x%x, the host reference has 0x%x\n",
                                tern_coll_algo_name(res.algo), tern_coll_op_name(d.op), bytes, r, e, got, want);
                        failed = 1;
                        break;
                    }
            }
            /* every process learns whether any rank failed, so all stop at the same row */
            if (distributed && tr->allreduce(tr->ctx, &failed, 1, TERN_XOP_MAX, &err)) {
                local_failure(&c, err.msg);
                rc = 1;
                goto done;
            }
            if (failed) {
                rc = 1;
                break;
            }
        }
        double us = (double)res.time_ps * 1e-6;
        double algbw = (double)bytes / ((double)res.time_ps * 1e-12) / 1e9;
        double busbw = algbw * tern_coll_busbw_factor(d.op, group_n);
        const char *mode = functional ? "functional" : "timing-only";
        if (json) {
            char hs[40] = "";
            if (functional)
                snprintf(hs, sizeof hs, ",\"hash\":\"%016" PRIx64 "\"", hash);
            OUT("%s{\"bytes\":%" PRIu64 ",\"count\":%" PRIu64 ",\"time_us\":%.3f,\"time_ps\":%" PRIu64
                ",\"algbw_gbps\":%.4f,\"busbw_gbps\":%.4f,\"algorithm\":\"%s\",\"channels\":%u,\"mode\":\"%s\""
                "%s%s%s%s}",
                first_row ? "" : ",", bytes, d.count, us, res.time_ps, algbw, busbw, tern_coll_algo_name(res.algo),
                res.channels, mode, hs, check ? ",\"check\":\"" : "", verdict, check ? "\"" : "");
        } else {
            char an[32];
            if (res.channels > 1) /* the ring's channels (docs/multichip.md, "Ring channels") */
                snprintf(an, sizeof an, "%s x%u", tern_coll_algo_name(res.algo), res.channels);
            else
                snprintf(an, sizeof an, "%s", tern_coll_algo_name(res.algo));
            OUT("%14" PRIu64 " %14" PRIu64 " %12.2f %12.3f %12.3f %10s %11s%s%s\n", bytes, d.count, us, algbw, busbw,
                an, mode, check ? "          " : "", verdict);
        }
        first_row = 0;
        fflush(stdout); /* each row as it is measured: a long sweep shows its progress (and leaves its rows if killed) */
        if (functional)
            for (unsigned r = 0; r < R; r++) {
                free(in[r]);
                free(out[r]);
                in[r] = out[r] = NULL;
            }
    }
    if (json)
        OUT("]}\n");
done:
    if (in && out)
        for (unsigned r = 0; r < R; r++) {
            free(in[r]);
            free(out[r]);
            if (all_in)
                free(all_in[r]);
        }
    free(in);
    free(out);
    free(all_in);
    free(hashes);
    free(vcounts);
    free(expect);
    free(groups);
    free(pairs);
    tern_coll_comm_free(comm);
    tern_fabric_free(f);
    return rc;
}
