/* Private to sim: the NeuronCore's state and the helpers every engine's executor shares — resolving access
 * patterns to bytes, gathering an operand into a dense fp32 (or int32) buffer [P][N] and scattering a dense
 * buffer back with the core's rounding. Engines compute on dense buffers; only gather/scatter know layouts. */
#ifndef TERN_SIM_CORE_INTERNAL_H
#define TERN_SIM_CORE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "tern/sim.h"

#define HBM_PAGE_SHIFT 20u /* 1 MiB pages, allocated on first touch */
#define HBM_PAGE_BYTES (1ull << HBM_PAGE_SHIFT)

/* PSUM bank bookkeeping for accumulation groups (per partition, per bank). */
enum { PSUM_BANK_UNTOUCHED = 0, PSUM_BANK_MATMUL = 1, PSUM_BANK_OTHER = 2 };

/* A moving operand already packed as bf16 pairs, or a stationary one as pairs or fp32 panels (matmul.c), valid
 * until SBUF under it is written. `pairs` holds the packed words (an fp32 panel value's bits for panels). */
#define MOV_CACHE_ENTRIES 8
#define STAT_CACHE_ENTRIES 16
typedef struct {
    int valid;
    uint32_t start, parts; /* partitions */
    uint64_t offset, bytes; /* byte range in each partition */
    uint32_t K, N;
    uint32_t *pairs;
    size_t cap;
    uint64_t last_use;
} mov_cache_entry;

typedef struct {
    void *row_refs;       /* destination rows of a direct copy (core.c) */
    size_t row_refs_cap;
    void *row_refs_src;   /* source rows of a parallel direct copy (core.c) */
    size_t row_refs_src_cap;
    float *scratch[6];    /* dense operands, grown on demand (core_scratch) */
    size_t scratch_cap[6];
} core_scratch_set;

struct exec_lane;
void exec_lane_free(struct exec_lane *lane); /* exec_lane.c */

/* The calling thread's scratch set (the committing thread's, or a pool worker's: exec_lane.c). */
core_scratch_set *core_lane_scratch(tern_core *core);
/* 1 while the calling thread runs an instruction of the background lane. */
int core_on_lane(void);
void core_set_lane(int on);
/* May an instruction split its work over the pool's threads here? Not a queued one the committing thread runs while
 * it waits (the workers are busy with other queued work, and waiting for one cost more than the split saved:
 * docs/performance.md, session 21); a worker's split runs inline anyway. */
int core_may_split(void);

/* What became of lazily broadcast PSUM regions (counted per core). */
enum { PSUM_LAZY_RECORDED, PSUM_LAZY_ACCUMULATED, PSUM_LAZY_READ, PSUM_LAZY_OVERWRITTEN, PSUM_LAZY_WRITTEN_OUT,
       PSUM_LAZY_KINDS };

typedef struct {
    int on;
    uint32_t p0, np; /* partitions [p0, p0 + np) */
    uint64_t off;    /* byte offset of the row within each partition's PSUM row */
    uint32_t n;      /* fp32 columns */
    uint32_t col0;   /* where they start in the bank's row buffer (a region cut by a multiply over its first columns) */
} psum_lazy_region;

struct tern_core {
    tern_core_config cfg;
    tern_core_options opts;
    uint8_t *sbuf;      /* partitions * sbuf_pitch */
    size_t sbuf_pitch;  /* host bytes from one SBUF partition's row to the next (onchip_host_pitch, core.c) */
    uint8_t *psum;      /* partitions * psum_pitch */
    size_t psum_pitch;  /* host bytes from one PSUM partition's row to the next */
    uint8_t *psum_bank_state; /* psum_banks * partitions, bank-major: who wrote last (PSUM_BANK_*) */
    /* A bank whose rows all hold one fp32 row (a bias broadcast by a K = 1 multiply of a uniform stationary) is kept
     * as that row until something else touches the bank (psum_lazy_*, psum_lazy.c), and the accumulating multiply that
     * follows adds its sums to the row instead of reading the PSUM rows. One region per bank. */
    psum_lazy_region *psum_lazy; /* psum_banks */
    float *psum_lazy_rows;       /* psum_banks * psum_bank_bytes / 4: each region's row */
    unsigned psum_lazy_live;
    uint64_t psum_lazy_count[PSUM_LAZY_KINDS]; /* what happened to them, for the tests */
    uint8_t **hbm_pages;
    uint64_t hbm_page_count;
    uint32_t *semaphores;
    int32_t *registers; /* TERN_ENGINE_COUNT * num_registers */
    /* The PE array's stationary operand, as exact fp32 values [K][M], and its shape and dtype. */
    float *stationary;
    uint32_t stat_k, stat_m;
    uint8_t stat_dtype;
    int stat_loaded;
    uint32_t *stat_pairs; /* bf16 pairs for the dot-product path (matmul.c), valid when stat_fast: the core's own
                             buffer or a stationary cache entry's */
    uint32_t *stat_pairs_own;
    mov_cache_entry stat_cache[STAT_CACHE_ENTRIES]; /* packed stationary operands, by SBUF place (as mov_cache) */
    int stat_cache_live;
    int stat_fast;
    int stat_f32;         /* `stationary` holds the fp32 form */
    float *stat_panels;   /* the stationary in panels for the fp32 chain on bf16 rows (matmul.c), valid when stat_pan:
                             the core's own buffer or a stationary cache entry's */
    float *stat_panels_own;
    int stat_pan;
    /* A bf16 stationary latched for the fp32 chain is packed into panels only when a multiply needs them
     * (stat_materialize): a transpose (identity moving operand) reads its rows in place. Until then stat_lazy, with
     * the rows, their SBUF place (partitions [stat_p0, stat_p0 + stat_k) x bytes [stat_b0, stat_b1)) and the cache
     * entry the panels go to (NULL: stat_panels_own); a write there packs them first (sbuf_range_written). */
    int stat_lazy;
    const uint16_t *stat_rows;
    size_t stat_stride;
    mov_cache_entry *stat_entry;
    uint32_t stat_p0;
    int64_t stat_b0, stat_b1;
    /* The last moving operand found to be the identity (a transpose's), by SBUF place, until written there. */
    int ident_valid;
    uint32_t ident_p0, ident_k;
    int64_t ident_b0;
    int mm_dp;            /* bf16 operands multiply through the dot-product kernel (matmul_choose_kernel), else the
                             fp32 chain; fixed when the core is created */
    int mm_post;          /* the multiply now executing may leave its parts running (pool_post): the background lane
                             joins the job before anything touches its bytes (exec_lane.c) */
    unsigned long mm_job; /* what it left running: pool_post's generation, 0 if nothing */
    const float *mm_panels; /* the stationary panels it reads */
    uint32_t *mov_pairs;  /* scratch: moving operand as bf16 pairs */
    size_t mov_pairs_cap;
    uint16_t *u16_scratch;
    size_t u16_cap;
    /* Scratch of the copy and gather/scatter paths, one set per host thread: the committing thread's, and one per
     * pool worker for the background lane's instructions (exec_lane.c), made with the lane. */
    core_scratch_set scratch_main;
    core_scratch_set *scratch_workers;
    unsigned n_scratch_workers;
    struct exec_lane *lane; /* the background lane (exec_lane.c), created on first use */
    struct tern_pool *pool; /* created on first use */
    mov_cache_entry mov_cache[MOV_CACHE_ENTRIES];
    int mov_cache_live;   /* valid entries */
    uint64_t mov_cache_tick;
};

/* Per-instruction execution context: which engine, its index in the stream and the count of instructions the
 * engine has executed (the stochastic-rounding stream depends only on these, never on engine interleaving). */
typedef struct {
    tern_engine engine;
    size_t pc;
    uint64_t seq; /* instructions executed so far by this engine */
    tern_run_stats *stats;
    /* An activation's input (in0) that is PSUM kept as one broadcast row (psum_lazy_before): that row, read for
     * every partition; NULL otherwise. Set where the instruction commits, so a queued one keeps it. */
    const float *lazy_in0;
} exec_ctx;

/* Short description "vector #12 (tensor_tensor)" for messages. */
void instr_label(const exec_ctx *cx, const tern_instr *ins, char *buf, size_t len);

const char *operand_name(int slot); /* "dst", "in0", ... */

/* Resolve the register offset of an AP (elements) for this engine. */
int64_t ap_reg_offset(const tern_core *core, tern_engine e, const tern_ap *ap);

/* The element offsets an AP's free dimensions reach, relative to its first element: [*lo, *hi] (lo <= 0 <= hi). */
void ap_extent(const tern_ap *ap, int64_t *lo, int64_t *hi);

/* Check that every byte the AP touches lies inside its memory (after the register offset). */
tern_status ap_check_bounds(const tern_core *core, tern_engine e, const tern_ap *ap, const char *what,
                            tern_error *err);

/* A scratch buffer of at least n floats (slot 0..5), owned by the core. NULL on allocation failure. */
float *core_scratch(tern_core *core, int slot, size_t n);

/* Gather the AP's elements as fp32 into out[p * N + i], p < num_partitions, N = free elems. */
tern_status ap_gather_f32(tern_core *core, tern_engine e, const tern_ap *ap, float *out, tern_error *err);
/* Gather raw integer values (sign- or zero-extended; floats are converted by truncation toward zero). */
tern_status ap_gather_i32(tern_core *core, tern_engine e, const tern_ap *ap, int32_t *out, tern_error *err);
/* Write in[p * N + i] to the AP, converting fp32 -> dtype with the core's rounding; sr_stream identifies the
 * instruction for stochastic rounding. */
tern_status ap_scatter_f32(tern_core *core, tern_engine e, const tern_ap *ap, const float *in, uint64_t sr_stream,
                           tern_error *err);
/* The same from rows instead of a dense buffer: element k of the pattern's dense order (partition-major) comes from
 * in[k / row_n * row_stride + k % row_n], row_n the pattern's elements per partition; row_n 0: dense. */
tern_status ap_scatter_f32_rows(tern_core *core, tern_engine e, const tern_ap *ap, const float *in, size_t row_n,
                                size_t row_stride, uint64_t sr_stream, tern_error *err);
/* Write integers; float destinations get (float)value, integer destinations wrap to their width. */
tern_status ap_scatter_i32(tern_core *core, tern_engine e, const tern_ap *ap, const int32_t *in, tern_error *err);

/* An on-chip AP that is one contiguous run per partition (unit step, after merging dimensions): the host address
 * of partition 0's run (register offset applied), its length in elements and the bytes from one partition's run
 * to the next. NULL when the pattern is anything else (or lies in HBM). */
uint8_t *ap_onchip_rows(const tern_core *core, tern_engine e, const tern_ap *ap, size_t *elems, size_t *pstride);
/* A cast from fp32 rows on chip (one contiguous run per partition) into a float pattern in another memory whose runs
 * tile those rows (an SBUF tile stored to HBM as bf16): converted from the rows in place, the bits of gathering them
 * and scattering the copy. 1 if it applied (*st its status), 0 if the operands are not of that form. */
int ap_cast_rows(tern_core *core, tern_engine e, const tern_ap *dst, const tern_ap *src, uint64_t sr_stream,
                 tern_status *st, tern_error *err);
/* The reverse widening: a pattern in another memory (an HBM mask in uint8) copied into fp32 rows on chip whose
 * rows its runs tile, converted straight into the rows. 1 if it applied (*st its status). */
int ap_widen_into_rows(tern_core *core, tern_engine e, const tern_ap *dst, const tern_ap *src, tern_status *st,
                       tern_error *err);
/* Two sets of on-chip rows, one per partition of x and of y: x's bytes [xr, xr + xbytes) in its first partition and
 * the same offsets in the others (rows xs apart), y's likewise. 0: the same rows; 1: no byte of one lies in the other
 * (other memories, partitions apart, or byte ranges apart, since offsets within a partition are the same in every
 * partition); 2: they overlap otherwise. */
int onchip_rows_relation(const tern_core *core, const tern_ap *x, const uint8_t *xr, size_t xs, size_t xbytes,
                         const tern_ap *y, const uint8_t *yr, size_t ys, size_t ybytes);
/* An on-chip operand whose elements in each partition form at most two dimensions: element (r, c) of partition p at
 * base + p * pstride + (r * sr + c * sc) * element size, r < nr, c < nc (steps may be zero or negative); NULL
 * otherwise. */
uint8_t *ap_onchip_2d(const tern_core *core, tern_engine e, const tern_ap *ap, uint32_t *nr, int32_t *sr, uint32_t *nc,
                      int32_t *sc, size_t *pstride);
/* Copy the elements of src to dst bit for bit (same element size), in dense order. */
tern_status ap_copy_raw(tern_core *core, tern_engine e, const tern_ap *dst, const tern_ap *src, tern_error *err);
/* Invalidate cached data derived from SBUF bytes an AP (or a raw range) is about to change. */
void sbuf_written(tern_core *core, tern_engine e, const tern_ap *ap);
void sbuf_range_written(tern_core *core, uint32_t p0, uint32_t np, int64_t b0, int64_t b1);
/* Pack a lazily latched stationary now (exec_tensor.c): SBUF under it is about to change. */
void stat_materialize(tern_core *core);

/* Mark PSUM banks touched by an AP as written by a matmul or by another engine. */
void psum_mark(tern_core *core, const tern_ap *ap, int by_matmul);
/* True when every bank the AP touches was last written by a matmul group. */
int psum_is_matmul_group(const tern_core *core, const tern_ap *ap);
/* The first and last PSUM banks the AP's bytes touch. */
void psum_banks_of(const tern_core *c, const tern_ap *ap, uint32_t *first, uint32_t *last);
/* Is the AP's free pattern one contiguous run per partition? */
int ap_contiguous(const tern_ap *a);
/* Lazily broadcast PSUM rows (struct tern_core's psum_lazy, psum_lazy.c): record one (0 if the region does not
 * qualify: outside one bank, or not plain fp32 rows); the row of the region exactly under an operand (NULL if none);
 * drop a region a multiply accumulated onto (psum_lazy_consumed), or drop or cut those an overwriting multiply's
 * destination covers, where it executes (psum_lazy_overwritten); write a region's rows out (psum_lazy_flush_dst) or
 * every region's (psum_lazy_flush_all). psum_lazy_before, where an instruction commits, writes out every region an
 * operand of it touches, except the one exactly under an accumulating multiply's destination (the multiply takes
 * it), those an overwriting multiply's destination drops or cuts, and the one exactly under an activation's input,
 * whose row it returns (exec_ctx's lazy_in0). */
int psum_lazy_record(tern_core *core, tern_engine e, const tern_ap *d, const float *row, uint32_t n);
const float *psum_lazy_row(tern_core *core, tern_engine e, const tern_ap *d);
void psum_lazy_consumed(tern_core *core, tern_engine e, const tern_ap *d);
void psum_lazy_overwritten(tern_core *core, tern_engine e, const tern_ap *d);
void psum_lazy_flush_dst(tern_core *core, tern_engine e, const tern_ap *d);
void psum_lazy_flush_all(tern_core *core);
const float *psum_lazy_before(tern_core *core, tern_engine e, const tern_instr *ins);

/* Executors: one entry point per opcode, exec_op_<ID>, declared here from the instruction table and defined in
 * the file of the opcode's FAMILY (pe: exec_tensor.c, vector: exec_vector.c, activation: exec_scalar.c, gpsimd
 * and text: exec_gpsimd.c, dma: exec_dma.c). The CONTROL family has none: the scheduler runs sequencer control
 * itself. schedule.c's per-opcode table of them is generated from the same rows, so a row whose family lacks its
 * entry point does not link. Each asserts what the rules guarantee (exec_assert_*), then validates what only run
 * time can know (register-addressed operands). */
typedef tern_status (*exec_fn)(tern_core *core, const exec_ctx *cx, const tern_instr *ins, tern_error *err);
#define OP(id, name, family, flags, engines, operands, cost, sem)                                                   \
    tern_status exec_op_##id(tern_core *core, const exec_ctx *cx, const tern_instr *ins, tern_error *err);
#include "tern/isa_table.def"
#undef OP

/* Entry assertions of an executor, for what rules_check_instr guaranteed before the run (they never fire on a
 * validated program; a failure is a simulator bug, reported by tern_assert_fail): the opcode is of `family`
 * (dispatch follows the FAMILY column), its engine field matches the stream and is one the table allows. */
void exec_assert_entry(const exec_ctx *cx, const tern_instr *ins, tern_isa_family family);
/* ... and operand `slot` is used as rules_check_ap leaves it: 1..4 free dimensions with a known dtype, in a memory
 * of `mems` (bit mask of 1u << tern_mem), 1..partitions partitions (on chip), inside the core when its address is
 * static (a register-addressed one is bounds-checked at run time, with an error). */
void exec_assert_operand(const tern_core *core, const tern_instr *ins, int slot, unsigned mems);
#define EXEC_MEM_BIT(m) (1u << (m))
#define EXEC_ONCHIP (EXEC_MEM_BIT(TERN_MEM_SBUF) | EXEC_MEM_BIT(TERN_MEM_PSUM))
#define EXEC_ANY_MEM (EXEC_ONCHIP | EXEC_MEM_BIT(TERN_MEM_HBM))

/* Shared fp32 semantics of ALU operators (VectorE/GpSimd/ScalarE tensor_scalar): a op b. */
float alu_apply_f32(tern_alu_op op, float a, float b);
int32_t alu_apply_i32(tern_alu_op op, int32_t a, int32_t b);
int alu_is_bitwise(tern_alu_op op);
/* is_equal .. is_le: a 1.0 or 0.0 result (the enum keeps them adjacent) */
int alu_is_compare(unsigned op);
/* x[i] = x[i] op y[i]; and x[i] = x[i] op s (reverse: s op x[i]); bit-identical to alu_apply_f32. */
void alu_apply_f32_vv(tern_alu_op op, float *x, const float *y, size_t n);
void alu_apply_f32_vs(tern_alu_op op, float *x, float s, int reverse, size_t n);
/* The scalar_tensor_tensor of a window: for p < P and i = r * nc + c < nr * nc, dst[p * ds + i] =
 * op1(op0(src[p * ps + r * sr + c * sc], s[p]), acc[p * as + i]) (s NULL: imm for every p; each operator's operands
 * swapped by its rev flag), with alu_apply_f32_vs's and alu_apply_f32_vvr's bits; dst may be acc itself, and must
 * overlap src nowhere. 0 (nothing written) unless op0 and op1 are each add, subtract or mult. */
int alu_stt_window(tern_alu_op op0, int rev0, tern_alu_op op1, int rev1, const float *s, float imm, uint32_t P,
                   const float *src, size_t ps, uint32_t nr, ptrdiff_t sr, uint32_t nc, ptrdiff_t sc, const float *acc,
                   size_t as, float *dst, size_t ds);
/* A chain of scalar_tensor_tensor taps into one fp32 accumulator (a depthwise convolution's kernel offsets, queued
 * one after another): tap t reads the window src + p * ps + r * sr + c * sc of partition p, row r < nr, column
 * c < nc, and its scalar s[p] (or imm when s is NULL). alu_stt_window_chain applies the taps in turn to each
 * element, acc = op1(op0(window_t, scalar_t), acc) with alu_stt_window's rules, the accumulator read once and
 * written once: the values of running the taps one instruction after another. 0 (nothing written) for operators
 * other than add, subtract and mult, or more than STT_CHAIN_MAX taps. The windows must not overlap the
 * accumulator. */
#define STT_CHAIN_MAX 32
typedef struct {
    const float *src;
    ptrdiff_t sr, sc;
    const float *s;
    float imm;
} stt_tap;
int alu_stt_window_chain(tern_alu_op op0, int rev0, tern_alu_op op1, int rev1, const stt_tap *taps, unsigned n,
                         uint32_t P, size_t ps, uint32_t nr, uint32_t nc, float *acc, size_t as);
/* Does `next` continue `prev` as one more tap of a chain (exec_vector.c): both scalar_tensor_tensor on one engine
 * with the same operators, accumulating into the same fp32 destination, which is each one's second input? */
int stt_chainable(const tern_instr *prev, const tern_instr *next);
/* Execute a chain of n such instructions, as executing them one after another would (exec_vector.c). */
tern_status exec_stt_chain(tern_core *core, const exec_ctx *cx, const tern_instr *const *ins, unsigned n,
                           tern_error *err);
/* tensor_reduce's chain of max or min over one NaN-free row, computed out of order with its bits (alu.c); 0 (nothing
 * written) for a row holding a NaN or another operator. */
int alu_reduce_minmax(tern_alu_op op, const float *x, size_t n, float *out, int avx512); /* avx512: may use it */
/* select's rows of 4-byte elements: d[i] = (a[i] & mask) ? b[i] : c[i] (bits); d may be a, b or c itself. */
void alu_affine_select_row16(uint16_t *y, const uint16_t *x, size_t n, uint32_t base, uint32_t step, int32_t lo,
                             int32_t hi, int inv, uint16_t fill);
void alu_affine_select_row32(uint32_t *y, const uint32_t *x, size_t n, uint32_t base, uint32_t step, int32_t lo,
                             int32_t hi, int inv, uint32_t fill);
/* 1 when the host's vector paths may use AVX-512: the number conversions' level (num/convert.c: F, BW, VL and BF16,
 * capped by TERN_SIMD), which the engines' own AVX-512 loops follow so that one setting reaches every path. */
int core_simd_avx512(void);
/* bn_stats' chains (exec_vector.c) for eight rows at once with AVX-512 (x86-64 hosts whose SIMD level is AVX-512);
 * 0 when a row holds a NaN (nothing usable written). */
int alu_bn_chains8(const float *const rows[8], size_t n, const double cnt[2], double sum[2][8], double mean[2][8],
                    double m2[2][8]);
void alu_select_bits(uint32_t *d, const uint32_t *a, const uint32_t *b, const uint32_t *c, uint32_t mask, size_t n);
/* x[i] = op(x[i], y[i]), or op(y[i], x[i]) when reverse: the bits of alu_apply_f32 element by element */
void alu_apply_f32_vvr(tern_alu_op op, float *x, const float *y, int reverse, size_t n);

/* Seed for the stochastic-rounding stream of one instruction. */
uint64_t sr_stream_of(const exec_ctx *cx);

/* The core's host thread pool (created on first use; exec_tensor.c). */
struct tern_pool *core_pool(tern_core *core);

#endif
