/* Private to sim: the hardware rules an instruction must satisfy, checked before a program runs (and again at
 * run time for operands whose address depends on a register). Generic rules live in rules.c; each opcode's own
 * rules are its check_op_<ID> entry point, in the file of its family (see below). Every violation names the
 * instruction, the operand, the rule and the value. */
#ifndef TERN_SIM_RULES_H
#define TERN_SIM_RULES_H

#include "sim/core_internal.h"

/* Every rule for one instruction of a stream of `count` instructions. */
tern_status rules_check_instr(const tern_core *core, const exec_ctx *cx, const tern_instr *ins, size_t count,
                              tern_error *err);

/* Memory-reach flags for rules_check_ap. */
enum { REACH_SBUF = 1, REACH_PSUM = 2, REACH_HBM = 4 };

/* Generic rules of one operand slot: used (ndims 1..4), dtype known, memory in `reach`, on-chip partition range
 * and start-partition rule (compute engines), bounds when the address is static. */
tern_status rules_check_ap(const tern_core *core, const exec_ctx *cx, const tern_instr *ins, int slot, unsigned reach,
                           tern_error *err);

/* The size rule of one operand slot (docs/isa-semantics.md, "Access-pattern size"): element count within
 * TERN_AP_MAX_ELEMS (checked math, so a count that wraps 64 bits is refused, not taken as small), the byte span
 * the steps and counts reach (checked math) no larger than the memory it addresses (bytes per partition on chip,
 * HBM for HBM), and a static offset inside that memory. Holds for a register-offset operand too: the register
 * moves the span, it cannot shrink it. Called by rules_check_ap. */
tern_status rules_check_ap_size(const tern_core *core, const exec_ctx *cx, const tern_instr *ins, int slot,
                                tern_error *err);

/* The start-partition rule for compute-engine access (ARCH-V2): 64 < n <= 128 starts at 0; 32 < n <= 64 at 0
 * or 64; n <= 32 at a multiple of 32 (quadrants scale with the partition count). */
int rules_start_partition_ok(const tern_core *core, uint32_t start, uint32_t n);

/* Fail with "<label>: <operand>: <message>" (printf-style). */
tern_status rules_fail(tern_error *err, tern_status code, const exec_ctx *cx, const tern_instr *ins, int slot,
                       const char *fmt, ...) __attribute__((format(printf, 6, 7)));

/* Opcode rules (shapes, dtypes, generation): one entry point per opcode, check_op_<ID>, declared here from the
 * instruction table and defined in the file of the opcode's FAMILY (control: rules.c; the others beside their
 * executors). rules_check_instr's per-opcode table of them is generated from the same rows. `count` is the number
 * of instructions in the stream (branch targets). */
typedef tern_status (*rules_fn)(const tern_core *core, const exec_ctx *cx, const tern_instr *ins, size_t count,
                                tern_error *err);
#define OP(id, name, family, flags, engines, operands, cost, sem)                                                   \
    tern_status check_op_##id(const tern_core *core, const exec_ctx *cx, const tern_instr *ins, size_t count,      \
                              tern_error *err);
#include "tern/isa_table.def"
#undef OP

/* Shape helpers for family rules. */
uint64_t ap_elems(const tern_ap *ap); /* partitions * free elements */

#endif
