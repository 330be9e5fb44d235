/* DMA sweep (issue 11): achieved bandwidth of streams of DMA transfers on a trn1 core in timing-only mode, over
 * bytes per partition (64 B .. 64 KiB), partitions (1 .. 128), contiguous or strided HBM rows, and 1 .. 16
 * queues. Each case issues 32 HBM -> SBUF transfers of [partitions, bytes] from Sync, round-robin over the
 * queues, and reports the bytes moved over the time from the first trigger to the last completion, as
 * `dma_<shape>_gbps: X`. scripts/plot_dma.py turns the output into docs/dma_sweep.svg, shown in
 * docs/calibration.md beside the DMA overview's throughput curve. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tern/sim.h"

static tern_instr dma(unsigned parts, unsigned bytes, int strided, unsigned k, unsigned queues)
{
    tern_instr i;
    memset(&i, 0, sizeof i);
    i.opcode = TERN_OP_DMA_COPY;
    i.engine = TERN_ENGINE_SYNC;
    i.wait_sem = i.signal_sem = TERN_SEM_NONE;
    for (int s = 0; s < TERN_INSTR_OPERANDS; s++)
        i.ap[s].offset_reg = TERN_REG_NONE;
    i.queue = (uint8_t)(k % queues);
    tern_ap *d = &i.ap[TERN_AP_DST], *a = &i.ap[TERN_AP_IN0];
    d->mem = TERN_MEM_SBUF;
    a->mem = TERN_MEM_HBM;
    d->dtype = a->dtype = TERN_DTYPE_UINT8;
    d->ndims = a->ndims = 1;
    d->num_partitions = a->num_partitions = (uint16_t)parts;
    d->dims[0].step = a->dims[0].step = 1;
    d->dims[0].num = a->dims[0].num = bytes;
    d->offset = (uint64_t)(k % 2) * bytes; /* two destination buffers in turn: 2 x 64 KiB fits a partition */
    /* contiguous: the rows follow each other in HBM; strided: each row starts 4 rows' length further */
    a->partition_step = (int64_t)bytes * (strided ? 4 : 1);
    a->offset = (uint64_t)k * parts * bytes * (strided ? 4 : 1);
    return i;
}

static double gbps(tern_core *c, unsigned parts, unsigned bytes, int strided, unsigned queues)
{
    enum { N = 32 };
    tern_program p;
    tern_program_init(&p);
    tern_error err;
    for (unsigned k = 0; k < N; k++) {
        tern_instr i = dma(parts, bytes, strided, k, queues);
        if (tern_program_append(&p, &i, &err)) {
            fprintf(stderr, "bench_dma: %s\n", err.msg);
            exit(1);
        }
    }
    tern_run_stats st;
    tern_core_reset_control(c);
    if (tern_core_run(c, &p, &st, &err)) {
        fprintf(stderr, "bench_dma: %s\n", err.msg);
        exit(1);
    }
    tern_program_free(&p);
    return (double)st.dma_bytes / ((double)st.time_ps * 1e-12) / 1e9;
}

int main(void)
{
    tern_core_config cfg;
    tern_error err;
    tern_core *c = NULL;
    tern_core_options o = {0};
    o.mode = TERN_MODE_TIMING_ONLY;
    if (tern_core_config_load("trn1.2xlarge", &cfg, &err) || tern_core_create(&cfg, &o, &c, &err)) {
        fprintf(stderr, "bench_dma: %s\n", err.msg);
        return 1;
    }
    const unsigned parts[5] = {1, 8, 32, 64, 128}, queues[4] = {1, 2, 4, 16};
    for (int s = 0; s < 2; s++)
        for (int q = 0; q < 4; q++)
            for (int pi = 0; pi < 5; pi++)
                for (unsigned b = 64; b <= 65536; b *= 2) {
                    /* the full grid for 128 partitions; fewer partitions on one queue only */
                    if (parts[pi] != 128 && queues[q] != 1)
                        continue;
                    printf("dma_%s_p%u_q%u_b%u_gbps: %.1f\n", s ? "strided" : "contig", parts[pi], queues[q], b,
                           gbps(c, parts[pi], b, s, queues[q]));
                }
    tern_core_free(c);
    return 0;
}
