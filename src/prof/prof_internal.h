/* Private to the prof layer: opcode families (the SVG's colours, the trace's categories), the binned
 * timeline grid that keeps the SVG and the aggregated part of a long trace bounded, and the writers' entry
 * points. A grid has a fixed number of bins per lane and one bin width for all lanes; when an event ends past
 * the last bin, neighbouring bins merge pairwise and the width doubles, so memory never grows with the run. */
#ifndef TERN_PROF_INTERNAL_H
#define TERN_PROF_INTERNAL_H

#include <stdint.h>
#include <stdio.h>

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
    int64_t busy[PROF_FAM_COUNT]; /* time covered inside the bin, per family */
    int64_t first, last;          /* earliest start and latest end inside the bin (clipped to it) */
    uint64_t bytes, flops;        /* of the events starting in the bin */
    uint32_t count;               /* events starting in the bin */
    uint16_t op;                  /* the opcode when every event in the bin has the same one */
    uint8_t mixed;                /* events of more than one opcode */
    uint8_t used;
} prof_bin;

typedef struct {
    unsigned nlanes, nbins;
    int64_t width; /* ps per bin, a power of two */
    prof_bin **lane; /* per lane: nbins bins, allocated on first use */
} prof_grid;

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

/* Escape a string for a JSON string or XML text into out (always NUL-terminated). */
void prof_json_escape(char *out, size_t cap, const char *s);
void prof_xml_escape(char *out, size_t cap, const char *s);

#endif
