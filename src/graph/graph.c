/* The graph IR's container: values and nodes in growable arrays, the name table, topological sorting (with cycle
 * and single-assignment checks), compaction after passes remove nodes, the compiler's accessors, and the text
 * dump. Value ids are array indices; nodes refer to values by id only, so renaming never touches nodes. */
#include "graph_internal.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

char *graph_strdup(const char *s)
{
    if (!s)
        s = "";
    size_t n = strlen(s);
    char *d = malloc(n + 1);
    if (d)
        memcpy(d, s, n + 1);
    return d;
}

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static int hash_insert(tern_graph *g, int id)
{
    if ((size_t)(g->n_values + 1) * 2 > g->hash_cap) {
        size_t cap = g->hash_cap ? g->hash_cap * 2 : 64;
        while ((size_t)(g->n_values + 1) * 2 > cap)
            cap *= 2;
        int *h = calloc(cap, sizeof *h);
        if (!h)
            return -1;
        free(g->hash);
        g->hash = h;
        g->hash_cap = cap;
        for (int v = 0; v < g->n_values; v++)
            if (v != id && hash_insert(g, v) < 0)
                return -1;
    }
    size_t mask = g->hash_cap - 1, k = hash_str(g->values[id].name) & mask;
    while (g->hash[k])
        k = (k + 1) & mask;
    g->hash[k] = id + 1;
    return 0;
}

int graph_lookup(const tern_graph *g, const char *name)
{
    if (!g->hash_cap || !name)
        return -1;
    size_t mask = g->hash_cap - 1, k = hash_str(name) & mask;
    while (g->hash[k]) {
        int id = g->hash[k] - 1;
        if (strcmp(g->values[id].name, name) == 0)
            return id;
        k = (k + 1) & mask;
    }
    return -1;
}

static void rebuild_hash(tern_graph *g)
{
    free(g->hash);
    g->hash = NULL;
    g->hash_cap = 0;
    int n = g->n_values;
    g->n_values = 0;
    for (int v = 0; v < n; v++) {
        g->n_values = v + 1;
        if (hash_insert(g, v) < 0)
            break;
    }
    g->n_values = n;
}

void graph_value_reset_shape(tern_graph_value *v)
{
    v->type = TERN_ELEM_UNDEFINED;
    v->rank = -1;
    for (int d = 0; d < TERN_GRAPH_MAX_RANK; d++) {
        v->dims[d] = -1;
        free(v->dim_names[d]);
        v->dim_names[d] = NULL;
    }
}

int graph_add_value(tern_graph *g, const char *name)
{
    if (g->n_values == g->cap_values) {
        int cap = g->cap_values ? g->cap_values * 2 : 64;
        tern_graph_value *v = realloc(g->values, (size_t)cap * sizeof *v);
        if (!v)
            return -1;
        g->values = v;
        g->cap_values = cap;
    }
    int id = g->n_values;
    tern_graph_value *v = &g->values[id];
    memset(v, 0, sizeof *v);
    char buf[32];
    if (!name) {
        snprintf(buf, sizeof buf, "_v%d", id);
        name = buf;
    }
    v->name = graph_strdup(name);
    if (!v->name)
        return -1;
    v->rank = -1;
    for (int d = 0; d < TERN_GRAPH_MAX_RANK; d++)
        v->dims[d] = -1;
    v->producer = -1;
    g->n_values++;
    if (hash_insert(g, id) < 0) {
        g->n_values--;
        free(v->name);
        return -1;
    }
    return id;
}

int graph_add_node(tern_graph *g, const char *op, const char *domain, const char *name, int n_in, int n_out,
                   int n_attrs)
{
    if (g->n_nodes == g->cap_nodes) {
        int cap = g->cap_nodes ? g->cap_nodes * 2 : 64;
        tern_graph_node *n = realloc(g->nodes, (size_t)cap * sizeof *n);
        if (!n)
            return -1;
        g->nodes = n;
        g->cap_nodes = cap;
    }
    tern_graph_node *n = &g->nodes[g->n_nodes];
    memset(n, 0, sizeof *n);
    n->op = graph_strdup(op);
    n->domain = graph_strdup(domain);
    n->op_id = (int)tern_op_lookup(domain, op);
    char buf[96];
    if (!name || !*name) {
        snprintf(buf, sizeof buf, "%.60s_%d", op ? op : "node", g->n_nodes);
        name = buf;
    }
    n->name = graph_strdup(name);
    n->inputs = malloc((size_t)(n_in ? n_in : 1) * sizeof(int));
    n->outputs = malloc((size_t)(n_out ? n_out : 1) * sizeof(int));
    n->attrs = calloc((size_t)(n_attrs ? n_attrs : 1), sizeof(tern_graph_attr));
    if (!n->op || !n->domain || !n->name || !n->inputs || !n->outputs || !n->attrs) {
        graph_node_clear(n);
        return -1;
    }
    for (int k = 0; k < n_in; k++)
        n->inputs[k] = -1;
    for (int k = 0; k < n_out; k++)
        n->outputs[k] = -1;
    n->n_inputs = n_in;
    n->n_outputs = n_out;
    n->n_attrs = 0; /* filled by the caller up to n_attrs */
    return g->n_nodes++;
}

void graph_attr_clear(tern_graph_attr *a)
{
    free(a->name);
    free(a->s);
    free(a->ints);
    free(a->floats);
    if (a->strings)
        for (size_t k = 0; k < a->n; k++)
            free(a->strings[k]);
    free(a->strings);
    tern_host_tensor_free(a->t);
    tern_graph_free(a->graph);
    memset(a, 0, sizeof *a);
}

void graph_node_clear(tern_graph_node *n)
{
    free(n->op);
    free(n->domain);
    free(n->name);
    free(n->inputs);
    free(n->outputs);
    if (n->attrs)
        for (int k = 0; k < n->n_attrs; k++)
            graph_attr_clear(&n->attrs[k]);
    free(n->attrs);
    memset(n, 0, sizeof *n);
}

void graph_value_clear(tern_graph_value *v)
{
    free(v->name);
    for (int d = 0; d < TERN_GRAPH_MAX_RANK; d++)
        free(v->dim_names[d]);
    tern_host_tensor_free(v->constant);
    memset(v, 0, sizeof *v);
}

void tern_graph_free(tern_graph *g)
{
    if (!g)
        return;
    for (int i = 0; i < g->n_nodes; i++)
        graph_node_clear(&g->nodes[i]);
    for (int v = 0; v < g->n_values; v++)
        graph_value_clear(&g->values[v]);
    free(g->nodes);
    free(g->values);
    free(g->inputs);
    free(g->outputs);
    free(g->hash);
    free(g);
}

const char *tern_graph_node_label(const tern_graph *g, int i, char *buf, size_t len)
{
    if (i < 0 || i >= g->n_nodes)
        snprintf(buf, len, "node #%d", i);
    else
        snprintf(buf, len, "node \"%.200s\" (%s%s%.100s #%d)", g->nodes[i].name, g->nodes[i].domain,
                 g->nodes[i].domain[0] ? "." : "", g->nodes[i].op, i);
    return buf;
}

tern_status graph_node_error(const tern_graph *g, int node, tern_error *err, tern_status code, const char *fmt, ...)
{
    if (!err)
        return code;
    char label[400], msg[TERN_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return tern_error_set(err, code, "%s: %s", tern_graph_node_label(g, node, label, sizeof label), msg);
}

/* Kahn's algorithm over producer edges; a node left over sits on (or behind) a cycle. */
tern_status graph_sort(tern_graph *g, tern_error *err)
{
    int nn = g->n_nodes, nv = g->n_values;
    for (int v = 0; v < nv; v++)
        g->values[v].producer = -1;
    for (int i = 0; i < nn; i++)
        for (int k = 0; k < g->nodes[i].n_outputs; k++) {
            int v = g->nodes[i].outputs[k];
            if (v < 0)
                continue;
            if (g->values[v].producer >= 0 || (g->values[v].flags & (TERN_VALUE_INPUT | TERN_VALUE_INITIALIZER))) {
                char label[400];
                return tern_error_set(err, TERN_ERR_PARSE, "%s: output \"%s\" is already %s",
                                      tern_graph_node_label(g, i, label, sizeof label), g->values[v].name,
                                      g->values[v].producer >= 0 ? "produced by another node"
                                                                 : "a graph input or initializer");
            }
            g->values[v].producer = i;
        }
    int *indeg = calloc((size_t)nn + 1, sizeof *indeg), *order = malloc(((size_t)nn + 1) * sizeof *order);
    int *users_start = calloc((size_t)nv + 1, sizeof *users_start);
    size_t total = 0;
    for (int i = 0; i < nn; i++)
        total += (size_t)g->nodes[i].n_inputs;
    int *users = malloc((total + 1) * sizeof *users);
    if (!indeg || !order || !users_start || !users) {
        free(indeg), free(order), free(users_start), free(users);
        return tern_error_set(err, TERN_ERR_NOMEM, "graph: out of memory sorting %d nodes", nn);
    }
    /* CSR of consumers per value (a node reading a value twice counts twice, consistently for indeg). */
    for (int i = 0; i < nn; i++)
        for (int k = 0; k < g->nodes[i].n_inputs; k++) {
            int v = g->nodes[i].inputs[k];
            if (v >= 0 && g->values[v].producer >= 0) {
                users_start[v + 1]++;
                indeg[i]++;
            }
        }
    for (int v = 0; v < nv; v++)
        users_start[v + 1] += users_start[v];
    int *fill = calloc((size_t)nv + 1, sizeof *fill);
    if (!fill) {
        free(indeg), free(order), free(users_start), free(users);
        return tern_error_set(err, TERN_ERR_NOMEM, "graph: out of memory sorting %d nodes", nn);
    }
    for (int i = 0; i < nn; i++)
        for (int k = 0; k < g->nodes[i].n_inputs; k++) {
            int v = g->nodes[i].inputs[k];
            if (v >= 0 && g->values[v].producer >= 0)
                users[users_start[v] + fill[v]++] = i;
        }
    int head = 0, tail = 0;
    for (int i = 0; i < nn; i++)
        if (indeg[i] == 0)
            order[tail++] = i;
    while (head < tail) {
        int i = order[head++];
        for (int k = 0; k < g->nodes[i].n_outputs; k++) {
            int v = g->nodes[i].outputs[k];
            if (v < 0)
                continue;
            for (int u = users_start[v]; u < users_start[v + 1]; u++)
                if (--indeg[users[u]] == 0)
                    order[tail++] = users[u];
        }
    }
    tern_status st = TERN_OK;
    if (tail < nn) {
        int bad = 0;
        while (bad < nn && indeg[bad] == 0)
            bad++;
        char label[400];
        st = tern_error_set(err, TERN_ERR_PARSE, "%s: on a cycle (%d of %d nodes cannot be ordered)",
                            tern_graph_node_label(g, bad, label, sizeof label), nn - tail, nn);
    } else {
        int identity = 1;
        for (int i = 0; i < nn; i++)
            identity &= order[i] == i;
        if (!identity) {
            tern_graph_node *sorted = malloc(((size_t)nn + 1) * sizeof *sorted);
            if (!sorted) {
                st = tern_error_set(err, TERN_ERR_NOMEM, "graph: out of memory sorting");
            } else {
                for (int i = 0; i < nn; i++)
                    sorted[i] = g->nodes[order[i]];
                memcpy(g->nodes, sorted, (size_t)nn * sizeof *sorted);
                free(sorted);
                for (int i = 0; i < nn; i++)
                    for (int k = 0; k < g->nodes[i].n_outputs; k++)
                        if (g->nodes[i].outputs[k] >= 0)
                            g->values[g->nodes[i].outputs[k]].producer = i;
            }
        }
    }
    free(indeg), free(order), free(users_start), free(users), free(fill);
    return st;
}

tern_status graph_compact(tern_graph *g, const unsigned char *keep, tern_error *err)
{
    int nn = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        if (keep && !keep[i]) {
            graph_node_clear(&g->nodes[i]);
            continue;
        }
        g->nodes[nn++] = g->nodes[i];
    }
    g->n_nodes = nn;
    unsigned char *used = calloc((size_t)g->n_values + 1, 1);
    int *remap = malloc(((size_t)g->n_values + 1) * sizeof *remap);
    if (!used || !remap) {
        free(used), free(remap);
        return tern_error_set(err, TERN_ERR_NOMEM, "graph: out of memory compacting");
    }
    for (int i = 0; i < g->n_nodes; i++) {
        for (int k = 0; k < g->nodes[i].n_inputs; k++)
            if (g->nodes[i].inputs[k] >= 0)
                used[g->nodes[i].inputs[k]] = 1;
        for (int k = 0; k < g->nodes[i].n_outputs; k++)
            if (g->nodes[i].outputs[k] >= 0)
                used[g->nodes[i].outputs[k]] = 1;
    }
    for (int k = 0; k < g->n_inputs; k++)
        used[g->inputs[k]] = 1;
    for (int k = 0; k < g->n_outputs; k++)
        used[g->outputs[k]] = 1;
    int nv = 0;
    for (int v = 0; v < g->n_values; v++) {
        if (!used[v]) {
            graph_value_clear(&g->values[v]);
            remap[v] = -1;
            continue;
        }
        remap[v] = nv;
        g->values[nv++] = g->values[v];
    }
    g->n_values = nv;
    for (int i = 0; i < g->n_nodes; i++) {
        for (int k = 0; k < g->nodes[i].n_inputs; k++)
            if (g->nodes[i].inputs[k] >= 0)
                g->nodes[i].inputs[k] = remap[g->nodes[i].inputs[k]];
        for (int k = 0; k < g->nodes[i].n_outputs; k++)
            if (g->nodes[i].outputs[k] >= 0)
                g->nodes[i].outputs[k] = remap[g->nodes[i].outputs[k]];
    }
    for (int k = 0; k < g->n_inputs; k++)
        g->inputs[k] = remap[g->inputs[k]];
    for (int k = 0; k < g->n_outputs; k++)
        g->outputs[k] = remap[g->outputs[k]];
    free(used), free(remap);
    rebuild_hash(g);
    for (int v = 0; v < g->n_values; v++)
        g->values[v].producer = -1;
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i].n_outputs; k++)
            if (g->nodes[i].outputs[k] >= 0)
                g->values[g->nodes[i].outputs[k]].producer = i;
    return TERN_OK;
}

/* ---- accessors ---- */
int tern_graph_node_count(const tern_graph *g) { return g ? g->n_nodes : 0; }
const tern_graph_node *tern_graph_node_at(const tern_graph *g, int i)
{
    return g && i >= 0 && i < g->n_nodes ? &g->nodes[i] : NULL;
}
int tern_graph_value_count(const tern_graph *g) { return g ? g->n_values : 0; }
const tern_graph_value *tern_graph_value_at(const tern_graph *g, int id)
{
    return g && id >= 0 && id < g->n_values ? &g->values[id] : NULL;
}
int tern_graph_find_value(const tern_graph *g, const char *name) { return g ? graph_lookup(g, name) : -1; }
int tern_graph_input_count(const tern_graph *g) { return g ? g->n_inputs : 0; }
int tern_graph_input_id(const tern_graph *g, int i) { return g && i >= 0 && i < g->n_inputs ? g->inputs[i] : -1; }
int tern_graph_output_count(const tern_graph *g) { return g ? g->n_outputs : 0; }
int tern_graph_output_id(const tern_graph *g, int i)
{
    return g && i >= 0 && i < g->n_outputs ? g->outputs[i] : -1;
}
int64_t tern_graph_opset(const tern_graph *g) { return g ? g->opset : 0; }

tern_status tern_graph_topo_order(const tern_graph *g, int *order, tern_error *err)
{
    for (int i = 0; i < g->n_nodes; i++) {
        for (int k = 0; k < g->nodes[i].n_inputs; k++) {
            int v = g->nodes[i].inputs[k];
            if (v >= 0 && g->values[v].producer >= i)
                return graph_node_error(g, i, err, TERN_ERR_INVALID, "input \"%s\" is produced later (cycle)",
                                        g->values[v].name);
        }
        order[i] = i;
    }
    return TERN_OK;
}

int tern_graph_value_uses(const tern_graph *g, int id)
{
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i].n_inputs; k++)
            n += g->nodes[i].inputs[k] == id;
    for (int k = 0; k < g->n_outputs; k++)
        n += g->outputs[k] == id;
    return n;
}

int tern_graph_value_is_static(const tern_graph_value *v)
{
    if (!v || v->type == TERN_ELEM_UNDEFINED || v->rank < 0)
        return 0;
    for (int d = 0; d < v->rank; d++)
        if (v->dims[d] < 0)
            return 0;
    return 1;
}

size_t tern_graph_value_numel(const tern_graph_value *v)
{
    if (!tern_graph_value_is_static(v))
        return 0;
    int64_t n = graph_numel(v->rank, v->dims);
    return n < 0 ? 0 : (size_t)n;
}

const tern_graph_attr *tern_graph_node_attr(const tern_graph_node *n, const char *name)
{
    for (int k = 0; k < n->n_attrs; k++)
        if (strcmp(n->attrs[k].name, name) == 0)
            return &n->attrs[k];
    return NULL;
}

int64_t tern_graph_attr_int(const tern_graph_node *n, const char *name, int64_t dflt)
{
    const tern_graph_attr *a = tern_graph_node_attr(n, name);
    return a && a->type == TERN_ATTR_INT ? a->i : dflt;
}

float tern_graph_attr_float(const tern_graph_node *n, const char *name, float dflt)
{
    const tern_graph_attr *a = tern_graph_node_attr(n, name);
    if (a && a->type == TERN_ATTR_FLOAT)
        return a->f;
    if (a && a->type == TERN_ATTR_INT)
        return (float)a->i;
    return dflt;
}

const char *tern_graph_attr_string(const tern_graph_node *n, const char *name, const char *dflt)
{
    const tern_graph_attr *a = tern_graph_node_attr(n, name);
    return a && a->type == TERN_ATTR_STRING ? a->s : dflt;
}

/* ---- set_input_shape ---- */
tern_status tern_graph_set_input_shape(tern_graph *g, const char *name, int rank, const int64_t *dims,
                                       tern_error *err)
{
    int id = graph_lookup(g, name);
    int is_input = 0;
    for (int k = 0; k < g->n_inputs; k++)
        is_input |= g->inputs[k] == id;
    if (id < 0 || !is_input)
        return tern_error_set(err, TERN_ERR_NOT_FOUND, "graph input \"%s\": no such input", name);
    tern_graph_value *v = &g->values[id];
    if (rank < 0 || rank > TERN_GRAPH_MAX_RANK)
        return tern_error_set(err, TERN_ERR_RANGE, "graph input \"%s\": rank %d outside [0, %d]", name, rank,
                              TERN_GRAPH_MAX_RANK);
    if (v->rank >= 0 && v->rank != rank)
        return tern_error_set(err, TERN_ERR_INVALID, "graph input \"%s\": declared rank %d, asked for rank %d", name,
                              v->rank, rank);
    for (int d = 0; d < rank; d++) {
        if (dims[d] < 0)
            return tern_error_set(err, TERN_ERR_RANGE, "graph input \"%s\": dim %d is negative (%lld)", name, d,
                                  (long long)dims[d]);
        if (v->rank >= 0 && v->dims[d] >= 0 && v->dims[d] != dims[d])
            return tern_error_set(err, TERN_ERR_INVALID, "graph input \"%s\": dim %d is %lld, asked for %lld", name,
                                  d, (long long)v->dims[d], (long long)dims[d]);
    }
    if (graph_numel(rank, dims) < 0)
        return tern_error_set(err, TERN_ERR_RANGE, "graph input \"%s\": element count overflows 2^32", name);
    v->rank = rank;
    for (int d = 0; d < TERN_GRAPH_MAX_RANK; d++) {
        v->dims[d] = d < rank ? dims[d] : -1;
        if (d < rank && v->dim_names[d]) { /* a bound dim is a number from now on */
            free(v->dim_names[d]);
            v->dim_names[d] = NULL;
        }
    }
    return TERN_OK;
}

/* ---- dump ---- */
static void dump_shape(FILE *f, const tern_graph_value *v)
{
    fprintf(f, "%s", tern_elem_name(v->type));
    if (v->rank < 0) {
        fprintf(f, "[?]");
        return;
    }
    fputc('[', f);
    for (int d = 0; d < v->rank; d++) {
        if (d)
            fputc(',', f);
        if (v->dims[d] >= 0)
            fprintf(f, "%" PRId64, v->dims[d]);
        else
            fprintf(f, "%s", v->dim_names[d] ? v->dim_names[d] : "?");
    }
    fputc(']', f);
}

static void dump_attr(FILE *f, const tern_graph_attr *a)
{
    fprintf(f, " %s=", a->name);
    switch (a->type) {
    case TERN_ATTR_INT: fprintf(f, "%" PRId64, a->i); break;
    case TERN_ATTR_FLOAT: fprintf(f, "%g", (double)a->f); break;
    case TERN_ATTR_STRING: fprintf(f, "\"%s\"", a->s); break;
    case TERN_ATTR_INTS:
        fputc('[', f);
        for (size_t k = 0; k < a->n && k < 16; k++)
            fprintf(f, "%s%" PRId64, k ? "," : "", a->ints[k]);
        fprintf(f, "%s]", a->n > 16 ? ",..." : "");
        break;
    case TERN_ATTR_FLOATS:
        fputc('[', f);
        for (size_t k = 0; k < a->n && k < 16; k++)
            fprintf(f, "%s%g", k ? "," : "", (double)a->floats[k]);
        fprintf(f, "%s]", a->n > 16 ? ",..." : "");
        break;
    case TERN_ATTR_STRINGS: fprintf(f, "<%zu strings>", a->n); break;
    case TERN_ATTR_TENSOR:
        fprintf(f, "tensor %s[", tern_elem_name(a->t->type));
        for (int d = 0; d < a->t->rank; d++)
            fprintf(f, "%s%" PRId64, d ? "," : "", a->t->dims[d]);
        fputc(']', f);
        if (a->t->count == 1)
            fprintf(f, "{%g}", tern_host_tensor_get(a->t, 0));
        break;
    case TERN_ATTR_GRAPH: fprintf(f, "<graph>"); break;
    }
}

void tern_graph_dump(FILE *f, const tern_graph *g)
{
    int n_init = 0;
    for (int v = 0; v < g->n_values; v++)
        n_init += (g->values[v].flags & TERN_VALUE_INITIALIZER) != 0;
    fprintf(f, "graph: opset %" PRId64 ", %d nodes, %d values, %d initializers\n", g->opset, g->n_nodes, g->n_values,
            n_init);
    for (int k = 0; k < g->n_inputs; k++) {
        fprintf(f, "input  %%%s: ", g->values[g->inputs[k]].name);
        dump_shape(f, &g->values[g->inputs[k]]);
        fputc('\n', f);
    }
    for (int v = 0; v < g->n_values; v++) {
        if (!(g->values[v].flags & TERN_VALUE_INITIALIZER))
            continue;
        fprintf(f, "const  %%%s: ", g->values[v].name);
        dump_shape(f, &g->values[v]);
        if (g->values[v].constant && g->values[v].constant->count <= 4) {
            fputc(' ', f);
            for (size_t e = 0; e < g->values[v].constant->count; e++)
                fprintf(f, "%s%g", e ? "," : "{", tern_host_tensor_get(g->values[v].constant, e));
            fputs(g->values[v].constant->count ? "}" : "{}", f);
        }
        fputc('\n', f);
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const tern_graph_node *n = &g->nodes[i];
        fprintf(f, "%4d ", i);
        for (int k = 0; k < n->n_outputs; k++) {
            if (k)
                fputs(", ", f);
            if (n->outputs[k] < 0) {
                fputs("_", f);
                continue;
            }
            fprintf(f, "%%%s: ", g->values[n->outputs[k]].name);
            dump_shape(f, &g->values[n->outputs[k]]);
        }
        fprintf(f, " = %s%s%s(", n->domain, n->domain[0] ? "." : "", n->op);
        for (int k = 0; k < n->n_inputs; k++)
            fprintf(f, "%s%s%s", k ? ", " : "", n->inputs[k] >= 0 ? "%" : "_",
                    n->inputs[k] >= 0 ? g->values[n->inputs[k]].name : "");
        fputc(')', f);
        for (int k = 0; k < n->n_attrs; k++)
            dump_attr(f, &n->attrs[k]);
        fprintf(f, "  # %s\n", n->name);
    }
    for (int k = 0; k < g->n_outputs; k++) {
        fprintf(f, "output %%%s: ", g->values[g->outputs[k]].name);
        dump_shape(f, &g->values[g->outputs[k]]);
        fputc('\n', f);
    }
}
