/* The C API of named data inputs (train.h: tern_train_opts.inputs, tern_train_step_inputs, tern_train_input_*)
 * on the demo transformer data/models/gpt2_tiny.onnx (one input, input_ids [1, 32]): binding it by name gives the
 * same trainer as the one-input call, a step through tern_train_step_inputs gives tern_train_step's losses and
 * weights bit for bit, and bad bindings are refused naming the input: an unknown name or a name twice at create
 * and at a step, no data for the input, values that are not whole rows. (Several inputs through the CLI:
 * tests/train/test_train_multi_input.sh.) */
#include "check.h"
#include "tern/train.h"

#define SEQ 32

static const char *MODEL = "data/models/gpt2_tiny.onnx";

static tern_trainer *make(const tern_train_input_rows *in, size_t n, tern_error *err)
{
    tern_train_opts o;
    tern_train_opts_default(&o);
    o.optimizer = TERN_OPT_ADAMW;
    o.lr = 3e-3;
    o.batch = 1;
    o.inputs = in;
    o.n_inputs = n;
    tern_trainer *t = NULL;
    tern_error_clear(err);
    if (tern_train_create(MODEL, &o, &t, err))
        return NULL;
    return t;
}

int main(void)
{
    const char *text = "named inputs bind each row of data to the model's own input by name.";
    int64_t ids[SEQ], next[SEQ];
    for (int s = 0; s < SEQ; s++) {
        ids[s] = (unsigned char)text[s];
        next[s] = (unsigned char)text[s + 1];
    }
    tern_error err;

    TEST_BEGIN("create");
    tern_train_input_rows b;
    memset(&b, 0, sizeof b);
    b.name = "input_ids";
    b.row_rank = 1;
    b.row_dims[0] = SEQ;
    tern_trainer *plain = make(NULL, 0, &err), *named = make(&b, 1, &err);
    CHECK_MSG(plain && named, "create: %s", err.msg);
    if (!plain || !named)
        return check_report();
    CHECK_EQ_INT(tern_train_input_count(named), 1);
    CHECK(!strcmp(tern_train_input_name(named, 0), "input_ids"));
    CHECK(tern_train_input_name(named, 1) == NULL);
    int64_t dims[8] = {0};
    CHECK_EQ_INT(tern_train_input_shape(named, 0, dims), 2);
    CHECK(dims[0] == 1 && dims[1] == SEQ);
    CHECK_EQ_INT(tern_train_input_is_int(named, 0), 1);
    CHECK(!strcmp(tern_train_data_name(named), "input_ids"));

    tern_train_input_rows bad[2] = {b, b};
    bad[0].name = "pixels";
    CHECK(make(bad, 1, &err) == NULL);
    CHECK_MSG(strstr(err.msg, "data for 'pixels'") && strstr(err.msg, "its data inputs: 'input_ids'"), "%s", err.msg);
    bad[0].name = "input_ids";
    CHECK(make(bad, 2, &err) == NULL);
    CHECK_MSG(strstr(err.msg, "input 'input_ids' is given data twice"), "%s", err.msg);
    bad[0].row_dims[0] = 31;
    CHECK(make(bad, 1, &err) == NULL);
    CHECK_MSG(strstr(err.msg, "input 'input_ids': dim 1 is 32 in the model, 31 in the data"), "%s", err.msg);

    TEST_BEGIN("step");
    for (int s = 0; s < 3; s++) {
        tern_train_step_info a, c;
        tern_train_data d = {"input_ids", ids, SEQ};
        tern_error_clear(&err);
        CHECK_MSG(tern_train_step(plain, ids, SEQ, next, SEQ, &a, &err) == TERN_OK, "%s", err.msg);
        CHECK_MSG(tern_train_step_inputs(named, &d, 1, next, SEQ, &c, &err) == TERN_OK, "%s", err.msg);
        CHECK_MSG(memcmp(&a.loss, &c.loss, sizeof a.loss) == 0, "step %d: loss %.9g vs %.9g", s + 1, a.loss, c.loss);
    }
    for (size_t i = 0; i < tern_train_weight_count(plain); i++) {
        size_t na = 0, nb = 0;
        const float *wa = tern_train_weight(plain, i, &na), *wb = tern_train_weight(named, i, &nb);
        CHECK_MSG(wa && wb && na == nb && !memcmp(wa, wb, na * sizeof(float)), "weight '%s' differs",
                  tern_train_weight_name(plain, i));
    }

    TEST_BEGIN("bad steps");
    tern_train_data two[2] = {{"input_ids", ids, SEQ}, {"input_ids", ids, SEQ}};
    CHECK(tern_train_step_inputs(named, two, 2, next, SEQ, NULL, &err) != TERN_OK);
    CHECK_MSG(strstr(err.msg, "input 'input_ids' is given data twice"), "%s", err.msg);
    two[1].name = "mask";
    CHECK(tern_train_step_inputs(named, two, 2, next, SEQ, NULL, &err) != TERN_OK);
    CHECK_MSG(strstr(err.msg, "data for 'mask': the model has no such input"), "%s", err.msg);
    CHECK(tern_train_step_inputs(named, two, 0, next, SEQ, NULL, &err) != TERN_OK);
    CHECK_MSG(strstr(err.msg, "the model's input 'input_ids' has no data"), "%s", err.msg);
    two[0].count = SEQ - 1;
    CHECK(tern_train_step_inputs(named, two, 1, next, SEQ, NULL, &err) != TERN_OK);
    CHECK_MSG(strstr(err.msg, "input 'input_ids': 31 values are not whole rows of 32 values"), "%s", err.msg);
    CHECK(tern_train_step(named, ids, 2 * SEQ, next, SEQ, NULL, &err) != TERN_OK);
    CHECK_MSG(strstr(err.msg, "2 rows of data given, 1 expected"), "%s", err.msg);
    CHECK_EQ_INT(tern_train_step_count(named), 3); /* refused steps change nothing */
    tern_train_free(plain);
    tern_train_free(named);
    return check_report();
}
