/* External data through the in-memory loaders: a ModelProto written here byte by byte (one fp32 initializer "w" of
 * 4 elements whose bytes live in "w.bin", the graph output) must be refused by tern_graph_load_onnx_buffer with a
 * message naming the tensor and the missing directory, and must load through tern_graph_load_onnx_buffer_dir with
 * the file's values; the same bytes with a bf16 initializer go through the chunked conversion. */
#include "check.h"
#include "tern/graph.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    uint8_t b[512];
    size_t n;
} pb;

static void put_varint(pb *p, uint64_t v)
{
    do {
        uint8_t c = v & 0x7f;
        v >>= 7;
        p->b[p->n++] = (uint8_t)(c | (v ? 0x80 : 0));
    } while (v);
}
static void put_key(pb *p, unsigned field, unsigned wire) { put_varint(p, (uint64_t)field << 3 | wire); }
static void put_int(pb *p, unsigned field, uint64_t v)
{
    put_key(p, field, 0);
    put_varint(p, v);
}
static void put_bytes(pb *p, unsigned field, const void *d, size_t n)
{
    put_key(p, field, 2);
    put_varint(p, n);
    memcpy(p->b + p->n, d, n);
    p->n += n;
}
static void put_str(pb *p, unsigned field, const char *s) { put_bytes(p, field, s, strlen(s)); }
static void put_msg(pb *p, unsigned field, const pb *m) { put_bytes(p, field, m->b, m->n); }

/* ModelProto { ir_version 8, opset 13, graph { initializer w [4] (elem, external "w.bin"), output w } } */
static size_t model(uint8_t *out, int elem)
{
    pb entry = {0}, tensor = {0}, vi = {0}, graph = {0}, opset = {0}, m = {0};
    put_str(&entry, 1, "location");
    put_str(&entry, 2, "w.bin");
    put_int(&tensor, 1, 4);       /* dims */
    put_int(&tensor, 2, (uint64_t)elem); /* data_type */
    put_str(&tensor, 8, "w");     /* name */
    put_msg(&tensor, 13, &entry); /* external_data */
    put_int(&tensor, 14, 1);      /* data_location = EXTERNAL */
    put_str(&vi, 1, "w");
    put_msg(&graph, 5, &tensor); /* initializer */
    put_str(&graph, 2, "g");
    put_msg(&graph, 12, &vi); /* output */
    put_int(&opset, 2, 13);
    put_int(&m, 1, 8);
    put_msg(&m, 8, &opset);
    put_msg(&m, 7, &graph);
    memcpy(out, m.b, m.n);
    return m.n;
}

int main(void)
{
    uint8_t buf[512];
    size_t n = model(buf, TERN_ELEM_FLOAT);
    tern_graph *g = NULL;
    tern_error err;
    CHECK(tern_graph_load_onnx_buffer(buf, n, &g, &err) == TERN_ERR_INVALID);
    CHECK(g == NULL);
    CHECK(strstr(err.msg, "initializer tensor \"w\"") != NULL);
    CHECK(strstr(err.msg, "needs the model's directory") != NULL);

    char dir[] = "/tmp/tern_extbuf_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char path[256];
    snprintf(path, sizeof path, "%s/w.bin", dir);
    const float w[4] = {1.5f, -2.25f, 3.0f, 0.125f};
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(w, sizeof w, 1, f) == 1);
    if (f)
        fclose(f);
    CHECK(tern_graph_load_onnx_buffer_dir(buf, n, dir, &g, &err) == TERN_OK);
    if (g) {
        const tern_graph_value *v = tern_graph_value_at(g, tern_graph_output_id(g, 0));
        CHECK(v->constant && v->constant->count == 4);
        for (int k = 0; v->constant && k < 4; k++)
            CHECK_NEAR(v->constant->f[k], w[k], 0.0);
        tern_graph_free(g);
        g = NULL;
    }
    /* as bf16 the 16-byte file is twice what 4 elements need: refused, then an 8-byte file loads */
    n = model(buf, TERN_ELEM_BFLOAT16);
    CHECK(tern_graph_load_onnx_buffer_dir(buf, n, dir, &g, &err) == TERN_ERR_PARSE);
    CHECK(strstr(err.msg, "external data length 16 bytes, dims need 8 (4 x 2-byte bfloat16)") != NULL);
    const uint16_t h[4] = {0x3fc0, 0xc010, 0x4040, 0x3e00}; /* 1.5, -2.25, 3, 0.125 in bf16 */
    f = fopen(path, "wb");
    CHECK(f && fwrite(h, sizeof h, 1, f) == 1);
    if (f)
        fclose(f);
    CHECK(tern_graph_load_onnx_buffer_dir(buf, n, dir, &g, &err) == TERN_OK);
    if (g) {
        const tern_graph_value *v = tern_graph_value_at(g, tern_graph_output_id(g, 0));
        for (int k = 0; v->constant && k < 4; k++)
            CHECK_NEAR(v->constant->f[k], w[k], 0.0);
        tern_graph_free(g);
    }
    unlink(path);
    rmdir(dir);
    return check_report();
}
