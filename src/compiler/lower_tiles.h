/* Private to the family lowering files (lower_elementwise.c, lower_reduce.c, lower_axis.c, lower_linear.c,
 * lower_norm.c, lower_index.c, lower_layout.c): the tile sizes and the helpers they share (lower_tiles.c: scratch
 * values, strided copies, broadcasts, moving axes innermost and back, tile operations, the elementwise driver). */
#ifndef TERN_COMPILER_LOWER_TILES_H
#define TERN_COMPILER_LOWER_TILES_H

#include "compiler/compile_internal.h"

/* rows per tile: the machine's partitions (every user has its compile_ctx *c) */
#define PARTS ((uint32_t)c->cfg.partitions)
#define CHUNK 2048u       /* columns per elementwise tile */
#define ROW_MAX 8192u     /* columns an axis op holds per partition (fp32: 32 KiB of SBUF per tile) */
#define IDX_BIG 16777216.0f /* 2^24: index arithmetic in fp32 stays exact below it */

#define VE TERN_ENGINE_VECTOR

cc_value *tile_axes_last(compile_ctx *c, cc_value *x, const int *red, cc_value *tmp, uint64_t *rows, uint64_t *cols);
void tile_axis_back(compile_ctx *c, cc_value *y, cc_value *t, int axis);
void tile_bcast_free(compile_ctx *c, cc_value *tmp, cc_value *used);
int tile_const_scalar_in(compile_ctx *c, int k, const char *attr, float *v, int *have);
void tile_copy_nd(compile_ctx *c, cc_value *dst, int64_t dst_off, const int64_t *dst_st, cc_value *src, int64_t src_off,
                  const int64_t *src_st, int rank, const int64_t *dims);
void tile_gather_copy(compile_ctx *c, cc_value *dst, cc_value *src, int64_t src_off, int rank, const int64_t *dims,
                      const int64_t *st);
tern_view tile_new(compile_ctx *c, uint32_t p, uint32_t w, const char *name);
void tile_tmp_free(compile_ctx *c, cc_value *t);
cc_value *tile_tmp_value(compile_ctx *c, cc_value *t, tern_dtype dt, int rank, const int64_t *dims);
void tile_ts(compile_ctx *c, tern_view d, tern_view a, tern_alu_op op0, float s0, tern_alu_op op1, float s1);
void tile_ts_ap(compile_ctx *c, tern_view d, tern_view a, tern_alu_op op0, tern_view s0, tern_alu_op op1, tern_view s1);
void tile_tt(compile_ctx *c, tern_view d, tern_view a, tern_view b, tern_alu_op op);
/* d = f(scale * a) on ScalarE. */
void tile_act(compile_ctx *c, tern_view d, tern_view a, tern_act_func f, float scale);
/* x broadcast (numpy rules) to y's shape: x itself when the shapes match, else a scratch copy in tmp
 * (tile_bcast_free). */
cc_value *tile_bcast(compile_ctx *c, cc_value *x, const cc_value *y, cc_value *tmp);

/* The elementwise driver: a tile program over [p, w] tiles of the flattened operands. */
typedef struct {
    const tern_graph_node *n;
    float a, b, g;   /* op parameters (alpha, beta, gamma, lambd, bias, min, max...) */
    int flag;
    tern_alu_op op;
} ew_ctx;

/* Computes o from in[0..nin) with scratch tiles s[0..2]; all [p, w] fp32. */
typedef void (*ew_fn)(compile_ctx *c, const ew_ctx *x, const tern_view *in, tern_view o, const tern_view *s);
/* y = f(xs...) elementwise; every xs[i] has y's element count (broadcast beforehand). int_tiles: integer tiles
 * (int32) instead of fp32, for the bitwise ops. */
void tile_ew_apply(compile_ctx *c, cc_value *const *xs, int nx, cc_value *y, ew_fn fn, const ew_ctx *ctx, int int_tiles);
/* Refuses (records a failure) a non-float x for a float-only op; returns 0 then. */
int tile_need_float(compile_ctx *c, cc_value *x);

/* lower_tiles.c, the fast special cases' helpers: x seen as [numel / C, C] (rows_cols, flat2d); src viewed with
 * (rank, dims, element strides st) from element off copied into the contiguous dst in one DMA of at most a
 * partition dim and four free dims after merging (zero strides broadcast); x broadcast to out's shape as x
 * itself or a scratch copy in tmp, released with tile_release_tmp. */
void tile_rows_cols(const cc_value *x, uint64_t *rows, uint64_t *cols);
tern_view tile_flat2d(compile_ctx *c, cc_value *x);
void tile_strided_copy(compile_ctx *c, cc_value *dst, uint64_t dst_off, cc_value *src, uint64_t off, int rank,
                       const int64_t *dims, const int64_t *st);
cc_value *tile_broadcast_to(compile_ctx *c, cc_value *x, cc_value *out, cc_value *tmp);
void tile_release_tmp(compile_ctx *c, cc_value *tmp, cc_value *used);

/* lower_elementwise.c: whether cdims is a trailing column of ydims (1 from some axis k > 0 on, equal before);
 * *inner the product of ydims from k on */
int cc_trailing_inner(int yrank, const int64_t *ydims, int crank, const int64_t *cdims, uint64_t *inner);

#endif
