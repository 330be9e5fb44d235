/* `tern asm` and `tern disasm`: the command-line face of the ISA's text assembly and binary program format.
 * asm reads assembly text and writes a .tprog file; disasm reads a .tprog and prints its canonical assembly, so
 * asm -> disasm -> asm reproduces the binary byte for byte. `tern disasm --reference` prints the instruction
 * reference (markdown) generated from the instruction table; docs/isa.md embeds that output and a test checks the
 * two agree. Bad input files exit 1 with the library's message (line/column or byte offset); usage errors exit 2. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "tern/isa.h"

static void asm_usage(FILE *out)
{
    fprintf(out, "usage: tern asm IN.s -o OUT.tprog\n"
                 "\n"
                 "Assemble tern assembly text (docs/isa.md, \"Assembly\") into a binary program (\"Binary format\").\n"
                 "IN may be '-' for standard input.\n");
}

static void disasm_usage(FILE *out)
{
    fprintf(out, "usage: tern disasm IN.tprog [-o OUT.s]\n"
                 "       tern disasm --reference\n"
                 "\n"
                 "Print a binary program as canonical assembly text (to OUT, or standard output).\n"
                 "IN may be '-' for standard input. --reference prints the instruction reference (markdown)\n"
                 "generated from the instruction table, as embedded in docs/isa.md.\n");
}

/* Whole file (or stdin for "-") into a malloc'd buffer with a NUL after the data. */
static int read_all(const char *path, uint8_t **out, size_t *len)
{
    FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
    if (!f) {
        perror(path);
        return -1;
    }
    size_t cap = 1 << 16, n = 0;
    uint8_t *b = malloc(cap);
    for (;;) {
        if (!b) {
            fprintf(stderr, "%s: out of memory\n", path);
            break;
        }
        n += fread(b + n, 1, cap - 1 - n, f);
        if (n < cap - 1)
            break;
        uint8_t *q = cap > SIZE_MAX / 2 ? NULL : realloc(b, cap * 2);
        if (!q) {
            free(b);
            b = NULL;
            continue;
        }
        b = q;
        cap *= 2;
    }
    int bad = !b || ferror(f);
    if (b && ferror(f))
        perror(path);
    if (f != stdin)
        fclose(f);
    if (bad) {
        free(b);
        return -1;
    }
    b[n] = 0;
    *out = b;
    *len = n;
    return 0;
}

static int write_all(const char *path, const void *data, size_t len)
{
    FILE *f = strcmp(path, "-") ? fopen(path, "wb") : stdout;
    if (!f) {
        perror(path);
        return -1;
    }
    int bad = fwrite(data, 1, len, f) != len;
    bad |= f == stdout ? fflush(f) != 0 : fclose(f) != 0;
    if (bad)
        fprintf(stderr, "%s: write failed\n", path);
    return bad ? -1 : 0;
}

/* Parse "IN [-o OUT]". Returns 0, or the usage exit code 2 after printing the problem. */
static int parse_args(int argc, char **argv, const char **in, const char **outp, int *reference,
                      void (*usage)(FILE *))
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return -1;
        } else if (!strcmp(a, "-o")) {
            char cmd[32];
            snprintf(cmd, sizeof cmd, "tern %s", argv[0]);
            if (!(*outp = tern_arg_value(cmd, argc, argv, &i, "a file name")))
                return 2;
        } else if (reference && !strcmp(a, "--reference")) {
            *reference = 1;
        } else if (a[0] == '-' && a[1] != '\0') {
            fprintf(stderr, "tern %s: unknown option '%s'\n", argv[0], a);
            usage(stderr);
            return 2;
        } else if (*in) {
            fprintf(stderr, "tern %s: more than one input file ('%s' and '%s')\n", argv[0], *in, a);
            return 2;
        } else {
            *in = a;
        }
    }
    return 0;
}

int tern_cmd_asm(int argc, char **argv)
{
    const char *in = NULL, *outp = NULL;
    int rc = parse_args(argc, argv, &in, &outp, NULL, asm_usage);
    if (rc)
        return rc < 0 ? 0 : rc;
    if (!in || !outp) {
        fprintf(stderr, "tern asm: %s\n", !in ? "missing input file" : "missing -o OUT.tprog");
        asm_usage(stderr);
        return 2;
    }
    uint8_t *text;
    size_t len;
    if (read_all(in, &text, &len))
        return 1;
    const void *nul = memchr(text, 0, len);
    if (nul) {
        fprintf(stderr, "tern asm: %s: NUL byte at offset %zu: not a text file\n", in,
                (size_t)((const uint8_t *)nul - text));
        free(text);
        return 1;
    }
    tern_program p;
    tern_error err;
    tern_status st = tern_program_asm((const char *)text, &p, &err);
    free(text);
    if (st) {
        fprintf(stderr, "tern asm: %s: %s\n", in, err.msg);
        return 1;
    }
    uint8_t *bin;
    size_t blen;
    st = tern_program_encode(&p, &bin, &blen, &err);
    tern_program_free(&p);
    if (st) {
        fprintf(stderr, "tern asm: %s: %s\n", in, err.msg);
        return 1;
    }
    rc = write_all(outp, bin, blen) ? 1 : 0;
    free(bin);
    return rc;
}

/* Markdown table cell: '|' would end the cell, so escape it. */
static void md_cell(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '|')
            fputc('\\', f);
        fputc(*s, f);
    }
}

static int print_reference(FILE *f)
{
    fprintf(f, "| opcode | family | flags | engines | operands | cost rule | semantics |\n");
    fprintf(f, "|---|---|---|---|---|---|---|\n");
    for (unsigned op = 0; op < TERN_OP_COUNT; op++) {
        const tern_opcode_info *info = tern_opcode_get((tern_opcode)op);
        fprintf(f, "| `%s` | %s | %s | ", info->name, tern_isa_family_name(info->family),
                (info->flags & TERN_ISA_FLAG_CONTROL) ? "control" : "-");
        int first = 1;
        for (unsigned e = 0; e < TERN_ENGINE_COUNT; e++)
            if (info->engines & (1u << e)) {
                fprintf(f, "%s%s", first ? "" : ", ", tern_engine_name((tern_engine)e));
                first = 0;
            }
        fprintf(f, " | ");
        md_cell(f, info->operands[0] ? info->operands : "-");
        fprintf(f, " | `%s` | ", info->cost_rule);
        md_cell(f, info->semantics);
        fprintf(f, " |\n");
    }
    return fflush(f) ? 1 : 0;
}

int tern_cmd_disasm(int argc, char **argv)
{
    const char *in = NULL, *outp = NULL;
    int reference = 0;
    int rc = parse_args(argc, argv, &in, &outp, &reference, disasm_usage);
    if (rc)
        return rc < 0 ? 0 : rc;
    if (reference) {
        if (in || outp) {
            fprintf(stderr, "tern disasm: --reference takes no file arguments\n");
            return 2;
        }
        return print_reference(stdout);
    }
    if (!in) {
        fprintf(stderr, "tern disasm: missing input file\n");
        disasm_usage(stderr);
        return 2;
    }
    uint8_t *bin;
    size_t len;
    if (read_all(in, &bin, &len))
        return 1;
    tern_program p;
    tern_error err;
    tern_status st = tern_program_decode(bin, len, &p, &err);
    free(bin);
    if (st) {
        fprintf(stderr, "tern disasm: %s: %s\n", in, err.msg);
        return 1;
    }
    char *text;
    st = tern_program_disasm(&p, &text, &err);
    tern_program_free(&p);
    if (st) {
        fprintf(stderr, "tern disasm: %s: %s\n", in, err.msg);
        return 1;
    }
    rc = write_all(outp ? outp : "-", text, strlen(text)) ? 1 : 0;
    free(text);
    return rc;
}
