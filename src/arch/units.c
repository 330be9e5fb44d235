/* Unit tables for machine files: each field has a unit kind (frequency, bytes, bandwidth, ...) and a figure
 * may be written in any accepted spelling of that kind, exactly as its source publishes it. Decimal prefixes
 * (KB, GB/s, TB/s) are powers of 1000, binary ones (KiB, GiB/s) powers of 1024; Gbps is bits. */
#include "arch/units.h"

#include <string.h>

typedef struct {
    arch_unit_kind kind;
    const char *name;
    double scale;
} unit_row;

#define KI 1024.0
#define MI (1024.0 * 1024.0)
#define GI (1024.0 * 1024.0 * 1024.0)
#define TI (1024.0 * 1024.0 * 1024.0 * 1024.0)

static const unit_row UNITS[] = {
    {ARCH_UNIT_CYCLES, "cycles", 1.0},
    {ARCH_UNIT_HZ, "Hz", 1.0},
    {ARCH_UNIT_HZ, "kHz", 1e3},
    {ARCH_UNIT_HZ, "MHz", 1e6},
    {ARCH_UNIT_HZ, "GHz", 1e9},
    {ARCH_UNIT_BYTES, "B", 1.0},
    {ARCH_UNIT_BYTES, "KiB", KI},
    {ARCH_UNIT_BYTES, "MiB", MI},
    {ARCH_UNIT_BYTES, "GiB", GI},
    {ARCH_UNIT_BYTES, "TiB", TI},
    {ARCH_UNIT_BYTES, "KB", 1e3},
    {ARCH_UNIT_BYTES, "MB", 1e6},
    {ARCH_UNIT_BYTES, "GB", 1e9},
    {ARCH_UNIT_BYTES, "TB", 1e12},
    {ARCH_UNIT_BANDWIDTH, "B/s", 1.0},
    {ARCH_UNIT_BANDWIDTH, "B/ns", 1e9},
    {ARCH_UNIT_BANDWIDTH, "KB/s", 1e3},
    {ARCH_UNIT_BANDWIDTH, "MB/s", 1e6},
    {ARCH_UNIT_BANDWIDTH, "GB/s", 1e9},
    {ARCH_UNIT_BANDWIDTH, "TB/s", 1e12},
    {ARCH_UNIT_BANDWIDTH, "KiB/s", KI},
    {ARCH_UNIT_BANDWIDTH, "MiB/s", MI},
    {ARCH_UNIT_BANDWIDTH, "GiB/s", GI},
    {ARCH_UNIT_BANDWIDTH, "TiB/s", TI},
    {ARCH_UNIT_BANDWIDTH, "Gbps", 1e9 / 8.0},
    {ARCH_UNIT_BANDWIDTH, "Tbps", 1e12 / 8.0},
    {ARCH_UNIT_TIME, "s", 1.0},
    {ARCH_UNIT_TIME, "ms", 1e-3},
    {ARCH_UNIT_TIME, "us", 1e-6},
    {ARCH_UNIT_TIME, "ns", 1e-9},
    {ARCH_UNIT_FLOPS, "FLOPS", 1.0},
    {ARCH_UNIT_FLOPS, "GFLOPS", 1e9},
    {ARCH_UNIT_FLOPS, "TFLOPS", 1e12},
    {ARCH_UNIT_FLOPS, "PFLOPS", 1e15},
    {ARCH_UNIT_PRICE, "USD/h", 1.0},
    {ARCH_UNIT_MAC_RATE, "MAC/PE/cycle", 1.0},
    {ARCH_UNIT_ELEM_RATE, "elem/cycle", 1.0},
};

bool arch_unit_scale(arch_unit_kind kind, const char *unit, double *scale)
{
    if (kind == ARCH_UNIT_NONE)
        return false;
    for (size_t i = 0; i < sizeof UNITS / sizeof UNITS[0]; i++) {
        if (UNITS[i].kind == kind && strcmp(UNITS[i].name, unit) == 0) {
            *scale = UNITS[i].scale;
            return true;
        }
    }
    return false;
}

const char *arch_unit_si_name(arch_unit_kind kind)
{
    switch (kind) {
    case ARCH_UNIT_NONE: return "";
    case ARCH_UNIT_CYCLES: return "cycles";
    case ARCH_UNIT_HZ: return "Hz";
    case ARCH_UNIT_BYTES: return "B";
    case ARCH_UNIT_BANDWIDTH: return "B/s";
    case ARCH_UNIT_TIME: return "s";
    case ARCH_UNIT_FLOPS: return "FLOPS";
    case ARCH_UNIT_PRICE: return "USD/h";
    case ARCH_UNIT_MAC_RATE: return "MAC/PE/cycle";
    case ARCH_UNIT_ELEM_RATE: return "elem/cycle";
    }
    return "";
}

const char *arch_unit_accepted(arch_unit_kind kind)
{
    switch (kind) {
    case ARCH_UNIT_NONE: return "none (dimensionless: omit \"unit\")";
    case ARCH_UNIT_CYCLES: return "cycles";
    case ARCH_UNIT_HZ: return "Hz, kHz, MHz, GHz";
    case ARCH_UNIT_BYTES: return "B, KiB, MiB, GiB, TiB, KB, MB, GB, TB";
    case ARCH_UNIT_BANDWIDTH: return "B/s, B/ns, KB/s, MB/s, GB/s, TB/s, KiB/s, MiB/s, GiB/s, TiB/s, Gbps, Tbps";
    case ARCH_UNIT_TIME: return "s, ms, us, ns";
    case ARCH_UNIT_FLOPS: return "FLOPS, GFLOPS, TFLOPS, PFLOPS";
    case ARCH_UNIT_PRICE: return "USD/h";
    case ARCH_UNIT_MAC_RATE: return "MAC/PE/cycle";
    case ARCH_UNIT_ELEM_RATE: return "elem/cycle";
    }
    return "";
}
