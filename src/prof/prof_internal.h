/* Private to the prof layer: opcode families (the SVG's colours, the trace's categories), the binned
 * timeline grid that keeps the SVG and the aggregated part of a long trace bounded, and the writers' entry
 * points. A grid has a fixed number of bins per lane and one bin width for all lanes; when an event ends past
 * the last bin, neighbouring bins merge pairwise and the width doubles, so memory never grows with the run. */
#ifndef TERN_PROF_INTERNAL_H
#define TERN_PROF_INTERNAL_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "tern/prof.h"

typedef enum {
    PROF_FAM_MATMUL = 0,
    PROF_FAM_VECTOR,
    PROF_FAM_SCALAR,
    PROF_FAM_GPSIMD,
    PROF_FAM_DMA,
    PROF_FAM_CONTROL,
    PROF_FAM_WAIT,
    PROF_FAM_COUNT
} prof_family;

#define PROF_OP_WAIT ((unsigned)TERN_OP_COUNT) /* pseudo-opcode of semaphore waits in bins */

const char *prof_family_name(prof_family f);
/* Family of an opcode issued by an engine (matmul and DMA by opcode, control ops by kind, else by engine). */
prof_family prof_family_of(unsigned opcode, tern_engine e);

typedef struct {
    float busy[PROF_FAM_COUNT];   /* ps covered inside the bin, per family (float: the grid is for pictures) */
    int64_t first, last;          /* earliest start and latest end inside the bin (clipped to it) */
    uint64_t bytes, flops;        /* of the events starting in the bin */
    uint32_t count;               /* events starting in the bin */
    uint16_t op;                  /* the opcode when every event in the bin has the same one */
    uint8_t mixed;                /* events of more than one opcode */
    uint8_t used;
} prof_bin;

typedef struct {
    unsigned nlanes, nbins;
    int64_t width;   /* ps per bin, a power of two */
    prof_bin **lane; /* per lane: up to nbins bins, grown on use */
    unsigned *cap;   /* per lane: bins allocated */
    unsigned *hi;    /* per lane: one past the last bin in use (coarsening touches only [0, hi)) */
} prof_grid;

#define PROF_GRID_MIN_WIDTH 1024 /* ps: the finest bin, about a cycle */

tern_status prof_grid_init(prof_grid *g, unsigned nlanes, unsigned nbins);
void prof_grid_free(prof_grid *g);
/* Add [start, end) on a lane; 0 on success, -1 when out of memory. */
int prof_grid_add(prof_grid *g, unsigned lane, int64_t start, int64_t end, prof_family fam, unsigned op,
                  uint64_t bytes, uint64_t flops);

/* Lanes of the profiler's grids: the five engines, then the DMA queues. */
#define PROF_LANE_QUEUE0 TERN_ENGINE_COUNT
#define PROF_LANES (TERN_ENGINE_COUNT + TERN_PROF_MAX_QUEUES)

/* The SVG timeline from the grid and the summary; returns 0, or -1 on a write error. */
int prof_svg_write(FILE *f, const prof_grid *g, const tern_prof_summary *s, unsigned width);

/* A small output buffer with integer and fixed-point formatting: the trace is written per event, and stdio's
 * printf costs several times the simulator's own time per event (measured by bench_prof). */
typedef struct {
    FILE *f;
    char *buf;
    size_t n, cap;
    int failed;
} prof_out;

void prof_out_flush(prof_out *w);
static inline void prof_out_need(prof_out *w, size_t len)
{
    if (w->n + len > w->cap)
        prof_out_flush(w);
}
void prof_out_mem(prof_out *w, const char *s, size_t len);
static inline void prof_out_str(prof_out *w, const char *s)
{
    prof_out_mem(w, s, strlen(s));
}
void prof_out_u64(prof_out *w, uint64_t v);
void prof_out_i64(prof_out *w, int64_t v);
void prof_out_hex(prof_out *w, uint64_t v);
/* picoseconds as microseconds with six decimals (exact) */
void prof_out_us(prof_out *w, int64_t ps);
void prof_out_fmt(prof_out *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Escape a string for a JSON string or XML text into out (always NUL-terminated). */
void prof_json_escape(char *out, size_t cap, const char *s);
void prof_xml_escape(char *out, size_t cap, const char *s);

#endif
