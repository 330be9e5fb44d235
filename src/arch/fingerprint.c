/* The code fingerprint of a machine: which of its figures compiled code depends on, written as canonical text
 * ("key=value" lines in a fixed order), and a CRC-32 over that text. An executable records both, so the runtime
 * can refuse to run code on a machine whose geometry differs (a trn1 executable on trn2) and say which figure
 * differs. Only figures that change what code is valid or where it puts data are included — the NeuronCore
 * version, the PE array, which dtypes TensorE supports, engine lanes, SBUF/PSUM geometry, DMA engines and queues,
 * the chip's cores and HBM size — never timing (clocks, bandwidths, latencies, per-cycle throughputs), so a
 * what-if machine that changes only timing runs the same code. The format is part of the .tern contract: a
 * change here changes every fingerprint, so add keys only with a reason. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "tern/arch.h"

typedef struct {
    char *buf;
    size_t cap, len;
} text;

static void put(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(text *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    size_t room = t->len < t->cap ? t->cap - t->len : 0;
    int n = vsnprintf(room ? t->buf + t->len : NULL, room, fmt, ap);
    va_end(ap);
    if (n > 0)
        t->len += (size_t)n;
}

size_t tern_machine_code_figures(const tern_machine *m, char *buf, size_t cap)
{
    text t = {buf, cap, 0};
    if (cap)
        buf[0] = '\0';
    const tern_core_spec *c = tern_machine_core(m);
    put(&t, "core.version=%s\n", c->version);
    put(&t, "core.tensor.pe_rows=%u\ncore.tensor.pe_cols=%u\ncore.tensor.moving_free_max=%u\n", c->tensor.pe_rows,
        c->tensor.pe_cols, c->tensor.moving_free_max);
    /* support, not throughput: a dtype TensorE has no MAC rate for cannot be a matmul operand */
    put(&t, "core.tensor.dtypes=");
    int first = 1;
    for (int d = 0; d < TERN_ARCH_DTYPE_COUNT; d++)
        if (c->tensor.macs_per_pe_cycle[d] > 0) {
            put(&t, "%s%s", first ? "" : ",", tern_arch_dtype_name((tern_arch_dtype)d));
            first = 0;
        }
    put(&t, "\n");
    put(&t, "core.vector.lanes=%u\ncore.scalar.lanes=%u\ncore.gpsimd.lanes=%u\ncore.gpsimd.cores=%u\n", c->vector.lanes,
        c->scalar.lanes, c->gpsimd.lanes, c->gpsimd_cores);
    put(&t, "core.sbuf.partitions=%u\ncore.sbuf.bytes_per_partition=%llu\ncore.sbuf.usable_bytes_per_partition=%llu\n",
        c->sbuf.partitions, (unsigned long long)c->sbuf.bytes_per_partition,
        (unsigned long long)c->sbuf.usable_bytes_per_partition);
    put(&t, "core.psum.partitions=%u\ncore.psum.banks=%u\ncore.psum.bank_bytes=%llu\n", c->psum.partitions, c->psum.banks,
        (unsigned long long)c->psum.bank_bytes);
    put(&t, "core.dma.engines=%u\ncore.dma.queues_per_engine=%u\ncore.dma.hwdge=%d\n", c->dma.engines,
        c->dma.queues_per_engine, c->dma.hwdge_cost_s > 0);
    const tern_chip_spec *chip = tern_machine_chip(m);
    if (chip)
        put(&t, "chip.cores=%u\nchip.hbm_bytes=%llu\n", chip->cores, (unsigned long long)chip->hbm_bytes);
    else
        put(&t, "chip=none\n");
    return t.len;
}

uint32_t tern_machine_code_fingerprint(const tern_machine *m)
{
    char buf[2048];
    size_t n = tern_machine_code_figures(m, buf, sizeof buf);
    TERN_ASSERT(n < sizeof buf);
    uint32_t crc = tern_crc32(buf, n);
    return crc ? crc : 1; /* 0 means "not recorded" in an executable */
}
