/* Collective algorithms as schedules over the fabric (include/tern/collective.h, docs/multichip.md). A builder
 * turns (operation, algorithm, replica groups) into pulls: in step s, rank r pulls a block from a peer, copying
 * it or reducing it into its own buffer. Pulls are run twice from the same schedule: the timing pass is a
 * discrete-event loop where (rank, step) becomes ready when the rank's previous step and the previous step of
 * every peer it reads from are done, and ready steps are served in time order, ties by rank then step, so the
 * fabric's first-come-first-served resources see one deterministic order; the functional pass executes steps in
 * order and moves the bytes. The algorithms are arranged so that no step writes a block another rank reads in
 * the same step, which makes the functional result independent of the order of ranks inside a step. */
#include "tern/collective.h"
#include "sim/coll_sched.h"
#include "tern/transport.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const OP_NAMES[] = {"all-reduce", "all-gather", "reduce-scatter", "all-to-all", "permute",
                                       "all-to-allv"};
static const char *const ALGO_NAMES[] = {"auto", "ring", "mesh", "rdh", "hier", "direct", "kangaring"};
static const char *const RED_NAMES[] = {"sum", "max", "min"};

const char *tern_coll_op_name(tern_coll_op op) { return (unsigned)op < TERN_COLL_OP_COUNT ? OP_NAMES[op] : "?"; }
const char *tern_coll_algo_name(tern_coll_algo a) { return (unsigned)a < TERN_ALGO_COUNT ? ALGO_NAMES[a] : "?"; }
const char *tern_reduce_op_name(tern_reduce_op r) { return (unsigned)r < 3 ? RED_NAMES[r] : "?"; }

tern_status tern_coll_op_from_name(const char *s, tern_coll_op *out, tern_error *err)
{
    for (unsigned i = 0; i < TERN_COLL_OP_COUNT; i++)
        if (strcmp(s, OP_NAMES[i]) == 0) {
            *out = (tern_coll_op)i;
            return TERN_OK;
        }
    return tern_error_set(err, TERN_ERR_NOT_FOUND,
                          "operation '%s': unknown (expected all-reduce, all-gather, reduce-scatter, all-to-all, "
                          "all-to-allv, permute)", s);
}

tern_status tern_coll_algo_from_name(const char *s, tern_coll_algo *out, tern_error *err)
{
    for (unsigned i = 0; i < TERN_ALGO_COUNT; i++)
        if (strcmp(s, ALGO_NAMES[i]) == 0) {
            *out = (tern_coll_algo)i;
            return TERN_OK;
        }
    return tern_error_set(err, TERN_ERR_NOT_FOUND,
                          "algorithm '%s': unknown (expected auto, ring, mesh, rdh, hier, direct, kangaring)", s);
}

tern_status tern_reduce_op_from_name(const char *s, tern_reduce_op *out, tern_error *err)
{
    for (unsigned i = 0; i < 3; i++)
        if (strcmp(s, RED_NAMES[i]) == 0) {
            *out = (tern_reduce_op)i;
            return TERN_OK;
        }
    return tern_error_set(err, TERN_ERR_NOT_FOUND, "reduction '%s': unknown (expected sum, max, min)", s);
}

double tern_coll_busbw_factor(tern_coll_op op, unsigned n)
{
    if (n == 0)
        return 0;
    switch (op) {
    case TERN_COLL_ALL_REDUCE: return 2.0 * (n - 1) / n;
    case TERN_COLL_ALL_GATHER:
    case TERN_COLL_REDUCE_SCATTER:
    case TERN_COLL_ALL_TO_ALL:
    case TERN_COLL_ALL_TO_ALLV: return (double)(n - 1) / n;
    default: return 1.0;
    }
}

/* ---- groups ---- */

typedef struct {
    unsigned n;        /* members */
    unsigned *rank;    /* member index -> fabric rank */
    unsigned *ring;    /* ring position -> member index (members sorted by the fabric's ring order) */
} group;

typedef struct {
    unsigned ngroups;
    group *g;
    unsigned *store;
} groups;

static void groups_free(groups *gs)
{
    free(gs->g);
    free(gs->store);
}

static tern_status groups_make(const tern_fabric *f, const tern_coll_desc *d, groups *gs, tern_error *err)
{
    unsigned R = tern_fabric_ranks(f);
    unsigned ng = d->groups ? d->ngroups : 1, gsz = d->groups ? d->group_size : R;
    memset(gs, 0, sizeof *gs);
    if (d->groups && (ng == 0 || gsz == 0))
        return tern_error_set(err, TERN_ERR_INVALID, "replica groups: %u groups of %u ranks is empty", ng, gsz);
    if ((uint64_t)ng * gsz != R)
        return tern_error_set(err, TERN_ERR_INVALID,
                              "replica groups: %u groups of %u ranks = %llu ranks, but the fabric has %u "
                              "(groups must partition the ranks)", ng, gsz, (unsigned long long)ng * gsz, R);
    gs->g = calloc(ng, sizeof *gs->g);
    gs->store = malloc(sizeof(unsigned) * (size_t)R * 4);
    if (!gs->g || !gs->store) {
        groups_free(gs);
        return tern_error_set(err, TERN_ERR_NOMEM, "replica groups: out of memory");
    }
    unsigned *owner = gs->store + 2 * (size_t)R, *ringpos = gs->store + 3 * (size_t)R;
    unsigned *order = owner; /* reused below */
    for (unsigned r = 0; r < R; r++)
        owner[r] = UINT32_MAX;
    for (unsigned i = 0; i < ng; i++)
        for (unsigned j = 0; j < gsz; j++) {
            unsigned r = d->groups ? d->groups[(size_t)i * gsz + j] : j;
            if (r >= R) {
                groups_free(gs);
                return tern_error_set(err, TERN_ERR_INVALID,
                                      "replica group %u: rank %u out of range (the fabric has %u ranks)", i, r, R);
            }
            if (owner[r] != UINT32_MAX) {
                unsigned other = owner[r];
                groups_free(gs);
                return tern_error_set(err, TERN_ERR_INVALID,
                                      "replica groups: rank %u is in group %u and in group %u (groups must "
                                      "partition the ranks)", r, other, i);
            }
            owner[r] = i;
        }
    tern_fabric_ring_order(f, order);
    for (unsigned k = 0; k < R; k++)
        ringpos[order[k]] = k;
    for (unsigned i = 0; i < ng; i++) {
        group *g = &gs->g[i];
        g->n = gsz;
        g->rank = gs->store + (size_t)i * gsz;
        g->ring = gs->store + R + (size_t)i * gsz;
        for (unsigned j = 0; j < gsz; j++) {
            g->rank[j] = d->groups ? d->groups[(size_t)i * gsz + j] : j;
            g->ring[j] = j;
        }
        /* ring order of the members: insertion sort by the fabric ring position (groups are small or sorted) */
        for (unsigned a = 1; a < gsz; a++) {
            unsigned v = g->ring[a], b = a;
            while (b > 0 && ringpos[g->rank[g->ring[b - 1]]] > ringpos[g->rank[v]]) {
                g->ring[b] = g->ring[b - 1];
                b--;
            }
            g->ring[b] = v;
        }
    }
    gs->ngroups = ng;
    return TERN_OK;
}

static int is_pow2(unsigned n) { return n && !(n & (n - 1)); }

static unsigned nodes_of_group(const tern_fabric *f, const group *g, unsigned *per_node_equal)
{
    unsigned nn = tern_fabric_nodes(f);
    unsigned *cnt = calloc(nn, sizeof *cnt);
    unsigned used = 0, eq = 1, first = 0;
    if (!cnt) {
        *per_node_equal = 0;
        return 1;
    }
    for (unsigned j = 0; j < g->n; j++) {
        tern_rank_place p;
        tern_fabric_place(f, g->rank[j], &p);
        cnt[p.node]++;
    }
    for (unsigned i = 0; i < nn; i++)
        if (cnt[i]) {
            if (!used)
                first = cnt[i];
            else if (cnt[i] != first)
                eq = 0;
            used++;
        }
    free(cnt);
    *per_node_equal = eq;
    return used;
}

/* KangaRing's pairs: the members in ring order, two by two (ring[2j], ring[2j+1]), each pair on one chip (the
 * ring visits a chip's ranks consecutively). Returns the fewest members any chip holding members holds, 0 when the
 * members do not pair up that way. */
static unsigned kanga_per_chip(const tern_fabric *f, const group *g)
{
    if (g->n < 2 || g->n % 2)
        return 0;
    unsigned fewest = UINT32_MAX, run = 0, prev = UINT32_MAX;
    for (unsigned k = 0; k < g->n; k++) {
        tern_rank_place p;
        tern_fabric_place(f, g->rank[g->ring[k]], &p);
        if (k % 2 && p.chip_global != prev)
            return 0; /* a pair across two chips */
        if (p.chip_global != prev && run) {
            fewest = run < fewest ? run : fewest;
            run = 0;
        }
        run++;
        prev = p.chip_global;
    }
    return run < fewest ? run : fewest;
}

static unsigned kanga_groups(const tern_fabric *f, const groups *gs)
{
    unsigned fewest = UINT32_MAX;
    for (unsigned i = 0; i < gs->ngroups; i++) {
        unsigned k = kanga_per_chip(f, &gs->g[i]);
        fewest = k < fewest ? k : fewest;
    }
    return fewest;
}

/* all-to-allv's blocks over a group of n members: every block inside the buffer (back to back: each row and column
 * sums to at most count; with displacements: each offset + count at most count, overflow-checked), and no two
 * blocks a member receives overlapping (with receive displacements), since the result would then depend on the
 * order the blocks land in. */
static tern_status check_vblocks(const tern_coll_desc *d, unsigned n, tern_error *err)
{
    const uint64_t *c = d->vcounts, *sd = d->sdispls, *rd = d->rdispls, cnt = d->count;
    if (!c)
        return tern_error_set(err, TERN_ERR_INVALID, "all-to-allv: no counts (vcounts, %u x %u elements)", n, n);
    for (unsigned i = 0; i < n; i++) {
        uint64_t row = 0, col = 0;
        for (unsigned j = 0; j < n; j++) {
            uint64_t s = c[(size_t)i * n + j], r = c[(size_t)j * n + i];
            row = s > UINT64_MAX - row ? UINT64_MAX : row + s; /* saturating: above count either way */
            col = r > UINT64_MAX - col ? UINT64_MAX : col + r;
            if (sd && (sd[(size_t)i * n + j] > cnt || s > cnt - sd[(size_t)i * n + j]))
                return tern_error_set(err, TERN_ERR_INVALID,
                                      "all-to-allv: member %u's block for member %u (%llu elements at send offset "
                                      "%llu) ends past the buffer's %llu elements (count)", i, j,
                                      (unsigned long long)s, (unsigned long long)sd[(size_t)i * n + j],
                                      (unsigned long long)cnt);
            if (rd && (rd[(size_t)i * n + j] > cnt || r > cnt - rd[(size_t)i * n + j]))
                return tern_error_set(err, TERN_ERR_INVALID,
                                      "all-to-allv: member %u's block from member %u (%llu elements at receive "
                                      "offset %llu) ends past the buffer's %llu elements (count)", i, j,
                                      (unsigned long long)r, (unsigned long long)rd[(size_t)i * n + j],
                                      (unsigned long long)cnt);
        }
        if ((!sd && row > cnt) || (!rd && col > cnt))
            return tern_error_set(err, TERN_ERR_INVALID,
                                  "all-to-allv: member %u %s %llu elements back to back, more than the buffer's %llu "
                                  "(count)", i, !sd && row > cnt ? "sends" : "receives",
                                  (unsigned long long)(!sd && row > cnt ? row : col), (unsigned long long)cnt);
    }
    if (!rd)
        return TERN_OK;
    /* receive blocks of member j: sort the non-empty ones by offset, each must start at or after the previous end */
    unsigned *ord = malloc(sizeof *ord * (n ? n : 1));
    if (!ord)
        return tern_error_set(err, TERN_ERR_NOMEM, "all-to-allv: out of memory");
    tern_status st = TERN_OK;
    for (unsigned j = 0; j < n && !st; j++) {
        const uint64_t *off = rd + (size_t)j * n;
        unsigned k = 0;
        for (unsigned i = 0; i < n; i++) {
            if (!c[(size_t)i * n + j])
                continue;
            unsigned b = k++;
            while (b > 0 && off[ord[b - 1]] > off[i]) {
                ord[b] = ord[b - 1];
                b--;
            }
            ord[b] = i;
        }
        for (unsigned q = 1; q < k && !st; q++) {
            unsigned a = ord[q - 1], b = ord[q];
            uint64_t aend = off[a] + c[(size_t)a * n + j];
            if (off[b] < aend)
                st = tern_error_set(err, TERN_ERR_INVALID,
                                    "all-to-allv: member %u receives the blocks of members %u ([%llu, %llu)) and %u "
                                    "([%llu, %llu)) at overlapping offsets (receive blocks must not overlap)", j, a,
                                    (unsigned long long)off[a], (unsigned long long)aend, b,
                                    (unsigned long long)off[b], (unsigned long long)(off[b] + c[(size_t)b * n + j]));
        }
    }
    free(ord);
    return st;
}

static tern_status resolve(const tern_fabric *f, const tern_coll_desc *d, const groups *gs, tern_coll_algo *out,
                           tern_error *err)
{
    size_t es = tern_dtype_size(d->dtype);
    if (es == 0 || !(tern_dtype_is_float(d->dtype) || d->dtype == TERN_DTYPE_INT32) ||
        d->dtype == TERN_DTYPE_TF32)
        return tern_error_set(err, TERN_ERR_UNSUPPORTED,
                              "dtype %s: collectives take fp32, bf16, fp16, the fp8 types or int32",
                              tern_dtype_name(d->dtype));
    if ((unsigned)d->op >= TERN_COLL_OP_COUNT || (unsigned)d->reduce > TERN_REDUCE_MIN)
        return tern_error_set(err, TERN_ERR_INVALID, "collective: operation %d or reduction %d out of range",
                              (int)d->op, (int)d->reduce);
    unsigned n = gs->g[0].n, eq;
    unsigned nodes = nodes_of_group(f, &gs->g[0], &eq);
    tern_coll_algo a = d->algo;
    uint64_t bytes = d->count * es;
    if (a == TERN_ALGO_AUTO) {
        if (d->op == TERN_COLL_PERMUTE)
            a = TERN_ALGO_DIRECT;
        else if (d->op == TERN_COLL_ALL_TO_ALL || d->op == TERN_COLL_ALL_TO_ALLV)
            a = TERN_ALGO_MESH;
        else if (nodes > 1)
            a = eq ? TERN_ALGO_HIER : TERN_ALGO_RING;
        else if (bytes < 1000000)
            a = TERN_ALGO_MESH;
        else if (bytes <= 56000000 && is_pow2(n))
            a = TERN_ALGO_RDH;
        else if (kanga_groups(f, gs) >= 4)
            a = TERN_ALGO_KANGARING; /* every chip's four ranks (Trn2's LNC=2) in the group: KangaRing, not ring */
        else
            a = TERN_ALGO_RING;
    }
    const char *op = tern_coll_op_name(d->op);
    switch (d->op) {
    case TERN_COLL_PERMUTE:
        if (a != TERN_ALGO_DIRECT)
            return tern_error_set(err, TERN_ERR_INVALID, "permute: algorithm '%s' not supported (permute is direct)",
                                  tern_coll_algo_name(a));
        break;
    case TERN_COLL_ALL_TO_ALL:
    case TERN_COLL_ALL_TO_ALLV:
        if (a != TERN_ALGO_MESH && a != TERN_ALGO_RING)
            return tern_error_set(err, TERN_ERR_INVALID, "%s: algorithm '%s' not supported (mesh or ring)", op,
                                  tern_coll_algo_name(a));
        if (d->op == TERN_COLL_ALL_TO_ALLV) {
            tern_status st = check_vblocks(d, n, err);
            if (st)
                return st;
        }
        break;
    default:
        if (a == TERN_ALGO_KANGARING && !kanga_groups(f, gs))
            return tern_error_set(err, TERN_ERR_INVALID,
                                  "%s: algorithm kangaring pairs each chip's ranks (ring-consecutive members two by "
                                  "two on one chip), but the %u-rank group%s do not pair up that way", op, n,
                                  gs->ngroups > 1 ? "s" : "");
        if (a == TERN_ALGO_DIRECT)
            return tern_error_set(err, TERN_ERR_INVALID,
                                  "%s: algorithm '%s' not supported (ring, mesh, rdh, hier, kangaring)", op,
                                  tern_coll_algo_name(a));
        if (a == TERN_ALGO_RDH && !is_pow2(n))
            return tern_error_set(err, TERN_ERR_INVALID,
                                  "%s: algorithm rdh needs a power-of-two group size, got %u ranks", op, n);
        if (a == TERN_ALGO_HIER && !eq)
            return tern_error_set(err, TERN_ERR_INVALID,
                                  "%s: algorithm hier needs the same number of ranks on every instance of a group",
                                  op);
        break;
    }
    *out = a;
    return TERN_OK;
}

/* ---- schedules ---- */

typedef coll_pull pull;

typedef struct {
    pull *p;
    size_t np, cap;
    unsigned nsteps;
    unsigned channels; /* the most ring channels any group ran */
    int oom;
} sched;

static void emitk(sched *s, unsigned step, unsigned dst, unsigned src, uint64_t src_off, uint64_t dst_off,
                  uint64_t n, int reduce, int src_in, unsigned partner, int dup, int secondary)
{
    if (s->oom)
        return;
    if (s->np == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 1024;
        pull *p = realloc(s->p, cap * sizeof *p);
        if (!p) {
            s->oom = 1;
            return;
        }
        s->p = p;
        s->cap = cap;
    }
    /* the partner shares dst's chip, whose ranks are consecutive: a small offset */
    int delta = partner == UINT32_MAX ? 0 : (int)((int64_t)partner - (int64_t)dst);
    TERN_ASSERT(delta > -128 && delta < 128);
    s->p[s->np++] = (pull){step, dst, src, (unsigned)reduce, (unsigned)src_in, (unsigned)dup, (unsigned)secondary,
                           delta, src_off, dst_off, n};
    if (step + 1 > s->nsteps)
        s->nsteps = step + 1;
}

static void emit(sched *s, unsigned step, unsigned dst, unsigned src, uint64_t src_off, uint64_t dst_off, uint64_t n,
                 int reduce, int src_in)
{
    emitk(s, step, dst, src, src_off, dst_off, n, reduce, src_in, UINT32_MAX, 0, 0);
}

static uint64_t blk(uint64_t count, unsigned n, unsigned i) { return (uint64_t)((unsigned __int128)count * i / n); }

/* Ring reduce-scatter over ranks[0..n) in ring order: the block that ends at position k is the nr ranges
 * [lo[k*nr + r], hi[k*nr + r]) (one pull each); it starts at position k+1 and gathers one rank per step (acc =
 * op(local, incoming)). n-1 steps from step0. */
static void ring_rs_sets(sched *s, unsigned step0, const unsigned *ranks, unsigned n, unsigned nr, const uint64_t *lo,
                         const uint64_t *hi)
{
    for (unsigned st = 0; st + 1 < n; st++)
        for (unsigned j = 0; j < n; j++) {
            unsigned k = (unsigned)(((uint64_t)j + 2u * n - 2 - st) % n);
            for (unsigned r = 0; r < nr; r++) {
                size_t i = (size_t)k * nr + r;
                emit(s, step0 + st, ranks[j], ranks[(j + n - 1) % n], lo[i], lo[i], hi[i] - lo[i], 1, 0);
            }
        }
}

/* Ring all-gather: position k starts holding its nr ranges; n-1 steps of pulls from the previous position. */
static void ring_ag_sets(sched *s, unsigned step0, const unsigned *ranks, unsigned n, unsigned nr, const uint64_t *lo,
                         const uint64_t *hi)
{
    for (unsigned st = 0; st + 1 < n; st++)
        for (unsigned j = 0; j < n; j++) {
            unsigned k = (unsigned)(((uint64_t)j + 2u * n - 1 - st) % n);
            for (unsigned r = 0; r < nr; r++) {
                size_t i = (size_t)k * nr + r;
                emit(s, step0 + st, ranks[j], ranks[(j + n - 1) % n], lo[i], lo[i], hi[i] - lo[i], 0, 0);
            }
        }
}

static void ring_rs(sched *s, unsigned step0, const unsigned *ranks, unsigned n, const uint64_t *lo,
                    const uint64_t *hi)
{
    ring_rs_sets(s, step0, ranks, n, 1, lo, hi);
}

static void ring_ag(sched *s, unsigned step0, const unsigned *ranks, unsigned n, const uint64_t *lo,
                    const uint64_t *hi)
{
    ring_ag_sets(s, step0, ranks, n, 1, lo, hi);
}

typedef struct {
    unsigned *ranks;
    uint64_t *lo, *hi;
} scratch;

static int scratch_get(scratch *w, unsigned n)
{
    w->ranks = malloc(sizeof *w->ranks * n);
    w->lo = malloc(sizeof *w->lo * n);
    w->hi = malloc(sizeof *w->hi * n);
    return w->ranks && w->lo && w->hi;
}

static void scratch_put(scratch *w)
{
    free(w->ranks);
    free(w->lo);
    free(w->hi);
}

/* Hierarchical all-reduce: members sorted by (node, ring position); L per node, M nodes. */
/* Hierarchical reduce-scatter and all-gather (the Neuron runtime's, docs/multichip.md): M instances of L members,
 * (q, j) the j-th member of instance q in ring order. Reduce-scatter: a ring reduce-scatter inside each instance in
 * which position j's block is the set of the blocks of members (q', j) for every q', then a ring reduce-scatter
 * over the instances among the members of local index j, so that member (q, j) ends with its own block. All-gather
 * the other way round: first across the instances among each local index (less traffic over EFA), then inside each
 * instance with the same sets. */
static int build_hier_split(const tern_fabric *f, const tern_coll_desc *d, const group *g, sched *s)
{
    unsigned n = g->n, eq, M = nodes_of_group(f, g, &eq), L = n / M;
    uint64_t count = d->count;
    unsigned *rk = malloc(sizeof *rk * n), *across = malloc(sizeof *across * M);
    uint64_t *ilo = malloc(sizeof *ilo * n), *ihi = malloc(sizeof *ihi * n);
    uint64_t *alo = malloc(sizeof *alo * M), *ahi = malloc(sizeof *ahi * M);
    int ok = rk && across && ilo && ihi && alo && ahi;
    for (unsigned k = 0; ok && k < n; k++)
        rk[k] = g->rank[g->ring[k]];
    for (unsigned j = 0; ok && j < L; j++) /* intra position j: the blocks of members (q', j) */
        for (unsigned q = 0; q < M; q++) {
            unsigned m = g->ring[q * L + j];
            ilo[(size_t)j * M + q] = blk(count, n, m);
            ihi[(size_t)j * M + q] = blk(count, n, m + 1);
        }
    int rs = d->op == TERN_COLL_REDUCE_SCATTER;
    for (unsigned q = 0; ok && rs && q < M; q++)
        ring_rs_sets(s, 0, rk + (size_t)q * L, L, M, ilo, ihi);
    for (unsigned j = 0; ok && j < L; j++) {
        for (unsigned q = 0; q < M; q++) {
            across[q] = rk[(size_t)q * L + j];
            alo[q] = ilo[(size_t)j * M + q];
            ahi[q] = ihi[(size_t)j * M + q];
        }
        if (rs)
            ring_rs(s, L - 1, across, M, alo, ahi);
        else
            ring_ag(s, 0, across, M, alo, ahi);
    }
    for (unsigned q = 0; ok && !rs && q < M; q++)
        ring_ag_sets(s, M - 1, rk + (size_t)q * L, L, M, ilo, ihi);
    free(rk), free(across), free(ilo), free(ihi), free(alo), free(ahi);
    return ok;
}

static int build_hier(const tern_fabric *f, const group *g, uint64_t count, sched *s)
{
    unsigned n = g->n, eq, M = nodes_of_group(f, g, &eq), L = n / M;
    scratch w;
    int ok = scratch_get(&w, n);
    if (ok) {
        /* the ring order already groups members by node (the fabric's ring visits nodes one after another) */
        for (unsigned k = 0; k < n; k++)
            w.ranks[k] = g->rank[g->ring[k]];
        uint64_t *llo = w.lo, *lhi = w.hi;
        for (unsigned i = 0; i < L; i++) {
            llo[i] = blk(count, L, i);
            lhi[i] = blk(count, L, i + 1);
        }
        for (unsigned node = 0; node < M; node++)
            ring_rs(s, 0, w.ranks + (size_t)node * L, L, llo, lhi);
        unsigned *across = malloc(sizeof *across * M);
        uint64_t *slo = malloc(sizeof *slo * M), *shi = malloc(sizeof *shi * M);
        ok = across && slo && shi;
        for (unsigned i = 0; ok && i < L; i++) {
            for (unsigned node = 0; node < M; node++) {
                across[node] = w.ranks[(size_t)node * L + i];
                slo[node] = llo[i] + blk(lhi[i] - llo[i], M, node);
                shi[node] = llo[i] + blk(lhi[i] - llo[i], M, node + 1);
            }
            ring_rs(s, L - 1, across, M, slo, shi);
            ring_ag(s, L - 1 + (M - 1), across, M, slo, shi);
        }
        free(across);
        free(slo);
        free(shi);
        for (unsigned node = 0; ok && node < M; node++)
            ring_ag(s, (L - 1) + 2 * (M - 1), w.ranks + (size_t)node * L, L, llo, lhi);
    }
    scratch_put(&w);
    return ok;
}

/* KangaRing (Neuron's intra-node ring variant, docs/multichip.md): the members pair up on their chips, ring order
 * two by two, and two cycles run at once over disjoint halves of every block: cycle 0 over the pairs in ring order
 * with the first member of each pair as its primary, on the first half of each block; cycle 1 over the pairs in
 * reverse order with the second member as primary, on the second half (so every rank's DMA works, in one cycle,
 * and the two cycles use opposite link directions). Pair q's "pair block" is the half of its primary's block and
 * the half of its secondary's. Reduce-scatter: step 0, the primary of pair k+1 folds its secondary's share of pair
 * block k into its own (a local 2R1W); steps 1..M-2, the next primary pulls the partial sum and adds its own and
 * its secondary's share in one 3R1W; step M-1, pair k's primary and secondary each finish their part that way
 * (all-reduce: each duplicating its write to the other, 1R1W + 1W). All-gather: M-1 steps in which the next
 * primary pulls the pair block and duplicates the write to its secondary (1R2W); an all-gather on its own first
 * swaps each pair's two parts inside the chip. kP/kS: the primary/secondary member at cycle position q. */
static unsigned kP(const group *g, unsigned M, int cyc, unsigned q)
{
    return g->ring[2 * (cyc ? M - 1 - q : q) + !!cyc];
}

static unsigned kS(const group *g, unsigned M, int cyc, unsigned q)
{
    return g->ring[2 * (cyc ? M - 1 - q : q) + !cyc];
}

/* the half of member m's block that cycle cyc moves */
static void kpart(uint64_t count, unsigned n, unsigned m, int cyc, uint64_t *lo, uint64_t *hi)
{
    uint64_t a = blk(count, n, m), b = blk(count, n, m + 1), mid = a + (b - a) / 2;
    *lo = cyc ? mid : a;
    *hi = cyc ? b : mid;
}

static void build_kanga(const tern_coll_desc *d, const group *g, sched *s)
{
    unsigned n = g->n, M = n / 2;
    int rs = d->op == TERN_COLL_ALL_REDUCE || d->op == TERN_COLL_REDUCE_SCATTER;
    int ag = d->op == TERN_COLL_ALL_REDUCE || d->op == TERN_COLL_ALL_GATHER, ar = d->op == TERN_COLL_ALL_REDUCE;
    unsigned rs_steps = rs ? (M > 1 ? M : 1) : 0;
    uint64_t lo, hi;
#define R_(m) g->rank[m]
    for (int cyc = 0; cyc < 2; cyc++) {
        for (unsigned k = 0; rs && k < M; k++) /* pair block k, ending at pair k */
            for (int part = 0; part < 2; part++) {
                unsigned owner = part ? kS(g, M, cyc, k) : kP(g, M, cyc, k);
                kpart(d->count, n, owner, cyc, &lo, &hi);
                if (hi == lo)
                    continue;
                if (M == 1) { /* one pair: each finishes its own part from the other's input */
                    unsigned me = owner, other = part ? kP(g, M, cyc, k) : kS(g, M, cyc, k);
                    emitk(s, 0, R_(me), R_(other), lo, lo, hi - lo, 1, 1, R_(other), ar, 0);
                    continue;
                }
                unsigned q = (k + 1) % M;
                emit(s, 0, R_(kP(g, M, cyc, q)), R_(kS(g, M, cyc, q)), lo, lo, hi - lo, 1, 1);
                for (unsigned t = 1; t + 1 < M; t++) {
                    unsigned to = (k + t + 1) % M, from = (k + t) % M;
                    emitk(s, t, R_(kP(g, M, cyc, to)), R_(kP(g, M, cyc, from)), lo, lo, hi - lo, 2, 0,
                          R_(kS(g, M, cyc, to)), 0, 0);
                }
                unsigned from = (k + M - 1) % M;
                unsigned me = part ? kS(g, M, cyc, k) : kP(g, M, cyc, k);
                unsigned mate = part ? kP(g, M, cyc, k) : kS(g, M, cyc, k);
                emitk(s, M - 1, R_(me), R_(kP(g, M, cyc, from)), lo, lo, hi - lo, 2, 0, R_(mate), ar, part);
            }
        for (unsigned k = 0; ag && !rs && k < M; k++) /* all-gather alone: each pair swaps its two parts */
            for (int part = 0; part < 2; part++) {
                unsigned owner = part ? kS(g, M, cyc, k) : kP(g, M, cyc, k);
                unsigned mate = part ? kP(g, M, cyc, k) : kS(g, M, cyc, k);
                kpart(d->count, n, owner, cyc, &lo, &hi);
                if (hi > lo)
                    emit(s, 0, R_(mate), R_(owner), lo, lo, hi - lo, 0, 0);
            }
        for (unsigned k = 0; ag && k < M; k++)
            for (unsigned u = 0; u + 1 < M; u++) {
                unsigned to = (k + u + 1) % M;
                for (int part = 0; part < 2; part++) {
                    unsigned owner = part ? kS(g, M, cyc, k) : kP(g, M, cyc, k);
                    unsigned from = u == 0 ? owner : kP(g, M, cyc, (k + u) % M);
                    kpart(d->count, n, owner, cyc, &lo, &hi);
                    if (hi > lo)
                        emitk(s, rs_steps + u, R_(kP(g, M, cyc, to)), R_(from), lo, lo, hi - lo, 0, 0,
                              R_(kS(g, M, cyc, to)), 1, 0);
                }
            }
    }
#undef R_
}

/* The ring's channels over group g (docs/multichip.md, "Ring channels"): orders (COLL_MAX_CHANNELS x n entries) gets
 * orders[c*n + k] = the member at position k of channel c; returns their number C (1: the fabric's single ring,
 * orders[k] = g->ring[k]). d->channels caps C (1: the single ring). 0 when out of memory. */
static unsigned ring_channels(const tern_fabric *f, const tern_coll_desc *d, const group *g, unsigned *orders)
{
    unsigned n = g->n, C = 1;
    if (d->channels != 1 && n > 2) {
        unsigned *rk = malloc(sizeof *rk * n), *o = malloc(sizeof *o * (size_t)COLL_MAX_CHANNELS * n);
        if (!rk || !o) {
            free(rk);
            free(o);
            return 0;
        }
        for (unsigned k = 0; k < n; k++)
            rk[k] = g->rank[g->ring[k]];
        C = coll_ring_channels(f, rk, n, o);
        if (d->channels && C > d->channels)
            C = d->channels;
        for (unsigned c = 0; C > 1 && c < C; c++)
            for (unsigned k = 0; k < n; k++)
                orders[(size_t)c * n + k] = g->ring[o[(size_t)c * n + k]];
        free(rk);
        free(o);
    }
    if (C == 1)
        for (unsigned k = 0; k < n; k++)
            orders[k] = g->ring[k];
    return C;
}

/* Channel c's part of block m: the block [a, b) split in C as blocks are split over members. */
static void chan_part(uint64_t count, unsigned n, unsigned m, unsigned C, unsigned c, uint64_t *lo, uint64_t *hi)
{
    uint64_t a = blk(count, n, m), b = blk(count, n, m + 1);
    *lo = a + blk(b - a, C, c);
    *hi = a + blk(b - a, C, c + 1);
}

static int build_group(const tern_fabric *f, const tern_coll_desc *d, tern_coll_algo a, const group *g,
                       const unsigned *pairs, unsigned npairs, sched *s)
{
    unsigned n = g->n;
    uint64_t count = d->count;
    int rs = d->op == TERN_COLL_ALL_REDUCE || d->op == TERN_COLL_REDUCE_SCATTER;
    int ag = d->op == TERN_COLL_ALL_REDUCE || d->op == TERN_COLL_ALL_GATHER;
    if (d->op == TERN_COLL_PERMUTE) {
        if (pairs) {
            for (unsigned i = 0; i < npairs; i++)
                emit(s, 0, pairs[2 * i + 1], pairs[2 * i], 0, 0, count, 0, 1);
        } else if (n > 1) {
            for (unsigned k = 0; k < n; k++)
                emit(s, 0, g->rank[g->ring[(k + 1) % n]], g->rank[g->ring[k]], 0, 0, count, 0, 1);
        }
        return 1;
    }
    if (d->op == TERN_COLL_ALL_TO_ALLV) {
        /* member p's block for m starts at the sum of p's row before m (its in) and lands at the sum of m's column
         * before p (m's out); the same two shapes as all-to-all (mesh: one step; ring: pairwise shifts) */
        const uint64_t *c = d->vcounts;
        uint64_t *sd = malloc(sizeof *sd * (size_t)n * n), *rd = malloc(sizeof *rd * (size_t)n * n);
        if (!sd || !rd) {
            free(sd);
            free(rd);
            return 0;
        }
        /* sd[p*n + m]: p's send offset for m; rd[p*n + m]: where m puts p's block (back to back unless given) */
        for (unsigned i = 0; i < n; i++)
            for (unsigned j = 0; j < n; j++) {
                sd[(size_t)i * n + j] = d->sdispls ? d->sdispls[(size_t)i * n + j]
                                        : j       ? sd[(size_t)i * n + j - 1] + c[(size_t)i * n + j - 1]
                                                  : 0;
                rd[(size_t)i * n + j] = d->rdispls ? d->rdispls[(size_t)j * n + i]
                                        : i       ? rd[(size_t)(i - 1) * n + j] + c[(size_t)(i - 1) * n + j]
                                                  : 0;
            }
        for (unsigned t = 0; t < n; t++)
            for (unsigned m = 0; m < n; m++) {
                unsigned p = a == TERN_ALGO_MESH ? (m + t) % n : (m + n - t) % n;
                size_t k = (size_t)p * n + m;
                if (c[k])
                    emit(s, a == TERN_ALGO_MESH || t == 0 ? 0 : t - 1, g->rank[m], g->rank[p], sd[k], rd[k], c[k], 0,
                         1);
            }
        free(sd);
        free(rd);
        return 1;
    }
    if (d->op == TERN_COLL_ALL_TO_ALL) {
        /* equal blocks of count/n elements (nccom-test's per-peer count); a remainder stays unmoved */
        uint64_t b = count / n;
        for (unsigned m = 0; m < n; m++)
            emit(s, 0, g->rank[m], g->rank[m], b * m, b * m, b, 0, 1);
        for (unsigned t = 1; t < n; t++)
            for (unsigned m = 0; m < n; m++) {
                unsigned p = a == TERN_ALGO_MESH ? (m + t) % n : (m + n - t) % n;
                emit(s, a == TERN_ALGO_MESH ? 0 : t - 1, g->rank[m], g->rank[p], b * m, b * p, b, 0, 1);
            }
        return 1;
    }
    if (n == 1)
        return 1;
    if (a == TERN_ALGO_HIER)
        return d->op == TERN_COLL_ALL_REDUCE ? build_hier(f, g, count, s) : build_hier_split(f, d, g, s);
    if (a == TERN_ALGO_KANGARING) {
        build_kanga(d, g, s);
        return 1;
    }
    if (a == TERN_ALGO_RING) {
        /* one ring per channel, each on its own links over its own part of every block, in the same steps: a
         * rank's pulls of a step are its channels' in channel order (they share its DMA and its chip's HBM) */
        scratch w;
        unsigned *ord = malloc(sizeof *ord * (size_t)COLL_MAX_CHANNELS * n);
        int ok = scratch_get(&w, n) && ord;
        unsigned C = ok ? ring_channels(f, d, g, ord) : 0;
        ok = ok && C > 0;
        for (unsigned c = 0; ok && c < C; c++) {
            for (unsigned k = 0; k < n; k++) {
                unsigned m = ord[(size_t)c * n + k];
                w.ranks[k] = g->rank[m];
                chan_part(count, n, m, C, c, &w.lo[k], &w.hi[k]);
            }
            if (rs)
                ring_rs(s, 0, w.ranks, n, w.lo, w.hi);
            if (ag)
                ring_ag(s, rs ? n - 1 : 0, w.ranks, n, w.lo, w.hi);
        }
        if (C > s->channels)
            s->channels = C;
        free(ord);
        scratch_put(&w);
        return ok;
    }
    if (a == TERN_ALGO_MESH) {
        for (unsigned m = 0; rs && m < n; m++)
            for (unsigned t = 1; t < n; t++)
                emit(s, 0, g->rank[m], g->rank[(m + t) % n], blk(count, n, m), blk(count, n, m),
                     blk(count, n, m + 1) - blk(count, n, m), 1, 0);
        for (unsigned m = 0; ag && m < n; m++)
            for (unsigned t = 1; t < n; t++) {
                unsigned p = (m + t) % n;
                emit(s, rs ? 1 : 0, g->rank[m], g->rank[p], blk(count, n, p), blk(count, n, p),
                     blk(count, n, p + 1) - blk(count, n, p), 0, 0);
            }
        return 1;
    }
    /* rdh: recursive halving (distance n/2 first), then recursive doubling (distance 1 first) */
    unsigned k = 0, step = 0;
    while ((1u << k) < n)
        k++;
    for (unsigned j = 0; rs && j < k; j++, step++) {
        unsigned dist = n >> (j + 1);
        for (unsigned m = 0; m < n; m++) {
            unsigned c0 = (m / dist) * dist;
            uint64_t lo = blk(count, n, c0), hi = blk(count, n, c0 + dist);
            emit(s, step, g->rank[m], g->rank[m ^ dist], lo, lo, hi - lo, 1, 0);
        }
    }
    for (unsigned dist = 1; ag && dist < n; dist <<= 1, step++)
        for (unsigned m = 0; m < n; m++) {
            unsigned c0 = ((m ^ dist) / dist) * dist;
            uint64_t lo = blk(count, n, c0), hi = blk(count, n, c0 + dist);
            emit(s, step, g->rank[m], g->rank[m ^ dist], lo, lo, hi - lo, 0, 0);
        }
    return 1;
}

static tern_status check_pairs(const tern_fabric *f, const tern_coll_desc *d, tern_error *err)
{
    unsigned R = tern_fabric_ranks(f);
    unsigned char *used = calloc(R, 2);
    if (!used)
        return tern_error_set(err, TERN_ERR_NOMEM, "permute: out of memory");
    for (unsigned i = 0; i < d->npairs; i++) {
        unsigned a = d->pairs[2 * i], b = d->pairs[2 * i + 1];
        const char *bad = NULL;
        if (a >= R || b >= R)
            bad = "rank out of range";
        else if (used[2 * a])
            bad = "source already used by another pair";
        else if (used[2 * b + 1])
            bad = "target already used by another pair";
        if (bad) {
            free(used);
            return tern_error_set(err, TERN_ERR_INVALID, "permute pair %u (%u -> %u): %s (fabric of %u ranks)", i, a,
                                  b, bad, R);
        }
        used[2 * a] = used[2 * b + 1] = 1;
    }
    free(used);
    return TERN_OK;
}

static tern_status build(const tern_fabric *f, const tern_coll_desc *d, groups *gs, tern_coll_algo *algo, sched *s,
                         tern_error *err)
{
    memset(s, 0, sizeof *s);
    tern_status st = groups_make(f, d, gs, err);
    if (st)
        return st;
    if ((st = resolve(f, d, gs, algo, err)) ||
        (d->op == TERN_COLL_PERMUTE && d->pairs && (st = check_pairs(f, d, err)))) {
        groups_free(gs);
        return st;
    }
    for (unsigned i = 0; i < gs->ngroups; i++) {
        if (d->op == TERN_COLL_PERMUTE && d->pairs && i > 0)
            break;
        if (!build_group(f, d, *algo, &gs->g[i], d->op == TERN_COLL_PERMUTE ? d->pairs : NULL, d->npairs, s) ||
            s->oom) {
            free(s->p);
            groups_free(gs);
            return tern_error_set(err, TERN_ERR_NOMEM, "%s: out of memory building the schedule",
                                  tern_coll_op_name(d->op));
        }
    }
    return TERN_OK;
}

tern_status tern_collective_resolve(const tern_fabric *f, const tern_coll_desc *d, tern_coll_algo *algo,
                                    tern_error *err)
{
    groups gs;
    tern_status st = groups_make(f, d, &gs, err);
    if (st)
        return st;
    st = resolve(f, d, &gs, algo, err);
    if (!st && d->op == TERN_COLL_PERMUTE && d->pairs)
        st = check_pairs(f, d, err);
    groups_free(&gs);
    return st;
}

/* ---- element operations ---- */

static uint32_t get_bits(const void *p, size_t es, uint64_t i)
{
    const unsigned char *b = (const unsigned char *)p + i * es;
    uint32_t v = 0;
    memcpy(&v, b, es); /* little-endian host */
    return v;
}

static void set_bits(void *p, size_t es, uint64_t i, uint32_t v)
{
    memcpy((unsigned char *)p + i * es, &v, es);
}

static float fmax_sym(float a, float b)
{
    if (a != a || b != b)
        return a + b;
    if (a == b)
        return signbit(a) ? b : a;
    return a > b ? a : b;
}

static float fmin_sym(float a, float b)
{
    if (a != a || b != b)
        return a + b;
    if (a == b)
        return signbit(a) ? a : b;
    return a < b ? a : b;
}

/* op(local, incoming): computed in fp32 (int32 in 64-bit, wrapping), rounded once to the dtype (RNE). */
static uint32_t red1(tern_dtype t, tern_reduce_op op, uint32_t a, uint32_t b)
{
    if (t == TERN_DTYPE_INT32) {
        int32_t x = (int32_t)a, y = (int32_t)b, r;
        if (op == TERN_REDUCE_SUM)
            r = (int32_t)(uint32_t)((int64_t)x + y);
        else if (op == TERN_REDUCE_MAX)
            r = x > y ? x : y;
        else
            r = x < y ? x : y;
        return (uint32_t)r;
    }
    float x = tern_num_decode(t, a), y = tern_num_decode(t, b), r;
    r = op == TERN_REDUCE_SUM ? x + y : op == TERN_REDUCE_MAX ? fmax_sym(x, y) : fmin_sym(x, y);
    tern_convert_opts o = TERN_CONVERT_OPTS_DEFAULT;
    return tern_num_encode(t, r, &o, 0);
}

void coll_reduce_into(tern_dtype t, tern_reduce_op op, void *restrict dst, const void *restrict src, uint64_t n)
{
    if (t == TERN_DTYPE_FP32 && op == TERN_REDUCE_SUM) {
        float *restrict a = dst;
        const float *restrict b = src;
        for (uint64_t i = 0; i < n; i++)
            a[i] = a[i] + b[i];
        return;
    }
    size_t es = tern_dtype_size(t);
    for (uint64_t i = 0; i < n; i++)
        set_bits(dst, es, i, red1(t, op, get_bits(dst, es, i), get_bits(src, es, i)));
}

/* dst = op(op(a, b), c) element by element (dst may be a or c: each element is read before it is written) */
static void reduce3(tern_dtype t, tern_reduce_op op, void *dst, const void *a, const void *b, const void *c,
                    uint64_t n)
{
    size_t es = tern_dtype_size(t);
    if (t == TERN_DTYPE_FP32 && op == TERN_REDUCE_SUM) {
        float *o = dst;
        const float *x = a, *y = b, *z = c;
        for (uint64_t i = 0; i < n; i++)
            o[i] = (x[i] + y[i]) + z[i];
        return;
    }
    for (uint64_t i = 0; i < n; i++)
        set_bits(dst, es, i, red1(t, op, red1(t, op, get_bits(a, es, i), get_bits(b, es, i)), get_bits(c, es, i)));
}

uint64_t coll_pull_apply(const tern_coll_desc *d, const coll_pull *p, const void *src, const void *const *in,
                         void *const *out)
{
    size_t es = tern_dtype_size(d->dtype);
    uint64_t bytes = p->n * es, hb;
    unsigned char *dst = (unsigned char *)out[p->dst] + p->dst_off * es;
    unsigned partner = (unsigned)((int64_t)p->dst + p->pdelta);
    if (p->reduce == 2) { /* KangaRing: the pair's primary, the incoming partial sum, the pair's secondary */
        unsigned a = p->secondary ? partner : p->dst, c = p->secondary ? p->dst : partner;
        reduce3(d->dtype, d->reduce, dst, (const unsigned char *)in[a] + p->dst_off * es, src,
                (const unsigned char *)in[c] + p->dst_off * es, p->n);
        hb = 4 * bytes;
    } else if (p->reduce) {
        coll_reduce_into(d->dtype, d->reduce, dst, src, p->n);
        hb = 3 * bytes;
    } else {
        memmove(dst, src, bytes);
        hb = 2 * bytes;
    }
    if (p->dup) { /* the duplicated write to the partner on the same chip */
        memcpy((unsigned char *)out[partner] + p->dst_off * es, dst, bytes);
        hb += 2 * bytes;
    }
    return hb;
}

/* ---- the engine ---- */

typedef coll_event event;

static int ev_less(const event *a, const event *b)
{
    if (a->t != b->t)
        return a->t < b->t;
    if (a->idle != b->idle)
        return a->idle > b->idle;
    if (a->rank != b->rank)
        return a->rank < b->rank;
    return a->step < b->step;
}

void coll_heap_push(event *h, size_t *n, event e)
{
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!ev_less(&e, &h[p]))
            break;
        h[i] = h[p];
        i = p;
    }
    h[i] = e;
}

event coll_heap_pop(event *h, size_t *n)
{
    event top = h[0], last = h[--(*n)];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n)
            break;
        if (c + 1 < *n && ev_less(&h[c + 1], &h[c]))
            c++;
        if (!ev_less(&h[c], &last))
            break;
        h[i] = h[c];
        i = c;
    }
    if (*n)
        h[i] = last;
    return top;
}

static tern_status execute(tern_fabric *f, const tern_coll_desc *d, sched *s, const void *const *in,
                           void *const *out, tern_coll_result *res, tern_error *err)
{
    unsigned R = tern_fabric_ranks(f), S = s->nsteps;
    size_t keys = (size_t)S * R;
    size_t es = tern_dtype_size(d->dtype);
    size_t *begin = calloc(keys + 1, sizeof *begin);
    pull *sorted = malloc((s->np ? s->np : 1) * sizeof *sorted);
    uint32_t *deps = calloc(keys ? keys : 1, sizeof *deps);
    uint64_t *ready = calloc(keys ? keys : 1, sizeof *ready);
    size_t *rbegin = calloc(keys + 1, sizeof *rbegin);
    size_t *stamp = malloc(sizeof *stamp * (R ? R : 1));
    event *heap = malloc(sizeof *heap * (keys ? keys : 1));
    uint32_t *readers = NULL;
    tern_status st = TERN_OK;
    if (!begin || !sorted || !deps || !ready || !rbegin || !stamp || !heap) {
        st = tern_error_set(err, TERN_ERR_NOMEM, "%s: out of memory for a schedule of %zu pulls",
                            tern_coll_op_name(d->op), s->np);
        goto done;
    }
    /* stable counting sort by (step, dst) keeps each rank's emission order inside a step */
    for (size_t i = 0; i < s->np; i++)
        begin[(size_t)s->p[i].step * R + s->p[i].dst + 1]++;
    for (size_t k = 0; k < keys; k++)
        begin[k + 1] += begin[k];
    {
        size_t *fill = rbegin; /* borrowed as a cursor, rebuilt below */
        memcpy(fill, begin, (keys + 1) * sizeof *fill);
        for (size_t i = 0; i < s->np; i++)
            sorted[fill[(size_t)s->p[i].step * R + s->p[i].dst]++] = s->p[i];
        memset(rbegin, 0, (keys + 1) * sizeof *rbegin);
    }
    /* dependencies: (s, r) waits for (s-1, r) and (s-1, p) for each distinct peer p it pulls from */
    for (unsigned r = 0; r < R; r++)
        stamp[r] = SIZE_MAX;
    for (int pass = 0; pass < 2; pass++) {
        for (unsigned r = 0; r < R; r++)
            stamp[r] = SIZE_MAX;
        for (unsigned st_i = 1; st_i < S; st_i++)
            for (unsigned r = 0; r < R; r++) {
                size_t key = (size_t)st_i * R + r;
                for (size_t i = begin[key]; i < begin[key + 1]; i++) {
                    unsigned p = sorted[i].src;
                    if (p == r || stamp[p] == key)
                        continue;
                    stamp[p] = key;
                    size_t pk = (size_t)(st_i - 1) * R + p;
                    if (pass == 0) {
                        rbegin[pk + 1]++;
                        deps[key]++;
                    } else {
                        readers[rbegin[pk]++] = r;
                    }
                }
            }
        if (pass == 0) {
            for (size_t k = 0; k < keys; k++)
                rbegin[k + 1] += rbegin[k];
            readers = malloc(sizeof *readers * (rbegin[keys] ? rbegin[keys] : 1));
            if (!readers) {
                st = tern_error_set(err, TERN_ERR_NOMEM, "%s: out of memory", tern_coll_op_name(d->op));
                goto done;
            }
        } else {
            for (size_t k = keys; k > 0; k--)
                rbegin[k] = rbegin[k - 1];
            rbegin[0] = 0;
        }
    }
    for (unsigned st_i = 1; st_i < S; st_i++)
        for (unsigned r = 0; r < R; r++)
            deps[(size_t)st_i * R + r]++;

    if (tern_fabric_transport(f)) {
        /* distributed (or the one-process transport): the conservative engine of pdes.c */
        coll_plan plan = {R, S, keys, s->np, sorted, begin, deps, rbegin, readers};
        uint64_t span = 0;
        if ((st = coll_pdes_time(f, &plan, d, &span, err)))
            goto done;
        res->span_ps = span;
        uint64_t dev = tern_fabric_setup_ps(f) + span, launch = tern_fabric_launch_ps(f);
        res->time_ps = dev > launch ? dev : launch;
        res->steps = S;
        res->transfers = s->np;
        res->host_bytes = 0;
        if (out)
            st = coll_pdes_move(f, &plan, d, in, out, &res->host_bytes, err);
        goto done;
    }
    /* timing: time-ordered service of ready (rank, step) */
    tern_fabric_reset(f);
    size_t nh = 0;
    uint64_t span = 0;
    for (unsigned r = 0; S && r < R; r++)
        coll_heap_push(heap, &nh, (event){0, r, 0, begin[r] == begin[r + 1]});
    while (nh) {
        event e = coll_heap_pop(heap, &nh);
        size_t key = (size_t)e.step * R + e.rank;
        uint64_t end = e.t;
        for (size_t i = begin[key]; i < begin[key + 1]; i++) {
            const pull *p = &sorted[i];
            tern_fabric_xfer x = {p->src, p->dst, p->n * es, p->reduce, e.t, i, p->dup};
            uint64_t t = tern_fabric_transfer(f, &x);
            if (t > end)
                end = t;
        }
        if (end > span)
            span = end;
        if ((unsigned)e.step + 1 < S) {
            size_t nk = key + R;
            if (ready[nk] < end)
                ready[nk] = end;
            if (--deps[nk] == 0)
                coll_heap_push(heap, &nh, (event){ready[nk], e.rank, e.step + 1, begin[nk] == begin[nk + 1]});
            for (size_t i = rbegin[key]; i < rbegin[key + 1]; i++) {
                size_t rk = (size_t)(e.step + 1) * R + readers[i];
                if (ready[rk] < end)
                    ready[rk] = end;
                if (--deps[rk] == 0)
                    coll_heap_push(heap, &nh,
                                   (event){ready[rk], readers[i], e.step + 1, begin[rk] == begin[rk + 1]});
            }
        }
    }
    res->span_ps = span;
    uint64_t dev = tern_fabric_setup_ps(f) + span, launch = tern_fabric_launch_ps(f);
    res->time_ps = dev > launch ? dev : launch;
    res->steps = S;
    res->transfers = s->np;
    res->host_bytes = 0;

    /* functional: steps in order */
    if (out) {
        uint64_t hb = 0;
        if (d->op == TERN_COLL_ALL_REDUCE || d->op == TERN_COLL_ALL_GATHER || d->op == TERN_COLL_REDUCE_SCATTER)
            for (unsigned r = 0; r < R; r++)
                if (out[r] != in[r]) {
                    memcpy(out[r], in[r], d->count * es);
                    hb += 2 * d->count * es;
                }
        for (size_t i = 0; i < s->np; i++) {
            const pull *p = &sorted[i];
            const unsigned char *src = (const unsigned char *)(p->src_in ? in[p->src] : out[p->src]) + p->src_off * es;
            hb += coll_pull_apply(d, p, src, in, out);
        }
        res->host_bytes = hb;
    }
done:
    free(begin);
    free(sorted);
    free(deps);
    free(ready);
    free(rbegin);
    free(stamp);
    free(heap);
    free(readers);
    return st;
}

static tern_status run(tern_fabric *f, const tern_coll_desc *d, const void *const *in, void *const *out,
                       tern_coll_result *res, tern_error *err)
{
    groups gs;
    sched s;
    tern_coll_algo a;
    memset(res, 0, sizeof *res);
    tern_status st = build(f, d, &gs, &a, &s, err);
    if (st)
        return st;
    res->algo = a;
    res->channels = s.channels ? s.channels : 1;
    st = execute(f, d, &s, in, out, res, err);
    free(s.p);
    groups_free(&gs);
    return st;
}

tern_status coll_rank_hbm_bytes(const tern_fabric *f, const tern_coll_desc *d, uint64_t *bytes, tern_error *err)
{
    groups gs;
    sched s;
    tern_coll_algo a;
    unsigned R = tern_fabric_ranks(f);
    memset(bytes, 0, sizeof *bytes * R);
    tern_status st = build(f, d, &gs, &a, &s, err);
    if (st)
        return st;
    size_t es = tern_dtype_size(d->dtype);
    /* as the fabric reserves HBM (tern_fabric_transfer): the source reads b, the destination writes b (a reducing
     * pull also reads its local block: 2b; KangaRing's three-way one two local blocks: 3b; a duplicated write b
     * more) */
    for (size_t i = 0; i < s.np; i++) {
        const pull *p = &s.p[i];
        bytes[p->src] += p->n * es;
        bytes[p->dst] += p->n * es * (1u + p->reduce + p->dup);
    }
    free(s.p);
    groups_free(&gs);
    return TERN_OK;
}

tern_status tern_collective_time(tern_fabric *f, const tern_coll_desc *d, tern_coll_result *res, tern_error *err)
{
    return run(f, d, NULL, NULL, res, err);
}

tern_status tern_collective_run(tern_fabric *f, const tern_coll_desc *d, const void *const *in, void *const *out,
                                tern_coll_result *res, tern_error *err)
{
    if (!in || !out)
        return tern_error_set(err, TERN_ERR_INVALID, "%s: functional run needs in and out buffers for every rank",
                              tern_coll_op_name(d->op));
    return run(f, d, in, out, res, err);
}

/* ---- the host reference: each algorithm's reduction order, element by element ---- */

typedef struct {
    const tern_coll_desc *d;
    const void *const *in;
    size_t es;
} refctx;

static uint32_t x_of(const refctx *c, unsigned rank, uint64_t e) { return get_bits(c->in[rank], c->es, e); }

/* ring over ranks[0..n) (ring order), block ending at position k: x[k+1], then op(x[k+t], acc), t = 2..n */
static uint32_t ring_value(const refctx *c, const uint32_t *x, unsigned n, unsigned k)
{
    uint32_t acc = x[(k + 1) % n];
    for (unsigned t = 2; t <= n; t++)
        acc = red1(c->d->dtype, c->d->reduce, x[(k + t) % n], acc);
    return acc;
}

/* KangaRing, element e of member m's block: the cycle that moves e's half, pair k holding m at cycle position k;
 * acc = op(x[P(k+1)], x[S(k+1)]), then acc = op(op(x[P(k+t)], acc), x[S(k+t)]) for t = 2..M. One pair (M = 1):
 * op(x[m], x[its partner]), each member finishing its own part. */
static uint32_t kanga_value(const refctx *c, const group *g, const unsigned *pos, uint64_t e, unsigned m)
{
    unsigned n = g->n, M = n / 2;
    uint64_t a = blk(c->d->count, n, m), b = blk(c->d->count, n, m + 1);
    int cyc = e >= a + (b - a) / 2;
    unsigned j = pos[m] / 2, k = cyc ? M - 1 - j : j;
    tern_dtype t = c->d->dtype;
    tern_reduce_op op = c->d->reduce;
    if (M == 1) {
        unsigned mate = kP(g, M, cyc, 0) == m ? kS(g, M, cyc, 0) : kP(g, M, cyc, 0);
        return red1(t, op, x_of(c, g->rank[m], e), x_of(c, g->rank[mate], e));
    }
    unsigned q = (k + 1) % M;
    uint32_t acc = red1(t, op, x_of(c, g->rank[kP(g, M, cyc, q)], e), x_of(c, g->rank[kS(g, M, cyc, q)], e));
    for (unsigned s = 2; s <= M; s++) {
        q = (k + s) % M;
        uint32_t xp = x_of(c, g->rank[kP(g, M, cyc, q)], e), xs = x_of(c, g->rank[kS(g, M, cyc, q)], e);
        acc = red1(t, op, red1(t, op, xp, acc), xs);
    }
    return acc;
}

static uint32_t rdh_value(const refctx *c, const group *g, uint64_t e, unsigned level, unsigned m)
{
    /* P_level(m) over the subcube of distances n/2 .. n>>(level+1) */
    if (level == 0)
        return x_of(c, g->rank[m], e);
    unsigned dist = g->n >> level;
    return red1(c->d->dtype, c->d->reduce, rdh_value(c, g, e, level - 1, m), rdh_value(c, g, e, level - 1, m ^ dist));
}

tern_status tern_collective_reference(const tern_fabric *f, const tern_coll_desc *d, tern_coll_algo algo,
                                      const void *const *in, unsigned rank, void *expect, tern_error *err)
{
    groups gs;
    tern_status st = groups_make(f, d, &gs, err);
    if (st)
        return st;
    refctx c = {d, in, tern_dtype_size(d->dtype)};
    const group *g = NULL;
    unsigned me = 0;
    for (unsigned i = 0; i < gs.ngroups && !g; i++)
        for (unsigned j = 0; j < gs.g[i].n; j++)
            if (gs.g[i].rank[j] == rank) {
                g = &gs.g[i];
                me = j;
            }
    TERN_ASSERT(g);
    unsigned n = g->n;
    uint64_t count = d->count;
    uint32_t *x = malloc(sizeof *x * n), *v = malloc(sizeof *v * n);
    unsigned *pos = malloc(sizeof *pos * n), *ord = NULL, *cpos = NULL;
    if (!x || !v || !pos) {
        st = tern_error_set(err, TERN_ERR_NOMEM, "reference: out of memory");
        goto out;
    }
    for (unsigned k = 0; k < n; k++)
        pos[g->ring[k]] = k;
    if (d->op == TERN_COLL_PERMUTE) {
        if (d->pairs) {
            for (unsigned i = 0; i < d->npairs; i++)
                if (d->pairs[2 * i + 1] == rank)
                    memcpy(expect, in[d->pairs[2 * i]], count * c.es);
        } else if (n > 1) {
            memcpy(expect, in[g->rank[g->ring[(pos[me] + n - 1) % n]]], count * c.es);
        }
        goto out;
    }
    if (d->op == TERN_COLL_ALL_TO_ALLV) {
        if ((st = check_vblocks(d, n, err)))
            goto out;
        /* block p -> me: from p's send offset for me to me's receive offset for p (back to back when not given) */
        uint64_t at = 0;
        for (unsigned p = 0; p < n; p++) {
            uint64_t from = 0, k = d->vcounts[(size_t)p * n + me];
            if (d->sdispls)
                from = d->sdispls[(size_t)p * n + me];
            else
                for (unsigned j = 0; j < me; j++)
                    from += d->vcounts[(size_t)p * n + j];
            uint64_t to = d->rdispls ? d->rdispls[(size_t)me * n + p] : at;
            memcpy((unsigned char *)expect + to * c.es, (const unsigned char *)in[g->rank[p]] + from * c.es,
                   k * c.es);
            at += k;
        }
        goto out;
    }
    if (d->op == TERN_COLL_ALL_TO_ALL) {
        uint64_t b = count / n;
        for (unsigned p = 0; p < n; p++)
            memcpy((unsigned char *)expect + b * p * c.es, (const unsigned char *)in[g->rank[p]] + b * me * c.es,
                   b * c.es);
        goto out;
    }
    if (d->op == TERN_COLL_ALL_GATHER) {
        for (unsigned p = 0; p < n; p++)
            memcpy((unsigned char *)expect + blk(count, n, p) * c.es,
                   (const unsigned char *)in[g->rank[p]] + blk(count, n, p) * c.es,
                   (blk(count, n, p + 1) - blk(count, n, p)) * c.es);
        goto out;
    }
    unsigned first = d->op == TERN_COLL_REDUCE_SCATTER ? me : 0, last = d->op == TERN_COLL_REDUCE_SCATTER ? me + 1 : n;
    if (n == 1) {
        memcpy(expect, in[rank], count * c.es);
        goto out;
    }
    if (algo == TERN_ALGO_HIER && d->op == TERN_COLL_REDUCE_SCATTER) {
        /* member (q, j) = me: inside every instance q' the ring's block ending at position j, then the ring over
         * the instances' partial sums ending at position q */
        unsigned eq, M = nodes_of_group(f, g, &eq), L = n / M, q = pos[me] / L, j = pos[me] % L;
        for (uint64_t e = blk(count, n, me); e < blk(count, n, me + 1); e++) {
            for (unsigned node = 0; node < M; node++) {
                for (unsigned k = 0; k < L; k++)
                    x[k] = x_of(&c, g->rank[g->ring[node * L + k]], e);
                v[node] = L > 1 ? ring_value(&c, x, L, j) : x[0];
            }
            set_bits(expect, c.es, e, M > 1 ? ring_value(&c, v, M, q) : v[0]);
        }
        goto out;
    }
    if (algo == TERN_ALGO_HIER) {
        unsigned eq, M = nodes_of_group(f, g, &eq), L = n / M;
        for (unsigned i = 0; i < L; i++) {
            uint64_t llo = blk(count, L, i), lhi = blk(count, L, i + 1);
            for (uint64_t e = llo; e < lhi; e++) {
                unsigned q = 0;
                while (llo + blk(lhi - llo, M, q + 1) <= e)
                    q++;
                for (unsigned node = 0; node < M; node++) {
                    for (unsigned k = 0; k < L; k++)
                        x[k] = x_of(&c, g->rank[g->ring[node * L + k]], e);
                    v[node] = L > 1 ? ring_value(&c, x, L, i) : x[0];
                }
                set_bits(expect, c.es, e, M > 1 ? ring_value(&c, v, M, q) : v[0]);
            }
        }
        goto out;
    }
    unsigned C = 1;
    if (algo == TERN_ALGO_RING) {
        /* each channel is a ring of its own order over its part of every block */
        if (!(ord = malloc(sizeof *ord * (size_t)COLL_MAX_CHANNELS * n * 2)) || !(C = ring_channels(f, d, g, ord))) {
            st = tern_error_set(err, TERN_ERR_NOMEM, "reference: out of memory");
            goto out;
        }
        cpos = ord + (size_t)COLL_MAX_CHANNELS * n;
        for (unsigned ch = 0; ch < C; ch++)
            for (unsigned k = 0; k < n; k++)
                cpos[(size_t)ch * n + ord[(size_t)ch * n + k]] = k;
    }
    for (unsigned m = first; m < last; m++) {
        for (uint64_t e = blk(count, n, m); e < blk(count, n, m + 1); e++) {
            uint32_t r;
            if (algo == TERN_ALGO_RING) {
                unsigned ch = 0;
                uint64_t plo, phi;
                for (chan_part(count, n, m, C, 0, &plo, &phi); e >= phi; chan_part(count, n, m, C, ch, &plo, &phi))
                    ch++;
                for (unsigned k = 0; k < n; k++)
                    x[k] = x_of(&c, g->rank[ord[(size_t)ch * n + k]], e);
                r = ring_value(&c, x, n, cpos[(size_t)ch * n + m]);
            } else if (algo == TERN_ALGO_KANGARING) {
                r = kanga_value(&c, g, pos, e, m);
            } else if (algo == TERN_ALGO_MESH) {
                r = x_of(&c, g->rank[m], e);
                for (unsigned t = 1; t < n; t++)
                    r = red1(d->dtype, d->reduce, r, x_of(&c, g->rank[(m + t) % n], e));
            } else {
                unsigned k = 0;
                while ((1u << k) < n)
                    k++;
                r = rdh_value(&c, g, e, k, m);
            }
            set_bits(expect, c.es, e, r);
        }
    }
out:
    free(x);
    free(v);
    free(pos);
    free(ord);
    groups_free(&gs);
    return st;
}

void tern_collective_defined(const tern_fabric *f, const tern_coll_desc *d, unsigned rank, uint64_t *lo, uint64_t *hi)
{
    *lo = 0;
    *hi = d->count;
    if (d->op == TERN_COLL_REDUCE_SCATTER || d->op == TERN_COLL_PERMUTE || d->op == TERN_COLL_ALL_TO_ALL ||
        d->op == TERN_COLL_ALL_TO_ALLV) {
        groups gs;
        tern_error e;
        if (groups_make(f, d, &gs, &e) != TERN_OK) {
            *hi = 0;
            return;
        }
        for (unsigned i = 0; i < gs.ngroups; i++)
            for (unsigned j = 0; j < gs.g[i].n; j++)
                if (gs.g[i].rank[j] == rank) {
                    unsigned n = gs.g[i].n;
                    if (d->op == TERN_COLL_ALL_TO_ALLV) {
                        *hi = 0;
                        for (unsigned p = 0; d->vcounts && !d->rdispls && p < n; p++)
                            *hi += d->vcounts[(size_t)p * n + j];
                        /* receive displacements: the hull of the non-empty blocks */
                        for (unsigned p = 0, any = 0; d->vcounts && d->rdispls && p < n; p++) {
                            uint64_t k = d->vcounts[(size_t)p * n + j], o = d->rdispls[(size_t)j * n + p];
                            if (!k)
                                continue;
                            if (!any || o < *lo)
                                *lo = o;
                            if (!any || o + k > *hi)
                                *hi = o + k;
                            any = 1;
                        }
                    } else if (d->op == TERN_COLL_ALL_TO_ALL) {
                        *hi = d->count / n * n;
                    } else if (d->op == TERN_COLL_REDUCE_SCATTER) {
                        *lo = blk(d->count, n, j);
                        *hi = blk(d->count, n, j + 1);
                    } else if (d->pairs) {
                        *hi = 0;
                        for (unsigned p = 0; p < d->npairs; p++)
                            if (d->pairs[2 * p + 1] == rank)
                                *hi = d->count;
                    } else if (n == 1) {
                        *hi = 0;
                    }
                }
        groups_free(&gs);
    }
}
