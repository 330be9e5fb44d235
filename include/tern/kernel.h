/* tern kernel layer: building NeuronCore programs the way NKI kernels are written. A kernel declares HBM
 * tensors (its inputs and outputs), allocates SBUF and PSUM tiles (a partition dimension plus up to four free
 * dimensions), takes views of them (slices, strides), and calls one function per ISA instruction or a
 * convenience (load, store, matmul into PSUM, elementwise). The builder
 *   - picks the engine and DMA queue where the caller does not,
 *   - tracks every read and write of every region and turns cross-engine dependencies (read-after-write,
 *     write-after-read, write-after-write) into semaphore waits, as the Neuron compiler does for NKI kernels:
 *     each engine and each DMA queue counts its completed instructions on its own semaphore, and a consumer
 *     waits for the producer's count (waits an engine already satisfied are elided),
 *   - allocates SBUF/PSUM with reuse (a freed region's pending accesses carry over to the next tile placed
 *     there, so reuse is always safe) and reports capacity errors at build time,
 *   - checks shapes, dtypes and engine rules at build time wherever they are knowable.
 * The result is a tern_program plus an I/O table; it runs on a simulated core (sim), saves as a program file
 * and reloads to give identical results. */
#ifndef TERN_KERNEL_H
#define TERN_KERNEL_H

#include <stddef.h>
#include <stdint.h>

#include "tern/base.h"
#include "tern/isa.h"
#include "tern/num.h"
#include "tern/sim.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tern_kernel tern_kernel;

#define TERN_KERNEL_MAX_DIMS 5 /* HBM tensors; tiles have a partition dim + up to 4 free dims */

/* A view: a memory region seen through an access pattern. Value type; cheap to copy. For SBUF/PSUM views
 * ap.start_partition/num_partitions is the partition range and ap.dims the free pattern; for HBM views the
 * outermost tensor dimension maps to partitions (ap.partition_step) when used with on-chip data. */
typedef struct {
    int region;  /* builder's region id (a tile or an HBM tensor); -1 = invalid view */
    tern_ap ap;
} tern_view;

/* A kernel tensor's role is the program's tern_tensor_kind (isa.h: input, output, scratch, constant), one enum for
 * both; the kernel builder's older names stay as aliases, so source written against them still compiles. */
typedef tern_tensor_kind tern_kio_kind;
#define TERN_KIO_INPUT TERN_TENSOR_INPUT
#define TERN_KIO_OUTPUT TERN_TENSOR_OUTPUT
#define TERN_KIO_SCRATCH TERN_TENSOR_SCRATCH
#define TERN_KIO_CONSTANT TERN_TENSOR_CONSTANT

/* One kernel input/output (an HBM tensor). */
typedef struct {
    char name[48];
    tern_kio_kind kind;
    tern_dtype dtype;
    unsigned ndims;
    uint64_t shape[TERN_KERNEL_MAX_DIMS];
    uint64_t hbm_addr;
    uint64_t bytes;
} tern_kio;

/* Create a builder for the given core geometry. */
tern_status tern_kernel_create(const tern_core_config *cfg, const char *name, tern_kernel **out, tern_error *err);
void tern_kernel_free(tern_kernel *k);

/* The first error recorded while building (calls after an error are no-ops and return invalid views), so a
 * kernel can be written without checking every call: check once with tern_kernel_status at the end. */
tern_status tern_kernel_status(const tern_kernel *k, tern_error *err);

/* ---- HBM tensors ---- */
/* Inputs and outputs declared after this call whose size is at least `align` bytes start at a multiple of it (a
 * power of two >= 64; 0 = only the 64 bytes every HBM tensor gets). The trainer asks for the simulator's HBM page
 * (tern_core_hbm_page_bytes) so that its carried weights move between steps without a copy (tern_rt_carry). */
void tern_kernel_set_io_align(tern_kernel *k, uint64_t align);
tern_view tern_kernel_hbm_tensor(tern_kernel *k, const char *name, tern_kio_kind kind, tern_dtype dt, unsigned ndims,
                                 const uint64_t *shape);
/* A constant tensor (weights): data in dt, row-major, copied; placed in HBM by whoever loads the program. */
tern_view tern_kernel_constant(tern_kernel *k, const char *name, tern_dtype dt, unsigned ndims, const uint64_t *shape,
                               const void *data);
/* As tern_kernel_constant, but the kernel takes data (malloc'd, the tensor's bytes long) instead of copying it, so
 * a large weight is never held twice; data is freed on failure too. */
tern_view tern_kernel_constant_take(tern_kernel *k, const char *name, tern_dtype dt, unsigned ndims,
                                    const uint64_t *shape, void *data);
/* The data of a constant tensor (NULL for other tensors). */
const void *tern_kernel_constant_data(const tern_kernel *k, const char *name);
/* Hands the data of io tensor i (a constant) to the caller, who frees it; the kernel keeps the tensor without data
 * (NULL for other tensors or when already handed over). */
void *tern_kernel_constant_steal(tern_kernel *k, size_t i);
/* Row-major 2-D helper: rows x cols. */
tern_view tern_kernel_input2d(tern_kernel *k, const char *name, tern_dtype dt, uint64_t rows, uint64_t cols);
tern_view tern_kernel_output2d(tern_kernel *k, const char *name, tern_dtype dt, uint64_t rows, uint64_t cols);

/* ---- on-chip tiles ---- */
/* Allocate [partitions, free...] in SBUF or PSUM (row-major free dims). PSUM tiles are placed within one bank
 * when they fit in one. Errors (capacity, shape) are recorded and an invalid view returned. */
tern_view tern_kernel_tile(tern_kernel *k, tern_mem mem, tern_dtype dt, uint32_t partitions, unsigned nfree,
                           const uint32_t *free_shape, const char *name);
tern_view tern_kernel_sbuf(tern_kernel *k, tern_dtype dt, uint32_t partitions, uint32_t free, const char *name);
tern_view tern_kernel_psum(tern_kernel *k, tern_dtype dt, uint32_t partitions, uint32_t free, const char *name);
/* Release a tile; its space is reused by later tiles (with its pending accesses carried over). */
void tern_kernel_release(tern_kernel *k, tern_view tile);

/* ---- views ---- */
/* Slice dimension `dim` (0 = partitions / outermost HBM dim) to [start, stop) with step. */
tern_view tern_view_slice(tern_kernel *k, tern_view v, unsigned dim, uint64_t start, uint64_t stop, int64_t step);
/* Rows [r0, r1) and columns [c0, c1) of a 2-D view (partition x free, or HBM rows x cols). */
tern_view tern_view_block(tern_kernel *k, tern_view v, uint64_t r0, uint64_t r1, uint64_t c0, uint64_t c1);
/* Same bytes, another dtype of the same size (bitcast). */
tern_view tern_view_bitcast(tern_kernel *k, tern_view v, tern_dtype dt);
/* The absent view, for optional operands (bias, scale, reduce output...). */
tern_view tern_view_none(void);

/* Rank and size of each dimension (dim 0 = partitions for tiles). */
unsigned tern_view_rank(const tern_view *v);
uint64_t tern_view_dim(const tern_view *v, unsigned dim);

/* ---- instructions: one call per ISA instruction (engine chosen by the builder unless given) ---- */
#define TERN_ENGINE_AUTO ((tern_engine)-1)

void tern_kernel_load_stationary(tern_kernel *k, tern_view stationary);
void tern_kernel_multiply_moving(tern_kernel *k, tern_view dst_psum, tern_view moving, int accumulate);
void tern_kernel_transpose_pe(tern_kernel *k, tern_view dst_psum, tern_view src);
void tern_kernel_tensor_tensor(tern_kernel *k, tern_engine e, tern_view dst, tern_view a, tern_view b, tern_alu_op op);
void tern_kernel_tensor_scalar(tern_kernel *k, tern_engine e, tern_view dst, tern_view a, tern_alu_op op0, float s0,
                               tern_alu_op op1, float s1);
/* tensor_scalar with per-partition [P,1] scalars (pass an invalid view, region -1, for an immediate). */
void tern_kernel_tensor_scalar_ap(tern_kernel *k, tern_engine e, tern_view dst, tern_view a, tern_alu_op op0,
                                  tern_view s0, float s0_imm, tern_alu_op op1, tern_view s1, float s1_imm,
                                  unsigned rev_flags);
void tern_kernel_scalar_tensor_tensor(tern_kernel *k, tern_view dst, tern_view a, tern_alu_op op0, float s0,
                                      tern_alu_op op1, tern_view b);
/* scalar_tensor_tensor with a per-partition [P,1] scalar s0 (or the immediate when s0 is tern_view_none()). */
void tern_kernel_scalar_tensor_tensor_ap(tern_kernel *k, tern_view dst, tern_view a, tern_alu_op op0, tern_view s0,
                                         float s0_imm, tern_alu_op op1, tern_view b);
void tern_kernel_tensor_reduce(tern_kernel *k, tern_view dst, tern_view a, tern_alu_op op, unsigned axes, int negate);
void tern_kernel_tensor_copy(tern_kernel *k, tern_engine e, tern_view dst, tern_view src);
void tern_kernel_tensor_copy_predicated(tern_kernel *k, tern_view dst, tern_view src, tern_view pred, int reverse);
void tern_kernel_memset(tern_kernel *k, tern_engine e, tern_view dst, float value);
void tern_kernel_select(tern_kernel *k, tern_view dst, tern_view pred, tern_view on_true, tern_view on_false);
void tern_kernel_bn_stats(tern_kernel *k, tern_view dst, tern_view src);
void tern_kernel_bn_aggr(tern_kernel *k, tern_view dst, tern_view src);
void tern_kernel_reciprocal(tern_kernel *k, tern_view dst, tern_view src);
void tern_kernel_transpose_ve(tern_kernel *k, tern_view dst, tern_view src);
void tern_kernel_max8(tern_kernel *k, tern_view dst, tern_view src);
void tern_kernel_tensor_tensor_scan(tern_kernel *k, tern_view dst, tern_view a, tern_view b, tern_alu_op op0,
                                   tern_alu_op op1, float initial);
/* ScalarE: dst = func(src * scale + bias); bias/scale_ap/reduce_out may be invalid views (region -1). */
void tern_kernel_activation(tern_kernel *k, tern_view dst, tern_view src, tern_act_func func, float scale,
                            tern_view bias, tern_view scale_ap, tern_view reduce_out);
void tern_kernel_iota(tern_kernel *k, tern_view dst, int32_t base, int32_t channel_multiplier);
void tern_kernel_affine_select(tern_kernel *k, tern_view dst, tern_view src, tern_alu_op cmp, int32_t base,
                               int32_t channel_multiplier, const int32_t *steps, float on_false);
void tern_kernel_partition_reduce(tern_kernel *k, tern_view dst, tern_view src, tern_alu_op op);
/* GpSimd text conversions (ONNX string tensors): numbers [P, N] fp32 <-> text [P, N * cell] uint8 cells of `cell`
 * bytes (NUL-padded UTF-8). text_parse: Python float() grammar, numpy's rounding; text_format: numpy's str(). */
void tern_kernel_text_parse(tern_kernel *k, tern_view dst_numbers, tern_view src_text, unsigned cell);
void tern_kernel_text_format(tern_kernel *k, tern_view dst_text, tern_view src_numbers, unsigned cell);
/* DMA: copy between any of HBM and SBUF (queue chosen round-robin unless queue >= 0). */
void tern_kernel_dma_copy(tern_kernel *k, tern_view dst, tern_view src, int queue);
/* The same DMA triggered from engine e's instruction stream (Sync, Scalar, GpSimd...): it then waits only in that
 * engine's order, e.g. weight loads from a mostly idle engine run ahead of the Sync stream. A queue is fed by one
 * engine; the automatic choice (queue -1) keeps the last quarter of the queues for engines other than Sync. */
void tern_kernel_dma_copy_on(tern_kernel *k, tern_engine e, tern_view dst, tern_view src, int queue);
void tern_kernel_dma_gather(tern_kernel *k, tern_view dst, tern_view table, tern_view indices, int queue);
/* table[indices[p], :] = src[p, :]: the write side of dma_gather (rows in partition order; of duplicate indices the
 * last partition's row stays). A 2-D HBM table [rows, cols] is indexed by row; indices int32 [P, 1] in SBUF. */
void tern_kernel_dma_scatter(tern_kernel *k, tern_view table, tern_view src, tern_view indices, int queue);
/* A raw instruction (advanced): the builder adds its dependency waits and completion signal. `reads` and
 * `writes` are the views it touches. */
void tern_kernel_emit(tern_kernel *k, const tern_instr *ins, const tern_view *reads, unsigned nreads,
                      const tern_view *writes, unsigned nwrites);

/* ---- conveniences ---- */
void tern_kernel_load(tern_kernel *k, tern_view dst_sbuf, tern_view src_hbm);
void tern_kernel_store(tern_kernel *k, tern_view dst_hbm, tern_view src_sbuf);
/* dst_psum[M,N] (+)= stationary[K,M]^T @ moving[K,N] (a LoadStationary + MultiplyMoving pair). */
void tern_kernel_matmul(tern_kernel *k, tern_view dst_psum, tern_view stationary, tern_view moving, int accumulate);

/* ---- results ---- */
/* The program built so far (owned by the kernel). */
const tern_program *tern_kernel_program(const tern_kernel *k);
size_t tern_kernel_io_count(const tern_kernel *k);
const tern_kio *tern_kernel_io(const tern_kernel *k, size_t i);
const tern_kio *tern_kernel_io_find(const tern_kernel *k, const char *name);
/* Bytes of HBM the kernel's tensors occupy. */
uint64_t tern_kernel_hbm_bytes(const tern_kernel *k);
/* Peak SBUF/PSUM bytes per partition in use. */
uint64_t tern_kernel_sbuf_peak(const tern_kernel *k);

/* ---- programs on disk ---- */
/* Save the program with its interface tensors: assembly text if the path ends in .s, else the binary format. */
tern_status tern_kernel_save(const tern_kernel *k, const char *path, tern_error *err);
/* A kernel around an existing program (saved, assembled or decoded): its interface tensors can be written and
 * read and it can run; it cannot be extended. */
tern_status tern_kernel_from_program(const tern_core_config *cfg, const tern_program *prog, tern_kernel **out,
                                     tern_error *err);
/* Load a program file (binary or assembly) as a kernel. */
tern_status tern_kernel_open(const tern_core_config *cfg, const char *path, tern_kernel **out, tern_error *err);

/* ---- running ---- */
/* Write host data (in the tensor's dtype, row-major) to a named input; read an output likewise. */
tern_status tern_kernel_write(const tern_kernel *k, tern_core *core, const char *name, const void *data, size_t bytes,
                              tern_error *err);
tern_status tern_kernel_read(const tern_kernel *k, tern_core *core, const char *name, void *data, size_t bytes,
                             tern_error *err);
/* Convenience with fp32 host data converted to/from the tensor's dtype (RNE). */
tern_status tern_kernel_write_f32(const tern_kernel *k, tern_core *core, const char *name, const float *data,
                                  size_t count, tern_error *err);
tern_status tern_kernel_read_f32(const tern_kernel *k, tern_core *core, const char *name, float *data, size_t count,
                                 tern_error *err);
/* Run on a core: the kernel's constants are written to HBM, the core's semaphores and registers reset (the
 * builder's waits count from 0, whatever ran on the core before), then the program runs. SBUF, PSUM and HBM keep
 * their contents. */
tern_status tern_kernel_run(const tern_kernel *k, tern_core *core, tern_run_stats *stats, tern_error *err);

#ifdef __cplusplus
}
#endif
#endif
