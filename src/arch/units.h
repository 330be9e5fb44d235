/* Private to the arch layer: the unit tables that turn a figure as published ("820 GiB/s", "1.4 GHz",
 * "17 B/ns") into SI, so machine files can transcribe sources literally while the loader checks that each
 * field gets a unit of the right kind. */
#ifndef TERN_ARCH_UNITS_H
#define TERN_ARCH_UNITS_H

#include <stdbool.h>

typedef enum {
    ARCH_UNIT_NONE = 0, /* dimensionless: the "unit" key must be absent */
    ARCH_UNIT_CYCLES,
    ARCH_UNIT_HZ,
    ARCH_UNIT_BYTES,
    ARCH_UNIT_BANDWIDTH,
    ARCH_UNIT_TIME,
    ARCH_UNIT_FLOPS,
    ARCH_UNIT_PRICE,
    ARCH_UNIT_MAC_RATE,
    ARCH_UNIT_ELEM_RATE
} arch_unit_kind;

/* Scale factor to SI for unit of kind; false if unit is not one of the kind's accepted spellings. */
bool arch_unit_scale(arch_unit_kind kind, const char *unit, double *scale);
/* SI unit name of a kind ("Hz", "B", "B/s", ...), used in messages. */
const char *arch_unit_si_name(arch_unit_kind kind);
/* Accepted spellings of a kind, comma-separated, for messages. */
const char *arch_unit_accepted(arch_unit_kind kind);

#endif
