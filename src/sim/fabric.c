/* The fabric (include/tern/fabric.h, docs/multichip.md): ranks placed on cores, chips and instances; routes over
 * the instance's NeuronLink torus (or switch), the UltraServer's inter-instance ring and the cluster's EFA; and
 * transfers timed against resources that each keep a busy-until time. The model is deliberately simple and
 * deterministic: a transfer occupies each resource of its route for bytes / bandwidth, each resource serves
 * transfers in the order they are reserved (the caller reserves in time order, ties by rank and sequence), the
 * transfer ends when its slowest resource is done, and the fixed DMA cost plus the per-hop latencies come on
 * top. Every figure comes from the machine file. */
#include "tern/fabric.h"
#include "tern/transport.h"
#include "sim/fabric_internal.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { DIRS_MAX = 6, RES_PER_CHIP = 1 + DIRS_MAX + 2 }; /* HBM, up to 6 link directions, EFA tx and rx */

struct tern_fabric {
    char name[96];
    char base[64]; /* the machine file's name (an instance or system), without the cluster count */
    unsigned units, nodes_per_unit, chips_per_node, chips_per_unit;
    unsigned used_nodes, ranks_per_chip, ranks_per_node, lnc, nranks;
    tern_topology_kind topo;
    unsigned ndims, dims[3];
    int z_is_node; /* a system whose first torus dimension is its instances (the UltraServer's ring) */
    double dma_bw_rank, hbm_bw, link_bw[3], efa_bw_chip, switch_bw;
    uint64_t dma_fixed_ps, link_lat_ps, efa_lat_ps, launch_ps, setup_ps;
    unsigned total_chips;
    size_t nres;
    uint64_t *busy;
    const tern_transport *tr; /* NULL: one process owns everything */
    unsigned *chip_owner;     /* total_chips entries, with tr */
};

static uint64_t ps_of(double seconds)
{
    return seconds > 0 ? (uint64_t)llround(seconds * 1e12) : 0;
}

static uint64_t occupancy(uint64_t bytes, double bw)
{
    if (bw <= 0 || bytes == 0)
        return 0;
    return (uint64_t)ceil((double)bytes * 1e12 / bw);
}

tern_status tern_cluster_spec_parse(const char *spec, unsigned *count, char *name, size_t cap, tern_error *err)
{
    if (!spec || !*spec)
        return tern_error_set(err, TERN_ERR_INVALID, "machine spec '': expected INSTANCE or COUNTxINSTANCE");
    if (!isdigit((unsigned char)spec[0])) {
        if (strlen(spec) >= cap)
            return tern_error_set(err, TERN_ERR_INVALID, "machine spec '%s': name longer than %zu characters",
                                  spec, cap - 1);
        snprintf(name, cap, "%s", spec);
        *count = 1;
        return TERN_OK;
    }
    const char *p = spec;
    unsigned long long n = 0;
    while (isdigit((unsigned char)*p)) {
        n = n * 10 + (unsigned)(*p - '0');
        if (n > 100000)
            return tern_error_set(err, TERN_ERR_INVALID,
                                  "cluster spec '%s': instance count above the limit of 100000", spec);
        p++;
    }
    if (*p != 'x' || !p[1])
        return tern_error_set(err, TERN_ERR_INVALID,
                              "cluster spec '%s': expected COUNTxINSTANCE (e.g. 2xtrn1.32xlarge), got '%s'", spec,
                              spec);
    if (n == 0)
        return tern_error_set(err, TERN_ERR_INVALID, "cluster spec '%s': instance count must be at least 1, got 0",
                              spec);
    if (strlen(p + 1) >= cap)
        return tern_error_set(err, TERN_ERR_INVALID, "cluster spec '%s': name too long", spec);
    snprintf(name, cap, "%s", p + 1);
    *count = (unsigned)n;
    return TERN_OK;
}

tern_status tern_fabric_load(const char *spec, const tern_fabric_opts *o, tern_fabric **out, tern_error *err)
{
    char name[512], path[1024];
    unsigned count = 1;
    *out = NULL;
    int is_cluster = 0;
    tern_status st = tern_cluster_file_sniff(spec, &is_cluster, err);
    if (st)
        return st;
    if (is_cluster)
        return tern_cluster_file_load(spec, o, out, err);
    st = tern_cluster_spec_parse(spec, &count, name, sizeof name, err);
    if (st)
        return st;
    st = tern_machine_find(name, path, sizeof path, err);
    if (st == TERN_ERR_NOT_FOUND && (strchr(name, '/') || (strlen(name) > 5 && !strcmp(name + strlen(name) - 5,
                                                                                        ".json")))) {
        /* a path: say why the file did not open rather than call it an unknown instance */
        FILE *fp = fopen(name, "rb");
        int e = errno;
        if (fp)
            fclose(fp);
        return tern_error_set(err, TERN_ERR_NOT_FOUND,
                              "machine spec '%s': cannot read the machine or cluster file '%s' (%s)", spec, name,
                              fp ? "not a machine or cluster description" : strerror(e));
    }
    if (st == TERN_ERR_NOT_FOUND)
        return tern_error_set(err, TERN_ERR_NOT_FOUND,
                              "machine spec '%s': unknown instance '%s' (`tern info` lists the catalogue)", spec,
                              name);
    if (st)
        return st;
    tern_machine *m;
    if ((st = tern_machine_load(name, &m, err)))
        return st;
    st = tern_fabric_create(m, count, o, out, err);
    if (st == TERN_OK && count > 1)
        snprintf((*out)->name, sizeof (*out)->name, "%ux%s", count, tern_machine_name(m));
    tern_machine_free(m);
    return st;
}

/* "82.0 TiB": bytes in binary units, for messages. */
static void fmt_bytes(uint64_t b, char *buf, size_t cap)
{
    static const char *const U[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    double v = (double)b;
    unsigned u = 0;
    while (v >= 1024.0 && u + 1 < sizeof U / sizeof U[0]) {
        v /= 1024.0;
        u++;
    }
    snprintf(buf, cap, u ? "%.1f %s" : "%.0f %s", v, U[u]);
}

/* The host memory a fabric and its simulation need (docs/multichip.md "Size limit"), overflow-checked: false when
 * the count does not fit in 64 bits. The fabric: its resources' busy-until times and the chip owners. The
 * simulation: a collective over every rank in use, by the algorithm with the fewest (step, rank) events that the
 * runtime picks for large messages, hierarchical across instances (2(L - 1) + 2(M - 1) steps for M instances of
 * L ranks) or a ring inside one instance (2(R - 1) steps), each event costing TERN_FABRIC_EVENT_BYTES: a pull
 * (40 bytes) and its sorted copy (40), the reader list (4), and the event's index, dependency count, ready time
 * and heap entry (44); 111 bytes per event measured on 256 x trn1.32xlarge (4.7 M events, 523 MB peak RSS). */
static bool fabric_host_bytes(const tern_fabric *f, uint64_t *out)
{
    uint64_t L = f->ranks_per_node, M = f->used_nodes, R = f->nranks;
    uint64_t steps = M > 1 ? 2 * (L - 1) + 2 * (M - 1) : 2 * (R > 1 ? R - 1 : 1);
    uint64_t events, sim, fab, chips;
    bool ok = tern_mul_u64(steps, R, &events) && tern_mul_u64(events, TERN_FABRIC_EVENT_BYTES, &sim) &&
              tern_mul_u64((uint64_t)f->nres, sizeof *f->busy, &fab) &&
              tern_mul_u64((uint64_t)f->total_chips, sizeof *f->chip_owner, &chips) &&
              tern_add_u64(fab, chips, &fab) && tern_add_u64(fab, sizeof *f, &fab) && tern_add_u64(fab, sim, out);
    if (!ok)
        *out = UINT64_MAX;
    return ok;
}

static unsigned neighbours(unsigned d)
{
    return d >= 3 ? 2 : d == 2 ? 1 : 0;
}

tern_status tern_fabric_create(const tern_machine *m, unsigned cluster_count, const tern_fabric_opts *o,
                               tern_fabric **out, tern_error *err)
{
    return tern_fabric_build(m, tern_machine_instance(m), cluster_count, o, out, err);
}

void tern_fabric_set_name(tern_fabric *f, const char *name)
{
    snprintf(f->name, sizeof f->name, "%s", name);
}

const char *tern_fabric_base_machine(const tern_fabric *f) { return f->base; }
unsigned tern_fabric_instances(const tern_fabric *f) { return f->units * f->nodes_per_unit; }
unsigned tern_fabric_node_ranks_max(const tern_fabric *f) { return f->chips_per_node * f->ranks_per_chip; }

unsigned tern_fabric_fewest_nodes(const tern_fabric *f, unsigned ranks)
{
    unsigned per = tern_fabric_node_ranks_max(f), all = tern_fabric_instances(f);
    unsigned n = per ? (ranks + per - 1) / per : 1;
    if (n < 1)
        n = 1;
    while (n < all && ranks % n)
        n++;
    return n;
}

tern_status tern_machine_spec_base(const char *spec, char *base, size_t cap, unsigned *instances, unsigned *cores,
                                   tern_error *err)
{
    *instances = 1;
    *cores = 0;
    int is_cluster = 0;
    unsigned count = 1;
    char name[512];
    tern_status st = tern_cluster_file_sniff(spec, &is_cluster, err);
    if (!st && !is_cluster)
        st = tern_cluster_spec_parse(spec, &count, name, sizeof name, err);
    if (st)
        return st;
    if (!is_cluster && count == 1) {
        if (strlen(spec) >= cap)
            return tern_error_set(err, TERN_ERR_INVALID, "machine '%s': name longer than %zu characters", spec, cap - 1);
        snprintf(base, cap, "%s", spec);
        return TERN_OK;
    }
    tern_fabric_opts one = {1, 1, 1}; /* one rank of one instance: the shape without the size */
    tern_fabric *f = NULL;
    if ((st = tern_fabric_load(spec, &one, &f, err)))
        return st;
    if (strlen(f->base) >= cap) {
        tern_fabric_free(f);
        return tern_error_set(err, TERN_ERR_INVALID, "machine '%s': name longer than %zu characters", spec, cap - 1);
    }
    snprintf(base, cap, "%s", f->base);
    *instances = tern_fabric_instances(f);
    uint64_t c = (uint64_t)f->total_chips * f->ranks_per_chip; /* lnc 1: one rank per physical core */
    *cores = c > UINT32_MAX ? UINT32_MAX : (unsigned)c;
    tern_fabric_free(f);
    return TERN_OK;
}

tern_status tern_fabric_build(const tern_machine *m, const tern_instance_spec *in, unsigned cluster_count,
                              const tern_fabric_opts *o, tern_fabric **out, tern_error *err)
{
    *out = NULL;
    const tern_chip_spec *ch = tern_machine_chip(m);
    const tern_core_spec *co = tern_machine_core(m);
    if (!in || !ch)
        return tern_error_set(err, TERN_ERR_INVALID,
                              "machine '%s' is a %s: a fabric needs an instance or a system (e.g. trn1.32xlarge)",
                              tern_machine_name(m), tern_machine_kind_name(tern_machine_kind_of(m)));
    if (cluster_count == 0)
        return tern_error_set(err, TERN_ERR_INVALID, "cluster of '%s': instance count must be at least 1",
                              tern_machine_name(m));
    tern_fabric *f = calloc(1, sizeof *f);
    if (!f)
        return tern_error_set(err, TERN_ERR_NOMEM, "fabric: out of memory");
    snprintf(f->name, sizeof f->name, "%s", tern_machine_name(m));
    snprintf(f->base, sizeof f->base, "%s", tern_machine_name(m));
    f->units = cluster_count;
    f->nodes_per_unit = 1;
    f->chips_per_unit = in->chips;
    f->topo = in->topology;
    f->ndims = in->topology_ndims;
    for (unsigned i = 0; i < 3; i++)
        f->dims[i] = i < f->ndims ? in->topology_dims[i] : 1;
    if (tern_machine_kind_of(m) == TERN_MACHINE_SYSTEM && in->built_from_count > 1 &&
        in->chips % in->built_from_count == 0) {
        f->nodes_per_unit = in->built_from_count;
        /* The UltraServer: the torus's first dimension runs through the instances. */
        f->z_is_node = f->topo == TERN_TOPOLOGY_TORUS_3D && f->dims[0] == in->built_from_count;
    }
    f->chips_per_node = in->chips / f->nodes_per_unit;
    f->total_chips = f->chips_per_unit * f->units;

    unsigned cores = ch->cores;
    unsigned lnc = o && o->lnc ? o->lnc : (strcmp(co->version, "NeuronCore-v2") == 0 ? 1u : 2u);
    if (lnc > cores || cores % lnc) {
        tern_fabric_free(f);
        return tern_error_set(err, TERN_ERR_INVALID, "fabric '%s': lnc %u must divide the chip's %u cores",
                              tern_machine_name(m), lnc, cores);
    }
    f->lnc = lnc;
    f->ranks_per_chip = cores / lnc;
    unsigned total_nodes = f->units * f->nodes_per_unit;
    unsigned nodes = o && o->nodes ? o->nodes : total_nodes;
    if (nodes > total_nodes) {
        tern_fabric_free(f);
        return tern_error_set(err, TERN_ERR_INVALID, "--nodes %u: '%s' has only %u instance%s", nodes,
                              cluster_count > 1 ? "the cluster" : tern_machine_name(m), total_nodes,
                              total_nodes == 1 ? "" : "s");
    }
    unsigned per_node_max = f->chips_per_node * f->ranks_per_chip;
    unsigned ranks = o && o->ranks ? o->ranks : nodes * per_node_max;
    if (ranks % nodes) {
        tern_fabric_free(f);
        return tern_error_set(err, TERN_ERR_INVALID, "--ranks %u: not divisible by --nodes %u (ranks are spread "
                              "equally over the instances)", ranks, nodes);
    }
    if (ranks / nodes > per_node_max || ranks < 1) {
        tern_fabric_free(f);
        return tern_error_set(err, TERN_ERR_INVALID,
                              "--ranks %u: %u instance%s of '%s' hold%s %u ranks (%u per instance at lnc %u)", ranks,
                              nodes, nodes == 1 ? "" : "s", tern_machine_name(m), nodes == 1 ? "s" : "", nodes * per_node_max,
                              per_node_max, lnc);
    }
    f->used_nodes = nodes;
    f->ranks_per_node = ranks / nodes;
    f->nranks = ranks;

    f->dma_bw_rank = (double)(ch->cc_dma_engines ? ch->cc_dma_engines : co->dma.engines) * lnc *
                     co->dma.bandwidth_per_engine;
    f->hbm_bw = ch->hbm_bandwidth;
    /* Per-chip figures count every link in both directions: one direction of one link gets
     * per_chip / (2 x neighbours). The UltraServer's instance dimension has its own per-chip figure. */
    unsigned nb_intra = 0, nb_z = 0;
    for (unsigned d = 0; d < f->ndims; d++) {
        if (d == 0 && f->z_is_node)
            nb_z += neighbours(f->dims[d]);
        else
            nb_intra += neighbours(f->dims[d]);
    }
    for (unsigned d = 0; d < 3; d++) {
        if (d == 0 && f->z_is_node)
            f->link_bw[d] = nb_z ? in->scaleup_bandwidth_per_chip / (2.0 * nb_z) : 0;
        else
            f->link_bw[d] = nb_intra ? in->link_bandwidth_per_chip / (2.0 * nb_intra) : 0;
    }
    f->switch_bw = in->link_bandwidth_per_chip / 2.0;
    f->efa_bw_chip = in->efa_bandwidth / (double)in->chips;
    f->dma_fixed_ps = ps_of(co->dma.fixed_cost_s);
    f->link_lat_ps = ps_of(in->link_latency_s);
    f->efa_lat_ps = ps_of(in->efa_latency_s);
    f->launch_ps = ps_of(ch->cc_launch_cost_s);
    f->setup_ps = ps_of(ch->cc_setup_cost_s);
    f->nres = (size_t)f->nranks + (size_t)f->total_chips * RES_PER_CHIP;
    uint64_t need;
    if (!fabric_host_bytes(f, &need) || need > TERN_FABRIC_HOST_LIMIT) {
        char nm[96], h[32], l[32], nb[32];
        unsigned total = f->units * f->nodes_per_unit, units = f->units, nranks = f->nranks, used = f->used_nodes;
        if (cluster_count > 1)
            snprintf(nm, sizeof nm, "%ux%s", cluster_count, tern_machine_name(m));
        else
            snprintf(nm, sizeof nm, "%s", tern_machine_name(m));
        fmt_bytes(need, h, sizeof h);
        fmt_bytes(TERN_FABRIC_HOST_LIMIT, l, sizeof l);
        if (need == UINT64_MAX)
            snprintf(nb, sizeof nb, "over 2^64");
        else
            snprintf(nb, sizeof nb, "%llu", (unsigned long long)need);
        tern_fabric_free(f);
        return tern_error_set(err, TERN_ERR_RANGE,
                              "fabric '%s' (%u x %s: %u instance%s, %u in use, %u ranks): the fabric and the "
                              "simulation of a collective over every rank need %s%s of host memory (%s bytes), "
                              "above the limit of %s (%llu bytes, docs/multichip.md \"Size limit\"); use fewer "
                              "instances, --nodes or --ranks",
                              nm, units, tern_machine_name(m), total, total == 1 ? "" : "s", used, nranks,
                              need == UINT64_MAX ? "more than " : "", h, nb, l,
                              (unsigned long long)TERN_FABRIC_HOST_LIMIT);
    }
    f->busy = calloc(f->nres, sizeof *f->busy);
    if (!f->busy) {
        size_t nres = f->nres;
        tern_fabric_free(f);
        return tern_error_set(err, TERN_ERR_NOMEM, "fabric: out of memory for %zu resources", nres);
    }
    *out = f;
    return TERN_OK;
}

void tern_fabric_free(tern_fabric *f)
{
    if (!f)
        return;
    free(f->busy);
    free(f->chip_owner);
    free(f);
}

const char *tern_fabric_machine_name(const tern_fabric *f) { return f->name; }
unsigned tern_fabric_ranks(const tern_fabric *f) { return f->nranks; }
unsigned tern_fabric_nodes(const tern_fabric *f) { return f->used_nodes; }
unsigned tern_fabric_lnc(const tern_fabric *f) { return f->lnc; }
uint64_t tern_fabric_launch_ps(const tern_fabric *f) { return f->launch_ps; }
uint64_t tern_fabric_setup_ps(const tern_fabric *f) { return f->setup_ps; }

void tern_fabric_place(const tern_fabric *f, unsigned rank, tern_rank_place *out)
{
    TERN_ASSERT(rank < f->nranks);
    unsigned node = rank / f->ranks_per_node, local = rank % f->ranks_per_node;
    out->node = node;
    out->unit = node / f->nodes_per_unit;
    out->chip = local / f->ranks_per_chip;
    out->core = (local % f->ranks_per_chip) * f->lnc;
    out->chip_global = out->unit * f->chips_per_unit + (node % f->nodes_per_unit) * f->chips_per_node + out->chip;
}

/* Chip index inside a node at snake position i: rows of the node's plane alternate direction, so consecutive
 * chips are torus neighbours (and the last row's end meets the first row's start through the wrap link). */
static unsigned snake_chip(const tern_fabric *f, unsigned i, int reversed)
{
    unsigned n = f->chips_per_node;
    if (reversed)
        i = n - 1 - i;
    unsigned cols = 1;
    if (f->topo == TERN_TOPOLOGY_TORUS_2D)
        cols = f->dims[1];
    else if (f->topo == TERN_TOPOLOGY_TORUS_3D)
        cols = f->dims[2];
    if (cols <= 1 || n % cols)
        return i;
    unsigned row = i / cols, col = i % cols;
    return row * cols + ((row & 1) ? cols - 1 - col : col);
}

void tern_fabric_ring_order(const tern_fabric *f, unsigned *order)
{
    size_t k = 0;
    for (unsigned node = 0; node < f->used_nodes; node++) {
        for (unsigned i = 0; i < f->chips_per_node; i++) {
            unsigned chip = snake_chip(f, i, (int)(node & 1));
            for (unsigned c = 0; c < f->ranks_per_chip; c++) {
                unsigned local = chip * f->ranks_per_chip + c;
                if (local < f->ranks_per_node)
                    order[k++] = node * f->ranks_per_node + local;
            }
        }
    }
    TERN_ASSERT(k == f->nranks);
}

/* Coordinates of a chip inside its unit, row-major over the torus dimensions (first = slowest). */
static void coords(const tern_fabric *f, unsigned chip_in_unit, unsigned c[3])
{
    unsigned rest = chip_in_unit;
    for (int d = (int)f->ndims - 1; d >= 0; d--) {
        c[d] = rest % f->dims[d];
        rest /= f->dims[d];
    }
}

typedef struct {
    size_t res[64];
    uint64_t occ[64];
    unsigned n, links, efa;
} route;

static void add(route *r, size_t res, uint64_t occ)
{
    for (unsigned i = 0; i < r->n; i++)
        if (r->res[i] == res) {
            r->occ[i] += occ;
            return;
        }
    TERN_ASSERT(r->n < 64);
    r->res[r->n] = res;
    r->occ[r->n++] = occ;
}

static size_t chip_res(const tern_fabric *f, unsigned chip, unsigned slot)
{
    return (size_t)f->nranks + (size_t)chip * RES_PER_CHIP + slot;
}

/* The links between two chips of one unit, with `bytes` on each. */
static void route_links(const tern_fabric *f, unsigned a, unsigned b, uint64_t bytes, route *r)
{
    unsigned ua = a % f->chips_per_unit, ub = b % f->chips_per_unit, base = a - ua;
    if (f->topo == TERN_TOPOLOGY_SWITCH || f->topo == TERN_TOPOLOGY_SWITCH_2LEVEL) {
        add(r, chip_res(f, a, 1), occupancy(bytes, f->switch_bw));     /* uplink */
        add(r, chip_res(f, b, 2), occupancy(bytes, f->switch_bw));     /* downlink */
        unsigned group = f->ndims == 2 ? f->dims[1] : f->chips_per_unit;
        r->links += (f->topo == TERN_TOPOLOGY_SWITCH_2LEVEL && ua / group != ub / group) ? 4 : 2;
        return;
    }
    if (f->topo != TERN_TOPOLOGY_RING && f->topo != TERN_TOPOLOGY_TORUS_2D && f->topo != TERN_TOPOLOGY_TORUS_3D)
        return;
    unsigned ca[3] = {0, 0, 0}, cb[3] = {0, 0, 0};
    coords(f, ua, ca);
    coords(f, ub, cb);
    /* Dimension order: the fastest dimension first, so a route leaves its instance last. */
    for (int d = (int)f->ndims - 1; d >= 0; d--) {
        unsigned n = f->dims[d];
        if (ca[d] == cb[d])
            continue;
        unsigned fwd = (cb[d] + n - ca[d]) % n, back = n - fwd;
        int plus = fwd <= back;
        unsigned steps = plus ? fwd : back;
        for (unsigned s = 0; s < steps; s++) {
            unsigned cur = 0;
            for (unsigned e = 0; e < f->ndims; e++)
                cur = cur * f->dims[e] + ca[e];
            add(r, chip_res(f, base + cur, 1 + 2 * (unsigned)d + (plus ? 0 : 1)), occupancy(bytes, f->link_bw[d]));
            ca[d] = plus ? (ca[d] + 1) % n : (ca[d] + n - 1) % n;
            r->links++;
        }
    }
}

static void route_of(const tern_fabric *f, const tern_fabric_xfer *x, route *r)
{
    tern_rank_place ps, pd;
    tern_fabric_place(f, x->src, &ps);
    tern_fabric_place(f, x->dst, &pd);
    memset(r, 0, sizeof *r);
    uint64_t b = x->bytes;
    uint64_t reads = 1 + (uint64_t)(x->reduce > 0 ? x->reduce : 0), writes = 1 + (uint64_t)(x->dup > 0);
    add(r, x->dst, occupancy(b * reads, f->dma_bw_rank));
    add(r, chip_res(f, ps.chip_global, 0), occupancy(b, f->hbm_bw));
    /* the destination chip's HBM: its local reads and the write(s) */
    add(r, chip_res(f, pd.chip_global, 0), occupancy(b * (reads - 1 + writes), f->hbm_bw));
    if (ps.chip_global == pd.chip_global)
        return;
    if (ps.unit != pd.unit) {
        add(r, chip_res(f, ps.chip_global, 7), occupancy(b, f->efa_bw_chip));
        add(r, chip_res(f, pd.chip_global, 8), occupancy(b, f->efa_bw_chip));
        r->efa = 1;
        return;
    }
    route_links(f, ps.chip_global, pd.chip_global, b, r);
}

void tern_fabric_route_hops(const tern_fabric *f, unsigned src, unsigned dst, unsigned *links, unsigned *efa)
{
    tern_fabric_xfer x = {src, dst, 0, 0, 0, 0, 0};
    route r;
    route_of(f, &x, &r);
    *links = r.links;
    *efa = r.efa;
}

static uint64_t route_latency(const tern_fabric *f, const route *r)
{
    return f->dma_fixed_ps + r->links * f->link_lat_ps + r->efa * f->efa_lat_ps;
}

uint64_t tern_fabric_reserve(tern_fabric *f, uint64_t res, uint64_t ready_ps, uint64_t occ_ps)
{
    TERN_ASSERT(res < f->nres);
    uint64_t s = f->busy[res] > ready_ps ? f->busy[res] : ready_ps;
    f->busy[res] = s + occ_ps;
    return f->busy[res];
}

uint64_t tern_fabric_transfer(tern_fabric *f, const tern_fabric_xfer *x)
{
    TERN_ASSERT(x->src < f->nranks && x->dst < f->nranks);
    route r;
    route_of(f, x, &r);
    uint64_t end = x->ready_ps;
    for (unsigned i = 0; i < r.n; i++) {
        uint64_t e = tern_fabric_reserve(f, r.res[i], x->ready_ps, r.occ[i]);
        if (e > end)
            end = e;
    }
    return end + route_latency(f, &r);
}

unsigned tern_fabric_route_resources(const tern_fabric *f, const tern_fabric_xfer *x, uint64_t *res, uint64_t *occ,
                                     uint64_t *latency_ps)
{
    TERN_ASSERT(x->src < f->nranks && x->dst < f->nranks);
    route r;
    route_of(f, x, &r);
    for (unsigned i = 0; i < r.n; i++) {
        res[i] = r.res[i];
        occ[i] = r.occ[i];
    }
    *latency_ps = route_latency(f, &r);
    return r.n;
}

/* A lower bound on (completion - ready) of any transfer between two distinct used ranks: every transfer pays the
 * DMA fixed cost; one that leaves its chip pays at least one NeuronLink hop (two through a switch), one that
 * leaves its instance an EFA hop. The conservative engine's window is this wide, so it must never exceed the
 * true minimum (that would let an event see a reservation out of order), while a smaller value only costs
 * windows. */
uint64_t tern_fabric_min_latency_ps(const tern_fabric *f)
{
    unsigned used_per_chip = f->ranks_per_node < f->ranks_per_chip ? f->ranks_per_node : f->ranks_per_chip;
    if (used_per_chip > 1)
        return f->dma_fixed_ps; /* two ranks share a chip: no hop */
    int sw = f->topo == TERN_TOPOLOGY_SWITCH || f->topo == TERN_TOPOLOGY_SWITCH_2LEVEL;
    int torus = f->topo == TERN_TOPOLOGY_RING || f->topo == TERN_TOPOLOGY_TORUS_2D || f->topo == TERN_TOPOLOGY_TORUS_3D;
    uint64_t in_unit = (sw ? 2u : torus ? 1u : 0u) * f->link_lat_ps; /* route_links' fewest hops */
    uint64_t best = UINT64_MAX;
    if (f->ranks_per_node > 1) /* two chips of one node */
        best = in_unit;
    if (f->used_nodes > 1) { /* nodes of one system (the UltraServer's Z links), or cluster members over EFA */
        uint64_t across = f->nodes_per_unit > 1 ? in_unit : f->efa_lat_ps;
        if (f->units > 1 && f->efa_lat_ps < across)
            across = f->efa_lat_ps;
        if (across < best)
            best = across;
    }
    return f->dma_fixed_ps + (best == UINT64_MAX ? 0 : best);
}

tern_status tern_fabric_set_transport(tern_fabric *f, const tern_transport *t, tern_error *err)
{
    free(f->chip_owner);
    f->chip_owner = NULL;
    f->tr = NULL;
    if (!t)
        return TERN_OK;
    unsigned K = t->nprocs ? t->nprocs : 1;
    unsigned *owner = malloc(sizeof *owner * f->total_chips);
    unsigned char *used = calloc(f->total_chips, 1);
    if (!owner || !used) {
        free(owner);
        free(used);
        return tern_error_set(err, TERN_ERR_NOMEM, "fabric: out of memory for %u chip owners", f->total_chips);
    }
    for (unsigned r = 0; r < f->nranks; r++) {
        tern_rank_place p;
        tern_fabric_place(f, r, &p);
        used[p.chip_global] = 1;
    }
    unsigned U = 0;
    for (unsigned c = 0; c < f->total_chips; c++)
        U += used[c];
    if (K > U) {
        free(owner);
        free(used);
        return tern_error_set(err, TERN_ERR_INVALID,
                              "%u processes for the %u chip%s that hold the %u ranks of '%s': a process owns whole "
                              "chips, so run at most %u (mpirun -np %u)", K, U, U == 1 ? "" : "s", f->nranks,
                              f->name, U, U);
    }
    unsigned u = 0, cur = 0;
    for (unsigned c = 0; c < f->total_chips; c++) {
        if (used[c])
            cur = (unsigned)((uint64_t)u++ * K / U);
        owner[c] = cur;
    }
    free(used);
    f->chip_owner = owner;
    f->tr = t;
    return TERN_OK;
}

const tern_transport *tern_fabric_transport(const tern_fabric *f) { return f->tr; }
unsigned tern_fabric_procs(const tern_fabric *f) { return f->tr ? f->tr->nprocs : 1; }
unsigned tern_fabric_proc(const tern_fabric *f) { return f->tr ? f->tr->me : 0; }

unsigned tern_fabric_rank_owner(const tern_fabric *f, unsigned rank)
{
    if (!f->tr)
        return 0;
    tern_rank_place p;
    tern_fabric_place(f, rank, &p);
    return f->chip_owner[p.chip_global];
}

int tern_fabric_rank_is_local(const tern_fabric *f, unsigned rank)
{
    return tern_fabric_rank_owner(f, rank) == tern_fabric_proc(f);
}

unsigned tern_fabric_resource_owner(const tern_fabric *f, uint64_t res)
{
    TERN_ASSERT(res < f->nres);
    if (!f->tr)
        return 0;
    if (res < f->nranks)
        return tern_fabric_rank_owner(f, (unsigned)res);
    return f->chip_owner[(res - f->nranks) / RES_PER_CHIP];
}

void tern_fabric_reset(tern_fabric *f)
{
    memset(f->busy, 0, f->nres * sizeof *f->busy);
}
