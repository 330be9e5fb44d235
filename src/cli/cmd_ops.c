/* `tern ops`: the op registry (include/tern/ops.def) on the command line. Without options it prints one line per
 * op (domain.name, family, status, how the device runs it and the compiler rules that may, in selection order); --markdown prints the reference docs/ops.md embeds
 * between its GENERATED markers (scripts/gen_ops_doc.sh regenerates it, tests/cli/test_ops_doc.sh checks it). */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "tern/compiler.h"
#include "tern/graph.h"
#include "tern/train.h"

static void ops_usage(FILE *out)
{
    fprintf(out, "usage: tern ops [--markdown]\n"
                 "\n"
                 "List the ops tern knows (the registry, include/tern/ops.def): family, conformance status, the\n"
                 "opsets that define them, whether the host evaluator and the device run them, whether training has\n"
                 "a gradient rule for them. --markdown prints\n"
                 "the reference embedded in docs/ops.md.\n");
}

static const char *device_name(tern_op_device d)
{
    switch (d) {
    case TERN_OP_DEVICE_RULE:
        return "rule";
    case TERN_OP_DEVICE_EXPANSION:
        return "expansion";
    case TERN_OP_DEVICE_NONE:
        break;
    }
    return "-";
}

/* "1, 2 (constant)" style list of the inputs whose bit is set; "-" for none. */
static const char *const_list(unsigned mask, char *buf, size_t len)
{
    size_t at = 0;
    buf[0] = '\0';
    for (int j = 0; j < 32 && at < len; j++)
        if (mask >> j & 1u)
            at += (size_t)snprintf(buf + at, len - at, "%s%d", at ? ", " : "", j);
    return at ? buf : "-";
}

/* The compiler's lowering rules of op id in selection order ("softmax.row, axis.general"), "-" for none;
 * markdown puts each name in backquotes. */
static const char *rule_list(tern_op_id id, int markdown, char *buf, size_t len)
{
    const char *names[16];
    int n = tern_op_rule_names(id, names, 16);
    size_t at = 0;
    buf[0] = '\0';
    for (int i = 0; i < n && i < 16 && at < len; i++)
        at += (size_t)snprintf(buf + at, len - at, "%s%s%s%s", i ? ", " : "", markdown ? "`" : "", names[i],
                               markdown ? "`" : "");
    return at ? buf : "-";
}

static const char *arity(const tern_op_row *r, char *buf, size_t len)
{
    if (r->max_inputs < 0)
        snprintf(buf, len, "%d+", r->min_inputs);
    else if (r->max_inputs == r->min_inputs)
        snprintf(buf, len, "%d", r->min_inputs);
    else
        snprintf(buf, len, "%d-%d", r->min_inputs, r->max_inputs);
    return buf;
}

static void print_markdown(FILE *f)
{
    int total = 0, by_status[3] = {0}, device = 0, host = 0, grads = 0;
    for (int fam = 1; fam < TERN_OP_FAMILY_COUNT; fam++) {
        int any = 0;
        for (int k = 1; k < TERN_GOP_COUNT; k++) {
            const tern_op_row *r = tern_op_info((tern_op_id)k);
            if ((int)r->family != fam)
                continue;
            if (!any) {
                fprintf(f, "### %s\n\n", tern_op_family_name((tern_op_family)fam));
                fprintf(f, "| op | opsets | inputs | constant inputs | status | host | device | rules | gradient |\n");
                fprintf(f, "|----|--------|--------|-----------------|--------|------|--------|-------|----------|\n");
                any = 1;
            }
            char ab[16], cb[64], rb[256];
            int ev = tern_graph_eval_supported(r->domain, r->name);
            tern_op_device d = tern_op_device_support(r->id);
            int gr = tern_train_op_has_gradient(r->id);
            fprintf(f, "| `%s%s%s` | %s | %s | %s | %s | %s | %s | %s | %s |\n", r->domain, r->domain[0] ? "." : "",
                    r->name, r->opsets, arity(r, ab, sizeof ab), const_list(r->const_inputs, cb, sizeof cb),
                    tern_op_status_name(r->status), ev ? "yes" : "-", device_name(d),
                    rule_list(r->id, 1, rb, sizeof rb), gr ? "yes" : "-");
            grads += gr;
            total++;
            by_status[r->status]++;
            device += d != TERN_OP_DEVICE_NONE;
            host += ev;
        }
        if (any)
            fprintf(f, "\n");
    }
    fprintf(f,
            "%d ops: %d required, %d optional, %d planned; %d run on the device, %d in the host evaluator, %d have a "
            "gradient rule.\n",
            total, by_status[TERN_OP_STATUS_REQUIRED], by_status[TERN_OP_STATUS_OPTIONAL],
            by_status[TERN_OP_STATUS_PLANNED], device, host, grads);
}

int tern_cmd_ops(int argc, char **argv)
{
    int markdown = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--markdown")) {
            markdown = 1;
        } else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            ops_usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "tern ops: unknown option '%s'\n", argv[i]);
            ops_usage(stderr);
            return 2;
        }
    }
    if (markdown) {
        print_markdown(stdout);
        return 0;
    }
    for (int k = 1; k < TERN_GOP_COUNT; k++) {
        const tern_op_row *r = tern_op_info((tern_op_id)k);
        char name[96], rb[256];
        snprintf(name, sizeof name, "%s%s%s", r->domain, r->domain[0] ? "." : "", r->name);
        tern_op_device d = tern_op_device_support(r->id);
        printf("%-28s %-21s %-9s host %-3s grad %-3s device %s", name, tern_op_family_name(r->family),
               tern_op_status_name(r->status), tern_graph_eval_supported(r->domain, r->name) ? "yes" : "-",
               tern_train_op_has_gradient(r->id) ? "yes" : "-", device_name(d));
        if (d == TERN_OP_DEVICE_RULE)
            printf(" (%s)", rule_list(r->id, 0, rb, sizeof rb));
        printf("\n");
    }
    return 0;
}
