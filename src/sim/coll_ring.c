/* Multi-channel rings (docs/multichip.md, "Ring channels"). The Neuron runtime runs several ring cycles at once
 * over mutually exclusive wires to use the full wire bandwidth (aws-neuron-sdk,
 * neuron-runtime/explore/intranode-collective-comm.rst, "Ring Algorithm"; its KangaRing section: the 16-chip 4x4
 * torus of trn1/trn2 has 2 non-overlapping Hamiltonian cycles; libnrt's nec.h keeps a metaring of channel_n rings,
 * NEC_MAX_CHANNELS). Here the cycles are derived from the fabric, not from a table: the chips that hold a group's
 * members, joined where the fabric routes between them over exactly one NeuronLink hop (the machine file's
 * topology), are searched for the largest set of edge-disjoint Hamiltonian cycles, and each cycle gives two
 * channels, one per direction. Every directed link then belongs to at most one channel. */
#include <stdlib.h>
#include <string.h>

#include "coll_sched.h"

#define MAX_CHIPS 64                 /* one instance's chips (trn2u: 16; the search is for one instance) */
#define SEARCH_BUDGET 4000000ull     /* DFS expansions per cycle count tried; deterministic, bounds the host time */

typedef struct {
    unsigned s;                          /* chips */
    unsigned char adj[MAX_CHIPS][MAX_CHIPS]; /* 1: an unused edge, 0: none or taken by an earlier cycle */
    unsigned cyc[COLL_MAX_CHANNELS / 2][MAX_CHIPS];
    unsigned char on[COLL_MAX_CHANNELS / 2][MAX_CHIPS]; /* per cycle: its chips so far */
    unsigned long long budget;
} search;

static int find_cycles(search *x, unsigned k, unsigned want);

/* Extend the path cyc[k][0..len) (ending at v) to a Hamiltonian cycle of the unused edges, then find the rest. */
static int dfs(search *x, unsigned k, unsigned want, unsigned len, unsigned v)
{
    if (x->budget == 0)
        return 0;
    x->budget--;
    unsigned *c = x->cyc[k];
    if (len == x->s) {
        if (!x->adj[v][c[0]])
            return 0;
        x->adj[v][c[0]] = x->adj[c[0]][v] = 0;
        if (find_cycles(x, k + 1, want))
            return 1;
        x->adj[v][c[0]] = x->adj[c[0]][v] = 1;
        return 0;
    }
    for (unsigned w = 0; w < x->s; w++) {
        if (!x->adj[v][w] || x->on[k][w])
            continue;
        x->on[k][w] = 1;
        x->adj[v][w] = x->adj[w][v] = 0;
        c[len] = w;
        if (dfs(x, k, want, len + 1, w))
            return 1;
        x->adj[v][w] = x->adj[w][v] = 1;
        x->on[k][w] = 0;
    }
    return 0;
}

static int find_cycles(search *x, unsigned k, unsigned want)
{
    if (k == want)
        return 1;
    memset(x->on[k], 0, sizeof x->on[k]);
    x->on[k][0] = 1;
    x->cyc[k][0] = 0;
    return dfs(x, k, want, 1, 0); /* on failure every edge it took is restored */
}

unsigned coll_ring_channels(const tern_fabric *f, const unsigned *ranks, unsigned n, unsigned *orders)
{
    /* the chips holding members, in order of first appearance (the fabric's ring order) */
    unsigned chip_rank[MAX_CHIPS], s = 0;
    unsigned *chip_of = malloc(sizeof *chip_of * (n ? n : 1));
    if (!chip_of)
        return 1;
    unsigned node0 = 0;
    for (unsigned k = 0; k < n; k++) {
        tern_rank_place p;
        tern_fabric_place(f, ranks[k], &p);
        if (k == 0)
            node0 = p.node;
        if (p.node != node0) { /* across instances: the hierarchical algorithm's business, one ring here */
            free(chip_of);
            return 1;
        }
        unsigned j = 0;
        while (j < s) {
            tern_rank_place q;
            tern_fabric_place(f, chip_rank[j], &q);
            if (q.chip_global == p.chip_global)
                break;
            j++;
        }
        if (j == s) {
            if (s == MAX_CHIPS) {
                free(chip_of);
                return 1;
            }
            chip_rank[s++] = ranks[k];
        }
        chip_of[k] = j;
    }
    /* two chips: one link pair, which the single ring already uses in both directions */
    if (s < 3) {
        free(chip_of);
        return 1;
    }
    search *x = calloc(1, sizeof *x);
    if (!x) {
        free(chip_of);
        return 1;
    }
    x->s = s;
    unsigned dmin = UINT32_MAX;
    for (unsigned a = 0; a < s; a++) {
        unsigned deg = 0;
        for (unsigned b = 0; b < s; b++) {
            unsigned links = 0, efa = 0;
            if (a != b)
                tern_fabric_route_hops(f, chip_rank[a], chip_rank[b], &links, &efa);
            x->adj[a][b] = a != b && links == 1 && efa == 0;
            deg += x->adj[a][b];
        }
        if (deg < dmin)
            dmin = deg;
    }
    unsigned K = dmin / 2;
    if (K > COLL_MAX_CHANNELS / 2)
        K = COLL_MAX_CHANNELS / 2;
    unsigned char adj0[MAX_CHIPS][MAX_CHIPS];
    memcpy(adj0, x->adj, sizeof adj0);
    unsigned found = 0;
    for (unsigned want = K; want >= 1 && !found; want--) {
        memcpy(x->adj, adj0, sizeof adj0);
        x->budget = SEARCH_BUDGET;
        if (find_cycles(x, 0, want))
            found = want;
    }
    unsigned C = 1;
    if (found) {
        C = 2 * found;
        /* channel 2c runs cycle c forward, 2c+1 backward; a chip's members keep their ring order inside it */
        for (unsigned c = 0; c < C; c++) {
            unsigned *o = orders + (size_t)c * n, at = 0;
            for (unsigned t = 0; t < s; t++) {
                unsigned chip = x->cyc[c / 2][(c & 1) ? (s - t) % s : t];
                for (unsigned k = 0; k < n; k++)
                    if (chip_of[k] == chip)
                        o[at++] = k;
            }
        }
    }
    free(x);
    free(chip_of);
    return C;
}
