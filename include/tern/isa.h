/* tern ISA layer: the NeuronCore instruction set as data. One table (include/tern/isa_table.def) defines every
 * instruction; this header exposes the decoded form (tern_instr), the program container (five in-order
 * engine streams), validation against a machine's limits, the binary encoding and the text assembly.
 * The ISA knows nothing of how instructions execute (that is sim) — only what a well-formed one is.
 * Facts: ../shared/reference/trainium-arch.md §2-§8; the docs/isa.md reference is generated from the table. */
#ifndef TERN_ISA_H
#define TERN_ISA_H

#include <stddef.h>
#include <stdint.h>

#include "tern/base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- engines ---- */
typedef enum {
    TERN_ENGINE_TENSOR = 0, /* "pe"   */
    TERN_ENGINE_VECTOR,     /* "dve"  */
    TERN_ENGINE_SCALAR,     /* "act"  */
    TERN_ENGINE_GPSIMD,     /* "pool" */
    TERN_ENGINE_SYNC,       /* "sp"   */
    TERN_ENGINE_COUNT
} tern_engine;

const char *tern_engine_name(tern_engine e); /* "tensor", "vector", "scalar", "gpsimd", "sync" */

/* ---- opcodes, generated from the table ---- */
typedef enum {
#define OP(id, name, family, flags, engines, operands, cost, sem) TERN_OP_##id,
#include "tern/isa_table.def"
#undef OP
    TERN_OP_COUNT
} tern_opcode;

/* The table's FAMILY column (X(FAMILY, "name")): which simulator executor and rule checker handle an opcode
 * (docs/isa.md). A new family is added here and gets its executor and rules in sim. */
#define TERN_ISA_FAMILIES(X)                                                                             \
    X(PE, "pe") X(VECTOR, "vector") X(ACTIVATION, "activation") X(GPSIMD, "gpsimd") X(TEXT, "text")       \
    X(DMA, "dma") X(CONTROL, "control") X(COLLECTIVE, "collective")

typedef enum {
#define X(id, name) TERN_ISA_FAMILY_##id,
    TERN_ISA_FAMILIES(X)
#undef X
    TERN_ISA_FAMILY_COUNT
} tern_isa_family;
const char *tern_isa_family_name(tern_isa_family f); /* "pe", "vector", ... */

/* The table's FLAGS column. */
enum {
    TERN_ISA_FLAG_CONTROL = 1u << 0, /* sequencer control: no engine data work and no DMA (nop, semaphores, registers,
                                   branch, halt) */
};

typedef struct {
    const char *name;      /* assembly mnemonic */
    unsigned engines;      /* bit mask of tern_engine allowed to issue it */
    const char *operands;  /* operand slots used, as in the table */
    const char *cost_rule; /* cost rule name (timing model) */
    const char *semantics; /* one-line semantics */
    tern_isa_family family; /* executor family (FAMILY column) */
    unsigned flags;        /* TERN_ISA_FLAG_* (FLAGS column) */
} tern_opcode_info;

const tern_opcode_info *tern_opcode_get(tern_opcode op);
/* 1 when op is sequencer control (TERN_ISA_FLAG_CONTROL); 0 for other opcodes and for unknown ones. */
int tern_opcode_is_control(unsigned op);
/* Look up a mnemonic; returns TERN_OP_COUNT when unknown. */
tern_opcode tern_opcode_from_name(const char *name);

/* ---- memories and access patterns ---- */
typedef enum { TERN_MEM_NONE = 0, TERN_MEM_SBUF, TERN_MEM_PSUM, TERN_MEM_HBM, TERN_MEM_COUNT } tern_mem;
const char *tern_mem_name(tern_mem m);

#define TERN_AP_MAX_DIMS 4
#define TERN_REG_NONE 0xFF

/* An access pattern names a tensor view. On SBUF/PSUM: partitions [start_partition, +num_partitions) and, in
 * each, the elements offset + sum(i_k * dims[k].step) (bytes = elements * dtype size) for i_k < dims[k].num;
 * dims[0] is the outermost free dimension. On HBM, `offset` is a byte address and the partition index also
 * strides, by partition_step elements. An optional scalar register adds r[offset_reg] elements at run time
 * (dynamic addresses for loops). dtype is a tern_dtype (num.h). */
typedef struct {
    uint8_t mem;             /* tern_mem */
    uint8_t dtype;           /* tern_dtype */
    uint8_t ndims;           /* free dimensions in use, 1..4 (0 = operand unused) */
    uint8_t offset_reg;      /* register added to offset (elements) or TERN_REG_NONE */
    uint16_t start_partition;
    uint16_t num_partitions;
    int64_t partition_step;  /* HBM only: elements between consecutive partition rows */
    uint64_t offset;         /* SBUF/PSUM: byte offset in each partition; HBM: byte address */
    struct {
        int32_t step;        /* elements */
        uint32_t num;
    } dims[TERN_AP_MAX_DIMS];
} tern_ap;

/* Elements per partition the pattern covers (product of dims' num); UINT64_MAX when that product does not fit in
 * 64 bits (tern_ap_size_check refuses such a pattern before anything runs it). */
uint64_t tern_ap_free_elems(const tern_ap *ap);

/* tern's per-instruction limit on one operand: partitions x free elements. The hardware's own limit is not
 * published as one figure (per-dimension counts are 16-bit on NeuronCore-v2), so this is tern's definition: the
 * largest count that fits the 32-bit counters the engines and the cost model use. docs/isa-semantics.md. */
#define TERN_AP_MAX_ELEMS 0xFFFFFFFFull

/* The size rule of one used operand (ndims > 0), machine-independent: its element count, partitions x product of
 * nums computed with checked math, must fit in 64 bits and be at most TERN_AP_MAX_ELEMS. Returns 0, or -1 with a
 * reason ("4 free dimensions [65536 x 65536 x 65536 x 65536] x 1 partitions: element count overflows 64 bits").
 * An unused operand passes. A step-0 (broadcast) dimension counts like any other. */
int tern_ap_size_check(const tern_ap *ap, char *why, size_t why_len);

/* ---- ALU operators, activation functions, comparisons ---- */
#define TERN_ALU_OPS(X)                                                                                 \
    X(BYPASS, "bypass") X(ADD, "add") X(SUBTRACT, "subtract") X(MULT, "mult") X(DIVIDE, "divide")       \
    X(MAX, "max") X(MIN, "min") X(ABS_MAX, "abs_max") X(ABS_MIN, "abs_min") X(POW, "pow")              \
    X(IS_EQ, "is_equal") X(NOT_EQ, "not_equal") X(IS_GT, "is_gt") X(IS_GE, "is_ge") X(IS_LT, "is_lt")  \
    X(IS_LE, "is_le") X(LOGICAL_AND, "logical_and") X(LOGICAL_OR, "logical_or")                         \
    X(LOGICAL_XOR, "logical_xor") X(BITWISE_AND, "bitwise_and") X(BITWISE_OR, "bitwise_or")             \
    X(BITWISE_XOR, "bitwise_xor") X(SHIFT_LEFT, "shift_left") X(SHIFT_RIGHT, "shift_right")             \
    X(AVERAGE, "average") X(MOD, "mod") X(RSQRT, "rsqrt") X(ABS, "abs")

typedef enum {
#define X(id, name) TERN_ALU_##id,
    TERN_ALU_OPS(X)
#undef X
    TERN_ALU_COUNT
} tern_alu_op;
const char *tern_alu_name(tern_alu_op op);
tern_alu_op tern_alu_from_name(const char *name); /* TERN_ALU_COUNT when unknown */

#define TERN_ACT_FUNCS(X)                                                                               \
    X(COPY, "copy") X(EXP, "exp") X(LOG, "log") X(TANH, "tanh") X(SIGMOID, "sigmoid") X(RELU, "relu")   \
    X(GELU, "gelu") X(GELU_TANH, "gelu_apprx_tanh") X(GELU_DX, "gelu_dx") X(SILU, "silu")               \
    X(SILU_DX, "silu_dx") X(ERF, "erf") X(ERF_DX, "erf_dx") X(SOFTPLUS, "softplus") X(SQRT, "sqrt")     \
    X(RSQRT, "rsqrt") X(RECIPROCAL, "reciprocal") X(SQUARE, "square") X(SIN, "sin") X(ABS, "abs")       \
    X(SIGN, "sign")

typedef enum {
#define X(id, name) TERN_ACT_##id,
    TERN_ACT_FUNCS(X)
#undef X
    TERN_ACT_COUNT
} tern_act_func;
const char *tern_act_name(tern_act_func f);
tern_act_func tern_act_from_name(const char *name); /* TERN_ACT_COUNT when unknown */

#define TERN_CMP_OPS(X) X(ALWAYS, "always") X(EQ, "eq") X(NE, "ne") X(LT, "lt") X(LE, "le") X(GT, "gt") X(GE, "ge")
typedef enum {
#define X(id, name) TERN_CMP_##id,
    TERN_CMP_OPS(X)
#undef X
    TERN_CMP_COUNT
} tern_cmp_op;
const char *tern_cmp_name(tern_cmp_op c);
tern_cmp_op tern_cmp_from_name(const char *name);

/* ---- instructions ---- */
enum {
    TERN_FLAG_ACCUMULATE = 1u << 0, /* multiply_moving: add into PSUM instead of overwrite */
    TERN_FLAG_REV0 = 1u << 1,       /* tensor_scalar: s0 op0 A instead of A op0 s0 */
    TERN_FLAG_REV1 = 1u << 2,       /* second op reversed */
    TERN_FLAG_NEGATE = 1u << 3,     /* tensor_reduce: negate the result */
    TERN_FLAG_REDUCE = 1u << 4,     /* activation: also write the per-partition sum */
    TERN_FLAG_DOUBLE_ROW = 1u << 5, /* v3+ FP8 double-row matmul */
    TERN_FLAG_IMM_B = 1u << 6,      /* reg_alu / branch: second operand is imm, not r[rb] */
    TERN_FLAG_S0_AP = 1u << 7,      /* tensor_scalar / activation: scale/s0 from a [P,1] operand */
    TERN_FLAG_S1_AP = 1u << 8,      /* tensor_scalar: s1 from a [P,1] operand */
};

#define TERN_SEM_NONE 0xFF
#define TERN_INSTR_OPERANDS 5 /* dst, in0, in1, in2, extra (activation reduce result) */

typedef struct {
    uint16_t opcode;   /* tern_opcode */
    uint8_t engine;    /* tern_engine issuing it */
    uint8_t op0, op1;  /* tern_alu_op, or for branch: op0 = tern_cmp_op */
    uint8_t func;      /* tern_act_func */
    uint8_t queue;     /* DMA queue id 0..15 */
    uint8_t rd, ra, rb;/* registers */
    uint16_t flags;    /* TERN_FLAG_* */
    /* synchronisation, applied by the sequencer: wait until sem[wait_sem] >= wait_value before issue;
     * add 1 to sem[signal_sem] when the instruction (or DMA transfer) completes */
    uint8_t wait_sem, signal_sem;
    uint32_t wait_value;
    union {
        float f;
        int32_t i;
    } imm0, imm1;
    int32_t imm_i0, imm_i1; /* integer immediates: branch target, reduce axes, iota channel multiplier... */
    tern_ap ap[TERN_INSTR_OPERANDS]; /* [0]=dst [1]=in0 [2]=in1 [3]=in2 [4]=extra */
} tern_instr;

enum { TERN_AP_DST = 0, TERN_AP_IN0, TERN_AP_IN1, TERN_AP_IN2, TERN_AP_EXTRA };

/* ---- programs: five in-order streams ---- */
typedef struct {
    tern_instr *instrs;
    size_t count, capacity;
} tern_stream;

/* A named HBM tensor of the program's interface (kernel inputs and outputs), so a saved program can be bound
 * and read back without its source. */
#define TERN_TENSOR_NAME_MAX 48
typedef enum {
    TERN_TENSOR_INPUT = 0,
    TERN_TENSOR_OUTPUT,
    TERN_TENSOR_SCRATCH,
    TERN_TENSOR_CONSTANT, /* placed by the loader before a run (weights) */
    TERN_TENSOR_KIND_COUNT
} tern_tensor_kind;
typedef struct {
    char name[TERN_TENSOR_NAME_MAX]; /* [A-Za-z0-9_.-], 1..47 characters */
    uint8_t kind;                    /* tern_tensor_kind */
    uint8_t dtype;                   /* tern_dtype */
    uint8_t ndims;                   /* 1..4 */
    uint64_t shape[TERN_AP_MAX_DIMS];
    uint64_t hbm_addr;
} tern_program_tensor;

typedef struct tern_program {
    char machine[64];     /* the core it was built for (machine name), informative */
    uint32_t num_semaphores;
    tern_stream streams[TERN_ENGINE_COUNT];
    tern_program_tensor *tensors;
    size_t num_tensors, tensors_capacity;
} tern_program;

void tern_program_init(tern_program *p);
void tern_program_free(tern_program *p);
tern_status tern_program_append(tern_program *p, const tern_instr *ins, tern_error *err);
size_t tern_program_instr_count(const tern_program *p);
/* Declare an interface tensor (name unique, fields in range). */
tern_status tern_program_add_tensor(tern_program *p, const tern_program_tensor *t, tern_error *err);
const tern_program_tensor *tern_program_find_tensor(const tern_program *p, const char *name);
/* Bytes the tensor occupies (elements x dtype size). */
uint64_t tern_program_tensor_bytes(const tern_program_tensor *t);
const char *tern_tensor_kind_name(tern_tensor_kind k); /* "input", "output", "scratch", "constant" */
/* Check a tensor's fields; 0 if fine, else writes the reason. */
int tern_program_tensor_check(const tern_program_tensor *t, char *why, size_t why_len);

/* ---- binary encoding (versioned; see docs/isa.md) ---- */
#define TERN_PROGRAM_MAGIC "TERNPRG1"
#define TERN_PROGRAM_VERSION 1

/* Encode to a malloc'd buffer. */
tern_status tern_program_encode(const tern_program *p, uint8_t **out, size_t *out_len, tern_error *err);
/* Decode; every field checked, errors name the byte offset. */
tern_status tern_program_decode(const uint8_t *buf, size_t len, tern_program *out, tern_error *err);

/* ---- text assembly ---- */
/* Write the program as assembly text to a malloc'd NUL-terminated string. */
tern_status tern_program_disasm(const tern_program *p, char **out, tern_error *err);
/* Parse assembly; errors name the line and column. */
tern_status tern_program_asm(const char *text, tern_program *out, tern_error *err);

/* ---- files ---- */
/* Save as assembly text when the path ends in .s or .tasm, else in the binary format. */
tern_status tern_program_save_file(const tern_program *p, const char *path, tern_error *err);
/* Load a binary program (recognised by its magic) or assembly text. */
tern_status tern_program_load_file(const char *path, tern_program *out, tern_error *err);
tern_status tern_program_copy(tern_program *dst, const tern_program *src, tern_error *err);

/* ---- comparison and self-check ---- */
/* 1 when a and b are the same program field by field; otherwise 0 and, if why is given, where they differ. */
int tern_program_equal(const tern_program *a, const tern_program *b, char *why, size_t why_len);
/* Check that decode(encode(p)) and asm(disasm(p)) both give p back. */
tern_status tern_program_roundtrip_check(const tern_program *p, tern_error *err);

#ifdef __cplusplus
}
#endif
#endif
