/* Malformed and unsupported models: every rejection names the node (or tensor), the op and the reason, and no
 * input crashes the importer: truncations of a real model at many lengths, random bytes, deep nesting, a dangling
 * input, an unknown op, mismatched shapes, a raw_data length that disagrees with dims, overflowing dims, a cycle, an
 * unsupported opset, and API misuse. */
#include "graph_test_util.h"

static unsigned char *read_all(const char *name, size_t *len)
{
    char path[512];
    gpath(path, sizeof path, name, ".onnx");
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc((size_t)n + 1);
    if (fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *len = (size_t)n;
    return buf;
}

/* load must fail with code and a message containing every needle */
static void expect_load_error(const char *name, tern_status code, const char *const *needles)
{
    TEST_BEGIN(name);
    char path[512];
    gpath(path, sizeof path, name, ".onnx");
    tern_graph *g = NULL;
    tern_error err = {0};
    tern_status st = tern_graph_load_onnx(path, &g, &err);
    CHECK_MSG(st == code, "%s: expected status %s, got %s (%s)", name, tern_status_name(code), tern_status_name(st),
              err.msg);
    CHECK(g == NULL);
    for (; *needles; needles++)
        CHECK_STR_CONTAINS(err.msg, *needles);
    tern_graph_free(g);
}

static void expect_infer_error(const char *name, tern_status code, const char *const *needles)
{
    TEST_BEGIN(name);
    tern_graph *g = gload(name);
    CHECK_MSG(g != NULL, "%s should load", name);
    if (!g)
        return;
    tern_error err = {0};
    tern_status st = tern_graph_infer(g, &err);
    CHECK_MSG(st == code, "%s: expected status %s, got %s (%s)", name, tern_status_name(code), tern_status_name(st),
              err.msg);
    for (; *needles; needles++)
        CHECK_STR_CONTAINS(err.msg, *needles);
    /* folding reports the same error; the graph stays usable (freeable) */
    tern_error err2 = {0};
    CHECK(tern_graph_fold_constants(g, NULL, &err2) == code);
    tern_graph_free(g);
}

static void truncations(void)
{
    TEST_BEGIN("truncations");
    size_t len;
    unsigned char *buf = read_all("gpt2", &len);
    CHECK_MSG(buf != NULL, "gpt2.onnx missing");
    if (!buf)
        return;
    int failed = 0, tried = 0;
    for (size_t cut = 0; cut < len; cut += len / 97 + 1) {
        tern_graph *g = NULL;
        tern_error err = {0};
        tern_status st = tern_graph_load_onnx_buffer(buf, cut, &g, &err);
        tried++;
        if (st) {
            failed++;
            CHECK_MSG(err.msg[0] != '\0', "truncation at %zu: empty message", cut);
        } else { /* a cut on a field boundary can still be a valid (smaller) model: it must infer or fail cleanly */
            tern_graph_infer(g, &err);
            tern_graph_free(g);
        }
    }
    CHECK_MSG(failed > tried / 2, "only %d of %d truncations were rejected", failed, tried);
    tern_graph *g = NULL;
    tern_error err = {0};
    CHECK(tern_graph_load_onnx_buffer(buf, len / 2, &g, &err) == TERN_ERR_PARSE);
    CHECK_STR_CONTAINS(err.msg, "truncated or corrupt");
    /* byte flips: no crash, any status */
    uint32_t s = 12345;
    for (int k = 0; k < 200; k++) {
        unsigned char *copy = malloc(len);
        memcpy(copy, buf, len);
        for (int f = 0; f < 4; f++) {
            s = s * 1664525u + 1013904223u;
            copy[(s >> 8) % len] ^= (unsigned char)(1u << (s % 8));
        }
        g = NULL;
        if (tern_graph_load_onnx_buffer(copy, len, &g, &err) == TERN_OK) {
            tern_graph_fold_constants(g, NULL, &err);
            tern_graph_free(g);
        }
        free(copy);
    }
    free(buf);
}

static size_t put_varint(unsigned char *p, uint64_t v)
{
    size_t n = 0;
    do {
        p[n++] = (unsigned char)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
    return n;
}

static void nesting(void)
{
    TEST_BEGIN("nesting");
    /* graph(7) -> node(1) -> attribute(5) -> g(6) -> node(1) -> ... 400 levels deep */
    size_t cap = 1 << 16, len = 0;
    unsigned char *buf = malloc(cap), *tmp = malloc(cap);
    static const unsigned fields[] = {1, 5, 6}; /* GraphProto.node, NodeProto.attribute, AttributeProto.g */
    for (int level = 0; level < 400; level++) {
        unsigned field = fields[(399 - level) % 3];
        size_t h = put_varint(tmp, (uint64_t)field << 3 | 2);
        h += put_varint(tmp + h, len);
        memcpy(tmp + h, buf, len);
        len += h;
        memcpy(buf, tmp, len);
    }
    size_t h = put_varint(tmp, 7 << 3 | 2); /* ModelProto.graph */
    h += put_varint(tmp + h, len);
    memcpy(tmp + h, buf, len);
    tern_graph *g = NULL;
    tern_error err = {0};
    CHECK(tern_graph_load_onnx_buffer(tmp, len + h, &g, &err) == TERN_ERR_PARSE);
    CHECK_STR_CONTAINS(err.msg, "nested deeper");
    free(buf), free(tmp);
    /* random bytes and an empty buffer */
    unsigned char junk[256];
    for (size_t k = 0; k < sizeof junk; k++)
        junk[k] = (unsigned char)(k * 37 + 11);
    CHECK(tern_graph_load_onnx_buffer(junk, sizeof junk, &g, &err) != TERN_OK);
    CHECK(tern_graph_load_onnx_buffer(junk, 0, &g, &err) == TERN_ERR_PARSE);
    CHECK_STR_CONTAINS(err.msg, "empty");
    CHECK(tern_graph_load_onnx("/nonexistent/model.onnx", &g, &err) == TERN_ERR_IO);
    CHECK_STR_CONTAINS(err.msg, "/nonexistent/model.onnx");
}

static void api_misuse(void)
{
    TEST_BEGIN("api misuse");
    tern_graph *g = gload("op_add");
    if (!g) {
        CHECK_MSG(0, "op_add missing");
        return;
    }
    tern_error err = {0};
    int64_t dims[3] = {2, 3, 4};
    CHECK(tern_graph_set_input_shape(g, "nope", 3, dims, &err) == TERN_ERR_NOT_FOUND);
    CHECK_STR_CONTAINS(err.msg, "\"nope\"");
    CHECK(tern_graph_set_input_shape(g, "a", 2, dims, &err) == TERN_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "rank");
    dims[1] = 7;
    CHECK(tern_graph_set_input_shape(g, "a", 3, dims, &err) == TERN_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "dim 1 is 3");
    CHECK(tern_graph_infer(g, &err) == TERN_OK);
    /* run with a wrongly shaped input */
    int64_t bad[3] = {2, 3, 5};
    tern_host_tensor *a, *b, *out[1] = {0};
    int64_t bd[2] = {3, 1};
    tern_host_tensor_new(TERN_ELEM_FLOAT, 3, bad, &a, NULL);
    tern_host_tensor_new(TERN_ELEM_FLOAT, 2, bd, &b, NULL);
    const tern_host_tensor *in[2] = {a, b};
    CHECK(tern_graph_run(g, in, out, &err) == TERN_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "graph input \"a\" dim 2 is 5");
    CHECK(out[0] == NULL);
    /* evaluating a node with operands that do not broadcast */
    in[0] = b;
    in[1] = a;
    int64_t d2[2] = {4, 2};
    tern_host_tensor *c;
    tern_host_tensor_new(TERN_ELEM_FLOAT, 2, d2, &c, NULL);
    in[0] = c;
    CHECK(tern_graph_eval_node(g, 0, in, out, &err) == TERN_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "(Add #0)");
    CHECK_STR_CONTAINS(err.msg, "do not broadcast");
    CHECK(tern_graph_eval_node(g, 5, in, out, &err) == TERN_ERR_RANGE);
    tern_host_tensor_free(a), tern_host_tensor_free(b), tern_host_tensor_free(c);
    /* string elements: an empty one may come as NULL (an ONNX string_data entry of no bytes, found by the fuzzer);
     * a NUL byte inside is refused, naming the element */
    int64_t d1[1] = {2};
    tern_host_tensor *st;
    CHECK(tern_host_tensor_new(TERN_ELEM_STRING, 1, d1, &st, &err) == TERN_OK);
    CHECK(tern_host_tensor_set_text(st, 0, "ab", 2, &err) == TERN_OK);
    CHECK(tern_host_tensor_set_text(st, 0, NULL, 0, &err) == TERN_OK);
    CHECK(!strcmp(st->s[0], ""));
    CHECK(tern_host_tensor_set_text(st, 1, "a\0b", 3, &err) == TERN_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "string element 1 holds a NUL byte");
    CHECK(tern_host_tensor_set_text(st, 2, "x", 1, &err) == TERN_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "element 2 is not a string of this tensor");
    tern_host_tensor_free(st);
    CHECK(!tern_graph_eval_supported("", "FrobnicateTensor"));
    CHECK(tern_graph_eval_supported("", "Conv"));
    CHECK(tern_graph_eval_supported("tern", "MatMulBias"));
    CHECK(!tern_graph_eval_supported("com.microsoft", "Gelu"));
    tern_graph_free(g);
}

int main(void)
{
    expect_load_error("bad_missing_input", TERN_ERR_PARSE, (const char *[]){"\"adder\"", "(Add #0)", "\"ghost\"", NULL});
    expect_load_error("bad_raw_data_len", TERN_ERR_PARSE,
                      (const char *[]){"initializer tensor \"w\"", "raw_data holds 10 bytes, dims need 16", NULL});
    expect_load_error("bad_dims_overflow", TERN_ERR_RANGE, (const char *[]){"\"huge\"", "overflows", NULL});
    expect_load_error("bad_cycle", TERN_ERR_PARSE, (const char *[]){"cycle", "node \"n", NULL});
    expect_load_error("bad_opset18", TERN_ERR_UNSUPPORTED, (const char *[]){"opset 18", NULL});
    expect_infer_error("bad_unknown_op", TERN_ERR_UNSUPPORTED,
                       (const char *[]){"node \"frob\"", "FrobnicateTensor", "not supported", NULL});
    expect_infer_error("bad_shape_mismatch", TERN_ERR_INVALID,
                       (const char *[]){"node \"mm\"", "(MatMul #0)", "inner dims differ", "K = 3", "K = 4", NULL});
    expect_infer_error("bad_reshape_bad", TERN_ERR_INVALID,
                       (const char *[]){"node \"rs\"", "Reshape", "asks for 8 elements, the input has 6", NULL});
    truncations();
    nesting();
    api_misuse();
    return check_report();
}
