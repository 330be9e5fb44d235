/* Private to the ISA layer: the one definition of a "representable" instruction shared by the binary codec
 * (encode.c) and the text assembler (asm.c), so that a program the encoder writes is one the decoder reads and
 * one the disassembler prints is one the assembler parses back bit for bit. Each check reports the byte offset
 * of the offending field inside the binary instruction record, so the decoder's messages point at the byte. */
#ifndef TERN_ISA_CODEC_H
#define TERN_ISA_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "tern/isa.h"

/* Binary layout (docs/isa.md, "Binary format"). */
#define ISA_HEADER_SIZE 112u
#define ISA_RECORD_SIZE 320u
#define ISA_AP_RECORD_SIZE 56u
#define ISA_AP_RECORD_BASE 36u
#define ISA_MACHINE_FIELD 64u
#define ISA_QUEUE_COUNT 16u
#define ISA_TENSOR_RECORD_SIZE 96u
#define ISA_FLAGS_KNOWN 0x1FFu

/* Operand slot names in tern_instr.ap order: "dst", "in0", "in1", "in2", "extra". */
extern const char *const isa_operand_names[TERN_INSTR_OPERANDS];

/* Check every field of *ins against the representable ranges (enums in range, flags known, unused dims zero, no
 * wait value without a wait semaphore) and that ins->engine == stream. With check_engines, also that the opcode
 * may issue on that engine (table's ENGINES column). Returns 0 when fine; otherwise writes a reason ("operand in0:
 * dtype 99 unknown (valid 0..12)") to why and the field's byte offset within the record to *field_off. */
int isa_instr_check(const tern_instr *ins, unsigned stream, int check_engines, size_t *field_off, char *why,
                    size_t why_len);

/* Machine names: at most 63 characters from [A-Za-z0-9._+-] (empty allowed). Returns the index of the first
 * bad character, or -1 when the name is fine (a name of 64+ characters reports index 63). */
int isa_machine_name_bad(const char *name, size_t field_len);

/* CRC-32 (IEEE 802.3, reflected, as zlib's crc32()) of n bytes. */
uint32_t isa_crc32(const uint8_t *p, size_t n);

#endif
