/* The vectorised ScalarE functions (src/sim/act_simd.c) against their definition, over every fp32 input: for each
 * of the 2^32 bit patterns t (NaNs, infinities, signed zeros, subnormals included), the vector row's result must
 * have the bits of the scalar loop's (exec_scalar.c: (float)act_eval(f, (double)t), or the fp32 operations
 * themselves for copy and relu). With scale 1 and bias -0 the affine step t = in * 1 + (-0) is t itself for every
 * input, so the function sees every fp32 value. Then a few million random inputs with random scales and biases
 * (the affine step: product and sum rounded apart), rows of every length 1..40 and a row computed in place.
 * Usage: test_act_exhaustive [FUNC]: without FUNC, copy and relu over every input and every function on the random
 * affine steps (sim/test_act_exhaustive, seconds); with FUNC (exp, sigmoid, silu, gelu_tanh, ...) that function
 * over every input: one CTest each, sim/test_act_exhaustive_FUNC, label "long" (tens of seconds each: the scalar
 * side calls libm 2^32 times). Hosts without AVX-512 never take the vector path: SKIP (exit 77). */
#include <pthread.h>

#include "check.h"
#include "sim/act.h"

static const struct {
    const char *name;
    tern_act_func f;
} funcs[] = {{"copy", TERN_ACT_COPY},       {"relu", TERN_ACT_RELU}, {"exp", TERN_ACT_EXP},
             {"sigmoid", TERN_ACT_SIGMOID}, {"silu", TERN_ACT_SILU}, {"gelu_tanh", TERN_ACT_GELU_TANH},
             {"gelu", TERN_ACT_GELU},       {"tanh", TERN_ACT_TANH}};

/* x86's rule for an operation with a NaN operand, which the scalar loop's compiled code follows (mulss/addss with
 * the element in the destination register) and the vector row too: the first operand's NaN, quieted, else the
 * second's. Written out so that the compiler's folding (x * 1 -> x would keep a signalling NaN) and operand order
 * in this file do not matter. */
static float quiet(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    u |= 0x00400000u;
    memcpy(&x, &u, 4);
    return x;
}
static float mul_x86(float a, float b) { return a != a ? quiet(a) : b != b ? quiet(b) : a * b; }
static float add_x86(float a, float b) { return a != a ? quiet(a) : b != b ? quiet(b) : a + b; }

/* The scalar loop of exec_scalar.c's act_part for one element. */
static float scalar(tern_act_func f, float in, float sc, float b)
{
    float t = mul_x86(in, sc);
    t = add_x86(t, b);
    if (f == TERN_ACT_COPY)
        return t;
    if (f == TERN_ACT_RELU)
        return t > 0.0f ? t : (t != t ? t : 0.0f);
    return (float)act_eval(f, (double)t);
}

typedef struct {
    tern_act_func f;
    unsigned part, parts;
    uint64_t bad, first_bad_in;
    uint32_t first_got, first_want;
} sweep;

enum { CHUNK = 1 << 16 };

static void *sweep_run(void *arg)
{
    sweep *s = arg;
    float *in = malloc(sizeof(float) * CHUNK), *out = malloc(sizeof(float) * CHUNK);
    for (uint32_t hi = s->part; hi < (1u << 16); hi += s->parts) {
        for (uint32_t lo = 0; lo < CHUNK; lo++) {
            uint32_t bits = hi << 16 | lo;
            memcpy(&in[lo], &bits, 4);
        }
        act_row_simd(s->f, in, out, CHUNK, 1.0f, -0.0f);
        for (uint32_t lo = 0; lo < CHUNK; lo++) {
            float want = scalar(s->f, in[lo], 1.0f, -0.0f);
            if (memcmp(&want, &out[lo], 4) != 0) {
                if (!s->bad) {
                    memcpy(&s->first_got, &out[lo], 4);
                    memcpy(&s->first_want, &want, 4);
                    s->first_bad_in = hi << 16 | lo;
                }
                s->bad++;
            }
        }
    }
    free(in);
    free(out);
    return NULL;
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd32(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}

/* A random fp32 of every kind: mostly moderate values, sometimes any bit pattern. */
static float rndf(void)
{
    uint32_t r = rnd32();
    if (r % 4 == 0) {
        uint32_t bits = rnd32();
        float f;
        memcpy(&f, &bits, 4);
        return f;
    }
    return ldexpf((float)(rnd32() % 2000000) / 1000000.0f - 1.0f, (int)(rnd32() % 16) - 8);
}

/* Every fp32 input of f through the vector row, against the scalar loop. */
static void exhaustive(const char *fname, tern_act_func f)
{
    char name[96];
    snprintf(name, sizeof name, "%s: every fp32 input", fname);
    TEST_BEGIN(name);
    enum { PARTS = 2 };
    sweep s[PARTS];
    pthread_t th[PARTS];
    for (unsigned p = 0; p < PARTS; p++) {
        memset(&s[p], 0, sizeof s[p]);
        s[p].f = f;
        s[p].part = p;
        s[p].parts = PARTS;
        pthread_create(&th[p], NULL, sweep_run, &s[p]);
    }
    uint64_t bad = 0;
    for (unsigned p = 0; p < PARTS; p++) {
        pthread_join(th[p], NULL);
        if (s[p].bad && !bad)
            CHECK_MSG(0, "input 0x%08llx: got 0x%08x, want 0x%08x", (unsigned long long)s[p].first_bad_in,
                      s[p].first_got, s[p].first_want);
        bad += s[p].bad;
    }
    CHECK_MSG(bad == 0, "%llu of 2^32 inputs differ", (unsigned long long)bad);
    printf("%s: %llu of 4294967296 inputs differ\n", fname, (unsigned long long)bad);
}

/* The affine step with other scales and biases, rows of every short length, in place. */
static void affine(const char *fname, tern_act_func f)
{
    char name[96];
    snprintf(name, sizeof name, "%s: random scale, bias, lengths, in place", fname);
    TEST_BEGIN(name);
    float in[40], out[40], inplace[40];
    uint64_t rbad = 0;
    for (int trial = 0; trial < 100000; trial++) {
        size_t n = 1 + (size_t)trial % 40;
        float sc = rndf(), b = rndf();
        for (size_t i = 0; i < n; i++)
            in[i] = inplace[i] = rndf();
        act_row_simd(f, in, out, n, sc, b);
        act_row_simd(f, inplace, inplace, n, sc, b);
        for (size_t i = 0; i < n; i++) {
            float want = scalar(f, in[i], sc, b);
            if (memcmp(&want, &out[i], 4) != 0 && rbad < 5)
                fprintf(stderr, "in %a sc %a b %a: got %a want %a\n", in[i], sc, b, out[i], want);
            rbad += memcmp(&want, &out[i], 4) != 0;
            rbad += memcmp(&want, &inplace[i], 4) != 0;
        }
    }
    CHECK_MSG(rbad == 0, "%llu results differ", (unsigned long long)rbad);
}

int main(int argc, char **argv)
{
    const size_t nf = sizeof funcs / sizeof funcs[0];
    int fi = -1;
    for (size_t i = 0; argc == 2 && i < nf; i++)
        if (!strcmp(argv[1], funcs[i].name))
            fi = (int)i;
    if (argc > 2 || (argc == 2 && fi < 0)) {
        fprintf(stderr, "usage: test_act_exhaustive [copy|relu|exp|sigmoid|silu|gelu_tanh|gelu]\n");
        return 2;
    }
    if (!act_simd_enabled()) {
        printf("SKIP: no AVX-512 on this host (or TERN_SIMD caps it): the vector activations never run\n");
        return 77;
    }
    TEST_BEGIN("every listed function is vectorised, and only those");
    for (int f = 0; f < TERN_ACT_COUNT; f++) {
        int listed = 0;
        for (size_t i = 0; i < nf; i++)
            listed |= funcs[i].f == (tern_act_func)f;
        CHECK_MSG(act_simd_has((tern_act_func)f) == listed, "function %d: act_simd_has %d, listed here %d", f,
                  act_simd_has((tern_act_func)f), listed);
    }
    if (fi >= 0) { /* one function, exhaustively (the long CTests) */
        exhaustive(funcs[fi].name, funcs[fi].f);
        affine(funcs[fi].name, funcs[fi].f);
        return check_report();
    }
    /* without an argument: the cheap ones exhaustively, every one on random affine steps */
    for (size_t i = 0; i < nf; i++) {
        if (funcs[i].f == TERN_ACT_COPY || funcs[i].f == TERN_ACT_RELU)
            exhaustive(funcs[i].name, funcs[i].f);
        affine(funcs[i].name, funcs[i].f);
    }
    return check_report();
}
