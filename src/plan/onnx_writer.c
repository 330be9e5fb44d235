/* A minimal ONNX ModelProto writer for the planner's generated graphs. The planner describes each per-rank layer
 * as an ONNX model in memory and hands it to the same importer and compiler a user's model goes through, so the
 * layer is timed by exactly the code that would run it; weights are graph inputs (symbolic: a shape, no data).
 * Only what those graphs need is written: nodes with int, float and ints attributes, typed inputs and outputs
 * with static shapes, and small int64 / float initializers (reshape targets, scalars). Field numbers are those of
 * onnx.proto (ModelProto, GraphProto, NodeProto, AttributeProto, TensorProto, ValueInfoProto). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/plan_internal.h"

static void pb_put(plan_pb *b, const void *d, size_t n)
{
    if (b->oom)
        return;
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n)
            cap *= 2;
        uint8_t *p = realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    if (n)
        memcpy(b->p + b->n, d, n);
    b->n += n;
}

static void pb_varint(plan_pb *b, uint64_t v)
{
    uint8_t t[10];
    size_t n = 0;
    do {
        t[n] = (uint8_t)(v & 0x7f);
        v >>= 7;
        if (v)
            t[n] |= 0x80;
        n++;
    } while (v);
    pb_put(b, t, n);
}

static void pb_int(plan_pb *b, unsigned field, int64_t v)
{
    pb_varint(b, (uint64_t)field << 3);
    pb_varint(b, (uint64_t)v);
}

static void pb_bytes(plan_pb *b, unsigned field, const void *d, size_t n)
{
    pb_varint(b, ((uint64_t)field << 3) | 2);
    pb_varint(b, n);
    pb_put(b, d, n);
}

static void pb_str(plan_pb *b, unsigned field, const char *s) { pb_bytes(b, field, s, strlen(s)); }

static void pb_msg(plan_pb *b, unsigned field, plan_pb *sub)
{
    if (sub->oom)
        b->oom = 1;
    pb_bytes(b, field, sub->p, sub->n);
    free(sub->p);
    memset(sub, 0, sizeof *sub);
}

static void vname(char *buf, size_t n, int id) { snprintf(buf, n, "v%d", id); }

void plan_onnx_init(plan_onnx *g, int elem)
{
    memset(g, 0, sizeof *g);
    g->elem = elem;
}

void plan_onnx_free(plan_onnx *g)
{
    free(g->nodes.p);
    free(g->inputs.p);
    free(g->outputs.p);
    free(g->inits.p);
    memset(g, 0, sizeof *g);
}

/* ValueInfoProto { name, type { tensor_type { elem_type, shape { dim { dim_value }... } } } } */
static void value_info(plan_pb *dst, unsigned field, int id, int elem, int rank, const int64_t *dims)
{
    char nm[24];
    vname(nm, sizeof nm, id);
    plan_pb shape = {0}, tt = {0}, type = {0}, vi = {0};
    for (int i = 0; i < rank; i++) {
        plan_pb dim = {0};
        pb_int(&dim, 1, dims[i]);
        pb_msg(&shape, 1, &dim);
    }
    pb_int(&tt, 1, elem);
    pb_msg(&tt, 2, &shape);
    pb_msg(&type, 1, &tt);
    pb_str(&vi, 1, nm);
    pb_msg(&vi, 2, &type);
    pb_msg(dst, field, &vi);
}

int plan_onnx_input(plan_onnx *g, int elem, int rank, const int64_t *dims)
{
    int id = g->next++;
    plan_pb tmp = {0};
    value_info(&tmp, 11, id, elem, rank, dims);
    pb_put(&g->inputs, tmp.p, tmp.n);
    if (tmp.oom)
        g->inputs.oom = 1;
    free(tmp.p);
    return id;
}

void plan_onnx_output(plan_onnx *g, int id, int elem, int rank, const int64_t *dims)
{
    plan_pb tmp = {0};
    value_info(&tmp, 12, id, elem, rank, dims);
    pb_put(&g->outputs, tmp.p, tmp.n);
    if (tmp.oom)
        g->outputs.oom = 1;
    free(tmp.p);
}

/* TensorProto { dims, data_type, name, raw_data } as a graph initializer (GraphProto field 5). */
static int add_init(plan_onnx *g, int elem, int rank, const int64_t *dims, const void *raw, size_t rawlen)
{
    int id = g->next++;
    char nm[24];
    vname(nm, sizeof nm, id);
    plan_pb t = {0};
    for (int i = 0; i < rank; i++)
        pb_int(&t, 1, dims[i]);
    pb_int(&t, 2, elem);
    pb_str(&t, 8, nm);
    pb_bytes(&t, 9, raw, rawlen);
    pb_msg(&g->inits, 5, &t);
    return id;
}

int plan_onnx_const_i64(plan_onnx *g, int n, const int64_t *vals)
{
    int64_t d = n;
    /* raw_data is little-endian; this host (x86-64, aarch64) is too */
    return add_init(g, 7, 1, &d, vals, (size_t)n * sizeof *vals);
}

int plan_onnx_const_f32(plan_onnx *g, float v) { return add_init(g, 1, 0, NULL, &v, sizeof v); }

int plan_onnx_op(plan_onnx *g, const char *op, int nin, const int *in, int nattr, const plan_attr *attrs)
{
    return plan_onnx_node(g, "", op, nin, in, 1, nattr, attrs);
}

int plan_onnx_node(plan_onnx *g, const char *domain, const char *op, int nin, const int *in, int nout, int nattr,
                   const plan_attr *attrs)
{
    int out = g->next;
    g->next += nout;
    char nm[24];
    plan_pb node = {0};
    for (int i = 0; i < nin; i++) {
        vname(nm, sizeof nm, in[i]);
        pb_str(&node, 1, nm);
    }
    for (int k = 0; k < nout; k++) {
        vname(nm, sizeof nm, out + k);
        pb_str(&node, 2, nm);
    }
    char nodename[48];
    snprintf(nodename, sizeof nodename, "%s_%d", op, g->nnodes++);
    pb_str(&node, 3, nodename);
    pb_str(&node, 4, op);
    if (domain[0]) { /* NodeProto.domain: tern's fused ops (declared in the model's opset imports, for onnx) */
        pb_str(&node, 7, domain);
        g->tern_domain = 1;
    }
    for (int a = 0; a < nattr; a++) {
        plan_pb at = {0};
        pb_str(&at, 1, attrs[a].name);
        if (attrs[a].kind == 1) {
            pb_int(&at, 3, attrs[a].i);
            pb_int(&at, 20, 2);
        } else if (attrs[a].kind == 2) {
            pb_varint(&at, (2u << 3) | 5);
            pb_put(&at, &attrs[a].f, 4);
            pb_int(&at, 20, 1);
        } else {
            for (int k = 0; k < attrs[a].nints; k++)
                pb_int(&at, 8, attrs[a].ints[k]);
            pb_int(&at, 20, 7);
        }
        pb_msg(&node, 5, &at);
    }
    pb_msg(&g->nodes, 1, &node);
    return out;
}

tern_status plan_onnx_finish(plan_onnx *g, uint8_t **buf, size_t *len, tern_error *err)
{
    plan_pb graph = {0}, model = {0}, opset = {0};
    pb_put(&graph, g->nodes.p, g->nodes.n);
    pb_str(&graph, 2, "tern_plan");
    pb_put(&graph, g->inits.p, g->inits.n);
    pb_put(&graph, g->inputs.p, g->inputs.n);
    pb_put(&graph, g->outputs.p, g->outputs.n);
    int oom = g->nodes.oom || g->inits.oom || g->inputs.oom || g->outputs.oom || graph.oom;
    pb_int(&model, 1, 8);
    pb_str(&model, 2, "tern plan");
    pb_msg(&model, 7, &graph);
    pb_int(&opset, 2, 17);
    pb_msg(&model, 8, &opset);
    if (g->tern_domain) { /* tern.AttentionGrad ...: the domain's opset, so that onnx.checker takes the file */
        plan_pb ts = {0};
        pb_str(&ts, 1, "tern");
        pb_int(&ts, 2, 1);
        pb_msg(&model, 8, &ts);
    }
    if (oom || model.oom) {
        free(model.p);
        return tern_error_set(err, TERN_ERR_NOMEM, "plan: out of memory writing a layer graph");
    }
    *buf = model.p;
    *len = model.n;
    return TERN_OK;
}
