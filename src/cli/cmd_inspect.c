/* `tern inspect MODEL.tern`: what a compiled executable holds, without running it — the header (format version,
 * the machine it was compiled for, its code fingerprint), the input/output table (name, dtype, shape, batch split,
 * bytes), each core's program (instructions per engine, semaphores, interface tensors), the constants (count and
 * sizes, per core and the largest), and the metadata. --disasm appends every core's program as assembly (the
 * text `tern disasm` prints); --json writes the same facts as one JSON object instead of text. Exit codes: 0 ok,
 * 1 a file that cannot be read or decoded, 2 a usage error. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "tern/isa.h"
#include "tern/runtime.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: tern inspect MODEL.tern [--disasm] [--json]\n"
               "\n"
               "Describe a compiled executable: format version, machine and code fingerprint, inputs and outputs,\n"
               "instructions per core and engine, constants, metadata.\n"
               "  --disasm  also print every core's program as assembly (as `tern disasm` does)\n"
               "  --json    the same as one JSON object (with --disasm: each program's text as a string)\n");
}

/* A JSON string: quotes, backslashes and control characters escaped; other bytes (UTF-8) as they are. */
static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p == '\n')
            fputs("\\n", f);
        else if (*p < 0x20)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

/* The format version from the file's header (the decoder accepted it; tern_exe does not keep it). */
static unsigned file_version(const char *path)
{
    unsigned char h[12];
    FILE *f = fopen(path, "rb");
    size_t n = f ? fread(h, 1, sizeof h, f) : 0;
    if (f)
        fclose(f);
    return n == sizeof h ? (unsigned)h[8] | (unsigned)h[9] << 8 | (unsigned)h[10] << 16 | (unsigned)h[11] << 24 : 0;
}

static void shape_text(const tern_exe_io *io, char *buf, size_t cap)
{
    size_t n = (size_t)snprintf(buf, cap, "[");
    for (unsigned d = 0; d < io->rank && n < cap; d++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%lld", d ? ", " : "", (long long)io->shape[d]);
    if (n < cap)
        snprintf(buf + n, cap - n, "]");
}

static const char *io_dtype(const tern_exe_io *io) { return io->text_bytes ? "text" : tern_dtype_name(io->dtype); }

static void print_io_table(const tern_exe_io *v, size_t n, const char *title)
{
    printf("%s (%zu):\n", title, n);
    size_t w = 4;
    for (size_t i = 0; i < n; i++)
        w = strlen(tern_exe_io_name(&v[i])) > w ? strlen(tern_exe_io_name(&v[i])) : w;
    w = w > 60 ? 60 : w; /* a very long name pushes only its own row */
    printf("  %-*s  %-6s  %-20s  %-5s  %s\n", (int)w, "name", "dtype", "shape", "split", "bytes");
    for (size_t i = 0; i < n; i++) {
        const tern_exe_io *io = &v[i];
        char shape[160];
        shape_text(io, shape, sizeof shape);
        printf("  %-*s  %-6s  %-20s  %-5s  %llu", (int)w, tern_exe_io_name(io), io_dtype(io), shape,
               io->split_batch ? "batch" : "-", (unsigned long long)tern_exe_io_bytes(io));
        if (strcmp(io->name, tern_exe_io_name(io)))
            printf("  (program tensor %s)", io->name);
        printf("\n");
    }
}

static void json_io(const tern_exe_io *v, size_t n)
{
    printf("[");
    for (size_t i = 0; i < n; i++) {
        const tern_exe_io *io = &v[i];
        printf("%s{\"name\":", i ? "," : "");
        json_str(stdout, tern_exe_io_name(io));
        printf(",\"tensor\":");
        json_str(stdout, io->name);
        printf(",\"dtype\":\"%s\",\"shape\":[", io_dtype(io));
        for (unsigned d = 0; d < io->rank; d++)
            printf("%s%lld", d ? "," : "", (long long)io->shape[d]);
        printf("],\"split_batch\":%s,\"bytes\":%llu", io->split_batch ? "true" : "false",
               (unsigned long long)tern_exe_io_bytes(io));
        if (io->text_bytes)
            printf(",\"text_bytes\":%u", io->text_bytes);
        printf("}");
    }
    printf("]");
}

static int by_bytes_desc(const void *a, const void *b)
{
    const tern_exe_const *x = *(const tern_exe_const *const *)a, *y = *(const tern_exe_const *const *)b;
    return x->bytes < y->bytes ? 1 : x->bytes > y->bytes ? -1 : (x->core > y->core) - (x->core < y->core);
}

static void print_text(const char *path, unsigned version, const tern_exe *x)
{
    printf("%s: tern executable, format version %u\n", path, version);
    if (x->machine_name && !strcmp(x->machine_name, tern_exe_machine(x)))
        printf("machine: %s, code fingerprint %08x\n", x->machine_name, x->machine_fingerprint);
    else if (x->machine_name)
        printf("machine: %s (given as %s), code fingerprint %08x\n", x->machine_name, tern_exe_machine(x),
               x->machine_fingerprint);
    else
        printf("machine: %s, no code fingerprint recorded (a version-%u file)\n",
               tern_exe_machine(x)[0] ? tern_exe_machine(x) : "(none)", version);
    printf("cores: %u\n", x->cores);
    print_io_table(x->inputs, x->num_inputs, "inputs");
    print_io_table(x->outputs, x->num_outputs, "outputs");
    printf("programs:\n  %-6s", "core");
    for (int e = 0; e < TERN_ENGINE_COUNT; e++)
        printf("  %8s", tern_engine_name((tern_engine)e));
    printf("  %8s  %10s  %7s\n", "total", "semaphores", "tensors");
    for (unsigned c = 0; c < x->cores; c++) {
        const tern_program *p = &x->programs[c];
        printf("  %-6u", c);
        for (int e = 0; e < TERN_ENGINE_COUNT; e++)
            printf("  %8zu", p->streams[e].count);
        printf("  %8zu  %10u  %7zu\n", tern_program_instr_count(p), p->num_semaphores, p->num_tensors);
    }
    uint64_t total = 0;
    for (size_t i = 0; i < x->num_consts; i++)
        total += x->consts[i].bytes;
    printf("constants: %zu, %llu bytes (%.1f MB)\n", x->num_consts, (unsigned long long)total, total / 1e6);
    for (unsigned c = 0; c < x->cores && x->num_consts; c++) {
        size_t n = 0;
        uint64_t b = 0;
        for (size_t i = 0; i < x->num_consts; i++)
            if (x->consts[i].core == c) {
                n++;
                b += x->consts[i].bytes;
            }
        printf("  core %u: %zu constants, %llu bytes\n", c, n, (unsigned long long)b);
    }
    const tern_exe_const **sorted = malloc((x->num_consts + 1) * sizeof *sorted);
    if (sorted) {
        for (size_t i = 0; i < x->num_consts; i++)
            sorted[i] = &x->consts[i];
        qsort(sorted, x->num_consts, sizeof *sorted, by_bytes_desc);
        for (size_t i = 0; i < x->num_consts && i < 5; i++)
            printf("  %s core %u, HBM 0x%llx: %llu bytes\n", i ? "        " : "largest:", sorted[i]->core,
                   (unsigned long long)sorted[i]->hbm_addr, (unsigned long long)sorted[i]->bytes);
        free(sorted);
    }
    if (x->metadata_json)
        printf("metadata: %s\n", x->metadata_json);
}

static void print_json(const char *path, unsigned version, const tern_exe *x, char *const *disasm)
{
    printf("{\"file\":");
    json_str(stdout, path);
    printf(",\"format_version\":%u,\"machine\":", version);
    json_str(stdout, tern_exe_machine(x));
    printf(",\"machine_name\":");
    if (x->machine_name)
        json_str(stdout, x->machine_name);
    else
        printf("null");
    printf(",\"fingerprint\":");
    if (x->machine_fingerprint)
        printf("\"%08x\"", x->machine_fingerprint);
    else
        printf("null");
    printf(",\"cores\":%u,\"inputs\":", x->cores);
    json_io(x->inputs, x->num_inputs);
    printf(",\"outputs\":");
    json_io(x->outputs, x->num_outputs);
    printf(",\"programs\":[");
    for (unsigned c = 0; c < x->cores; c++) {
        const tern_program *p = &x->programs[c];
        printf("%s{\"core\":%u,\"instructions\":{", c ? "," : "", c);
        for (int e = 0; e < TERN_ENGINE_COUNT; e++)
            printf("%s\"%s\":%zu", e ? "," : "", tern_engine_name((tern_engine)e), p->streams[e].count);
        printf("},\"total\":%zu,\"semaphores\":%u,\"tensors\":%zu", tern_program_instr_count(p), p->num_semaphores,
               p->num_tensors);
        if (disasm) {
            printf(",\"disasm\":");
            json_str(stdout, disasm[c]);
        }
        printf("}");
    }
    uint64_t total = 0;
    for (size_t i = 0; i < x->num_consts; i++)
        total += x->consts[i].bytes;
    printf("],\"constants\":{\"count\":%zu,\"bytes\":%llu,\"list\":[", x->num_consts, (unsigned long long)total);
    for (size_t i = 0; i < x->num_consts; i++)
        printf("%s{\"core\":%u,\"hbm_addr\":%llu,\"bytes\":%llu}", i ? "," : "", x->consts[i].core,
               (unsigned long long)x->consts[i].hbm_addr, (unsigned long long)x->consts[i].bytes);
    printf("]},\"metadata\":");
    if (x->metadata_json)
        json_str(stdout, x->metadata_json); /* free-form: kept as a string, not trusted to be JSON */
    else
        printf("null");
    printf("}\n");
}

int tern_cmd_inspect(int argc, char **argv)
{
    const char *path = NULL;
    int disasm = 0, json = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--disasm")) {
            disasm = 1;
        } else if (!strcmp(argv[i], "--json")) {
            json = 1;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "tern inspect: unknown option '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        } else if (!path) {
            path = argv[i];
        } else {
            fprintf(stderr, "tern inspect: unexpected argument '%s' (one executable at a time)\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    if (!path) {
        fprintf(stderr, "tern inspect: an executable (.tern) is required\n");
        usage(stderr);
        return 2;
    }
    tern_exe x;
    tern_error err;
    if (tern_exe_load(path, &x, &err)) {
        fprintf(stderr, "tern inspect: %s\n", err.msg);
        return 1;
    }
    unsigned version = file_version(path);
    char **text = NULL;
    int rc = 0;
    if (disasm) {
        text = calloc(x.cores, sizeof *text);
        for (unsigned c = 0; text && c < x.cores && !rc; c++)
            if (tern_program_disasm(&x.programs[c], &text[c], &err)) {
                fprintf(stderr, "tern inspect: %s: core %u: %s\n", path, c, err.msg);
                rc = 1;
            }
        if (!text) {
            fprintf(stderr, "tern inspect: out of memory\n");
            rc = 1;
        }
    }
    if (!rc && json) {
        print_json(path, version, &x, text);
    } else if (!rc) {
        print_text(path, version, &x);
        for (unsigned c = 0; text && c < x.cores; c++)
            printf("\n; ---- core %u ----\n%s", c, text[c]);
    }
    for (unsigned c = 0; text && c < x.cores; c++)
        free(text[c]);
    free(text);
    tern_exe_free(&x);
    return rc;
}
