/* Data-parallel training through the C API (train.h): the demo transformer data/models/gpt2_tiny.onnx (its input
 * fixes one row, [1, 32] token ids) trained as a byte-level language model on 2 ranks of trn1.32xlarge, one row
 * each. Checks that every rank's own optimizer step leaves it with weights equal bit for bit to rank 0's, that
 * ZeRO-1 gives the unsharded run's weights bit for bit with 1/2 of the optimizer state per rank, that the fixed
 * reduction tree gives the same weights on 1 and 2 ranks, and that the loss falls. */
#include "check.h"
#include "tern/train.h"

#define ROWS 2
#define SEQ 32

static const char *MODEL = "data/models/gpt2_tiny.onnx";

/* Two rows of text and their next bytes. */
static void batch(int64_t *ids, int64_t *next)
{
    const char *text = "data parallel training splits the batch over ranks; each all-reduces its gradients.";
    for (int r = 0; r < ROWS; r++)
        for (int s = 0; s < SEQ; s++) {
            ids[r * SEQ + s] = (unsigned char)text[r * 17 + s];
            next[r * SEQ + s] = (unsigned char)text[r * 17 + s + 1];
        }
}

static tern_trainer *make(int64_t ranks, int zero, int exact, int64_t chunks, double clip)
{
    tern_train_opts o;
    tern_train_opts_default(&o);
    o.loss = TERN_LOSS_CROSS_ENTROPY;
    o.optimizer = TERN_OPT_ADAMW;
    o.lr = 3e-3;
    o.clip_norm = clip;
    o.batch = ROWS;
    o.machine = "trn1.32xlarge";
    o.ranks = ranks;
    o.zero = zero;
    o.dp_exact = exact;
    o.dp_chunks = chunks;
    tern_trainer *t = NULL;
    tern_error err;
    tern_error_clear(&err);
    tern_status st = tern_train_create(MODEL, &o, &t, &err);
    CHECK_MSG(st == TERN_OK, "create (ranks %lld, zero %d, exact %d): %s", (long long)ranks, zero, exact, err.msg);
    return st == TERN_OK ? t : NULL;
}

static int steps(tern_trainer *t, int n, double *first, double *last)
{
    int64_t ids[ROWS * SEQ], next[ROWS * SEQ];
    batch(ids, next);
    for (int s = 0; s < n; s++) {
        tern_train_step_info info;
        tern_error err;
        tern_error_clear(&err);
        if (tern_train_step(t, ids, ROWS * SEQ, next, ROWS * SEQ, &info, &err)) {
            CHECK_MSG(0, "step %d: %s", s + 1, err.msg);
            return 0;
        }
        if (s == 0 && first)
            *first = info.loss;
        if (last)
            *last = info.loss;
    }
    return 1;
}

/* 1 when every weight of a and b is equal bit for bit (rank ra of a, rank rb of b). */
static int same_weights(const tern_trainer *a, unsigned ra, const tern_trainer *b, unsigned rb, const char *what)
{
    for (size_t i = 0; i < tern_train_weight_count(a); i++) {
        size_t na = 0, nb = 0;
        const float *wa = tern_train_rank_weight(a, ra, i, &na), *wb = tern_train_rank_weight(b, rb, i, &nb);
        if (!wa || !wb || na != nb || memcmp(wa, wb, na * sizeof(float))) {
            CHECK_MSG(0, "%s: weight '%s' differs", what, tern_train_weight_name(a, i));
            return 0;
        }
    }
    return 1;
}

int main(void)
{
    TEST_BEGIN("ranks");
    tern_trainer *dp = make(2, 0, 0, 0, 1.0);
    double first = 0, last = 0;
    if (dp && steps(dp, 4, &first, &last)) {
        CHECK(same_weights(dp, 0, dp, 1, "rank 1 vs rank 0"));
        CHECK_MSG(last < first, "loss %g -> %g", first, last);
        size_t n;
        CHECK(tern_train_rank_weight(dp, 2, 0, &n) == NULL);
        tern_train_dp_info in;
        tern_train_dp_stats(dp, &in);
        CHECK_EQ_INT(in.ranks, 2);
        CHECK(in.comm_seconds > 0 && in.compute_seconds > 0 && in.update_seconds > 0);
        CHECK(in.state_bytes_per_rank == in.state_bytes_total);
        printf("2 ranks: loss %.5f -> %.5f, all-reduce %s %.1f us of a step's %.1f us compute\n", first, last,
               in.algorithm, in.comm_seconds * 1e6, in.compute_seconds * 1e6);
    }
    tern_train_free(dp);

    TEST_BEGIN("zero1");
    tern_trainer *z0 = make(2, 0, 0, 0, 0), *z1 = make(2, 1, 0, 0, 0);
    if (z0 && z1 && steps(z0, 3, NULL, NULL) && steps(z1, 3, NULL, NULL)) {
        CHECK(same_weights(z0, 0, z1, 0, "ZeRO-1 vs none, rank 0"));
        CHECK(same_weights(z1, 1, z1, 0, "ZeRO-1 rank 1 vs rank 0"));
        tern_train_dp_info a, b;
        tern_train_dp_stats(z0, &a);
        tern_train_dp_stats(z1, &b);
        CHECK_EQ_INT(b.zero, 1);
        CHECK(b.state_bytes_total == a.state_bytes_total);
        /* half, padded to whole 8192-element rows of the shard (two states of 4 bytes) */
        CHECK_MSG(b.state_bytes_per_rank * 2 >= b.state_bytes_total &&
                      b.state_bytes_per_rank * 2 <= b.state_bytes_total + 2 * 8192 * 4 * 2,
                  "ZeRO-1 state per rank %llu of %llu", (unsigned long long)b.state_bytes_per_rank,
                  (unsigned long long)b.state_bytes_total);
    }
    tern_train_free(z0);
    tern_train_free(z1);

    TEST_BEGIN("exact");
    tern_trainer *e1 = make(1, 0, 1, 2, 1.0), *e2 = make(2, 0, 1, 0, 1.0);
    if (e1 && e2 && steps(e1, 3, NULL, NULL) && steps(e2, 3, NULL, NULL)) {
        CHECK(same_weights(e1, 0, e2, 0, "fixed tree: 1 rank vs 2"));
        CHECK(same_weights(e2, 1, e1, 0, "fixed tree: rank 1 of 2 vs 1 rank"));
    }
    tern_train_free(e1);
    tern_train_free(e2);

    TEST_BEGIN("errors");
    tern_train_opts o;
    tern_train_opts_default(&o);
    o.batch = 3;
    o.ranks = 2;
    o.machine = "trn1.32xlarge";
    tern_trainer *t = NULL;
    tern_error err;
    tern_error_clear(&err);
    CHECK(tern_train_create(MODEL, &o, &t, &err) != TERN_OK && t == NULL);
    CHECK_MSG(strstr(err.msg, "batch 3 does not split over 2 data-parallel ranks") != NULL, "%s", err.msg);
    return check_report();
}
