/* Private to lower_extra.c and lower_layout.c: the tile sizes and the helpers they share (scratch values,
 * strided copies, moving axes innermost and back, tile operations), and the layout lowerings lower_extra.c's
 * table dispatches to. */
#ifndef TERN_COMPILER_LOWER_EXTRA_INTERNAL_H
#define TERN_COMPILER_LOWER_EXTRA_INTERNAL_H

#include "compiler/compile_internal.h"

#define PARTS ((uint32_t)c->cfg.partitions) /* rows per tile: the machine's partitions (every user has its cc *c) */
#define CHUNK 2048u       /* columns per elementwise tile */
#define ROW_MAX 8192u     /* columns an axis op holds per partition (fp32: 32 KiB of SBUF per tile) */
#define IDX_BIG 16777216.0f /* 2^24: index arithmetic in fp32 stays exact below it */

#define VE TERN_ENGINE_VECTOR

cc_value *lx_axes_last(cc *c, cc_value *x, const int *red, cc_value *tmp, uint64_t *rows, uint64_t *cols);
void lx_axis_back(cc *c, cc_value *y, cc_value *t, int axis);
void lx_bcast_free(cc *c, cc_value *tmp, cc_value *used);
int lx_const_scalar_in(cc *c, int k, const char *attr, float *v, int *have);
void lx_copy_nd(cc *c, cc_value *dst, int64_t dst_off, const int64_t *dst_st, cc_value *src, int64_t src_off,
                const int64_t *src_st, int rank, const int64_t *dims);
void lx_gather_copy(cc *c, cc_value *dst, cc_value *src, int64_t src_off, int rank, const int64_t *dims,
                    const int64_t *st);
tern_view lx_tile(cc *c, uint32_t p, uint32_t w, const char *name);
void lx_tmp_free(cc *c, cc_value *t);
cc_value *lx_tmp_value(cc *c, cc_value *t, tern_dtype dt, int rank, const int64_t *dims);
void lx_ts(cc *c, tern_view d, tern_view a, tern_alu_op op0, float s0, tern_alu_op op1, float s1);
void lx_ts_ap(cc *c, tern_view d, tern_view a, tern_alu_op op0, tern_view s0, tern_alu_op op1, tern_view s1);
void lx_tt(cc *c, tern_view d, tern_view a, tern_view b, tern_alu_op op);

/* lower_layout.c */
int lx_lower_depth_space(cc *c);
int lx_lower_eyelike(cc *c);
int lx_lower_onehot(cc *c);
int lx_lower_pad(cc *c);
int lx_lower_resize(cc *c);
int lx_lower_tile(cc *c);
int lx_lower_topk(cc *c);
int lx_lower_trilu(cc *c);

#endif
