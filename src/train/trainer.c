/* The tern_train_* API: a trainer loads the model, binds the batch, builds the training-step graph
 * (step_graph.c), compiles it once for the machine and loads it onto a simulated NeuronCore. Each step feeds the
 * batch, the targets built from the labels (checked against the class count), the weights, the optimizer state
 * and the step's scalars (learning rate, Adam's bias corrections, computed in double on the host as PyTorch does
 * in Python), executes, checks the loss, the gradient norm and the updated weights for non-finite values, and
 * only then takes the updated weights and state for the next step. */
#include "train_internal.h"
#include "mp_internal.h"
#include "tern/transport.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void tern_train_opts_default(tern_train_opts *o)
{
    memset(o, 0, sizeof *o);
    o->loss = TERN_LOSS_CROSS_ENTROPY;
    o->ignore_index = -100;
    o->optimizer = TERN_OPT_ADAMW;
    o->lr = 1e-3;
    o->beta1 = 0.9;
    o->beta2 = 0.999;
    o->eps = 1e-8;
    o->weight_decay = 0.01;
    o->batch = 1;
    o->row_rank = -1;
    o->matmul_dtype = TERN_DTYPE_FP32;
}

double tern_train_lr(const tern_train_opts *o, uint64_t step)
{
    double t = (double)step, w = (double)o->warmup_steps, total = (double)o->total_steps;
    if (o->warmup_steps > 0 && t < w)
        return o->lr * t / w;
    if (o->schedule == TERN_LR_CONSTANT || total <= w)
        return o->lr;
    double frac = (t - w) / (total - w);
    if (frac > 1)
        frac = 1;
    if (o->schedule == TERN_LR_LINEAR)
        return o->lr * (1 - frac);
    return o->lr * 0.5 * (1 + cos(M_PI * frac));
}

static char *dup_s(const char *s)
{
    if (!s)
        return NULL;
    size_t n = strlen(s);
    char *d = malloc(n + 1);
    if (d)
        memcpy(d, s, n + 1);
    return d;
}

void train_free_weights(train_weight *ws, size_t nw)
{
    for (size_t i = 0; ws && i < nw; i++) {
        train_weight *w = &ws[i];
        free(w->name);
        free(w->val);
        free(w->out_name);
        for (int k = 0; k < 2; k++) {
            free(w->state[k]);
            free(w->state_in[k]);
            free(w->state_out[k]);
        }
        free(w->grad);
        free(w->grad_out);
        free(w->acc_in);
        free(w->acc_out);
        free(w->acc);
        for (int k = 0; k < 3; k++)
            free(w->spare[k]);
    }
    free(ws);
}

void tern_train_free(tern_trainer *t)
{
    if (!t)
        return;
    train_dp_free(t);
    train_mp_free(t);
    train_free_weights(t->w, t->nw);
    train_frozen_free(t);
    train_dropout_free(t->drop, t->ndrop);
    tern_rt_free(t->rt);
    tern_exe_free(&t->exe);
    tern_rt_free(t->rt_micro);
    tern_exe_free(&t->exe_micro);
    tern_graph_free(t->g);
    free(t->path);
    free(t->machine);
    free(t->loss_out);
    free(t->data_name);
    free(t->read_out);
    free(t->scratch);
    free(t);
}

static tern_status check_opts(const tern_train_opts *o, tern_error *err)
{
    if (o->batch < 1)
        return tern_error_set(err, TERN_ERR_RANGE, "train: batch %lld must be at least 1", (long long)o->batch);
    if (!(o->lr >= 0) || !isfinite(o->lr))
        return tern_error_set(err, TERN_ERR_RANGE, "train: learning rate %g must be finite and >= 0", o->lr);
    if (!(o->label_smoothing >= 0 && o->label_smoothing < 1))
        return tern_error_set(err, TERN_ERR_RANGE, "train: label smoothing %g outside [0, 1)", o->label_smoothing);
    if (o->optimizer != TERN_OPT_SGD &&
        (!(o->beta1 >= 0 && o->beta1 < 1) || !(o->beta2 >= 0 && o->beta2 < 1) || !(o->eps > 0)))
        return tern_error_set(err, TERN_ERR_RANGE, "train: Adam betas (%g, %g) must lie in [0, 1) and eps %g > 0",
                              o->beta1, o->beta2, o->eps);
    if (o->n_inputs && !o->inputs)
        return tern_error_set(err, TERN_ERR_INVALID, "train: %zu data inputs bound and no bindings given", o->n_inputs);
    if (o->nesterov && o->momentum == 0)
        return tern_error_set(err, TERN_ERR_INVALID, "train: Nesterov momentum needs a momentum > 0");
    if ((unsigned)o->rounding > TERN_ROUND_STOCHASTIC)
        return tern_error_set(err, TERN_ERR_INVALID, "train: rounding mode %d (RNE 0 or stochastic 1)", (int)o->rounding);
    if (o->recompute && (o->ranks > 1 || o->zero || o->dp_exact))
        return tern_error_set(err, TERN_ERR_UNSUPPORTED,
                              "train: activation recomputation with data parallelism is not supported yet");
    if (o->matmul_dtype != TERN_DTYPE_FP32 && o->matmul_dtype != TERN_DTYPE_BF16)
        return tern_error_set(err, TERN_ERR_UNSUPPORTED, "train: precision %s (fp32 or bf16 matmuls)",
                              tern_dtype_name(o->matmul_dtype));
    if (o->sp < 0 || o->sp > 1)
        return tern_error_set(err, TERN_ERR_INVALID, "train: sp=%d (sequence parallelism: 0 or 1)", o->sp);
    if (o->sp && o->tp <= 1)
        return tern_error_set(err, TERN_ERR_INVALID,
                              "train: sp=1 (sequence parallelism) needs tensor parallelism (tp > 1; tp=%lld): it "
                              "splits the rows between the tensor-parallel regions over the tensor ranks",
                              (long long)(o->tp > 1 ? o->tp : 1));
    /* over MPI processes: data parallelism spreads its ranks' chips (data_parallel.c), a tensor/pipeline layout
     * its data replicas (mp_procs.c, which refuses one replica) */
    unsigned K = o->transport ? o->transport->nprocs : 1;
    if (K > 1 && o->ranks < 2 && !(o->tp > 1 || o->pp > 1 || o->micro > 1 || o->vpp > 1))
        return tern_error_set(err, TERN_ERR_INVALID,
                              "train: %u MPI processes for 1 core: only data-parallel training (--cores N) spreads "
                              "over processes, each running whole chips of the ranks; run it without mpirun",
                              K);
    return TERN_OK;
}

/* "'a', 'b', 'c'": the model's data inputs, for messages. */
static void input_list(const tern_graph *g, char *buf, size_t len)
{
    size_t n = 0;
    buf[0] = '\0';
    for (int i = 0; i < tern_graph_input_count(g) && n + 1 < len; i++) {
        int w = snprintf(buf + n, len - n, "%s'%s'", i ? ", " : "", tern_graph_value_at(g, tern_graph_input_id(g, i))->name);
        if (w < 0 || (size_t)w >= len - n)
            break;
        n += (size_t)w;
    }
}

/* Binds one data input's shape: [batch, row...], the row given by row_rank/row_dims (rank < 0: the model's). */
static tern_status bind_input(tern_trainer *t, const tern_graph_value *v, int row_rank, const int64_t *row_dims,
                              train_input *in, tern_error *err)
{
    if (v->type != TERN_ELEM_FLOAT && v->type != TERN_ELEM_INT64 && v->type != TERN_ELEM_INT32)
        return tern_error_set(err, TERN_ERR_UNSUPPORTED,
                              "train: input '%s' is %s; float data or int64/int32 indices (token ids) are supported",
                              v->name, tern_elem_name(v->type));
    in->is_int = v->type != TERN_ELEM_FLOAT;
    if (v->rank < 1)
        return tern_error_set(err, TERN_ERR_INVALID, "train: input '%s' has rank %d; the batch is its axis 0",
                              v->name, v->rank);
    int64_t dims[TERN_GRAPH_MAX_RANK];
    dims[0] = t->o.batch;
    if (v->dims[0] >= 0 && v->dims[0] != t->o.batch)
        return tern_error_set(err, TERN_ERR_INVALID, "train: input '%s': the model fixes the batch at %lld, --batch is %lld",
                              v->name, (long long)v->dims[0], (long long)t->o.batch);
    if (row_rank >= 0 && row_rank != v->rank - 1)
        return tern_error_set(err, TERN_ERR_INVALID,
                              "train: input '%s': rows of the data have rank %d, the model expects rank %d", v->name,
                              row_rank, v->rank - 1);
    for (int d = 1; d < v->rank; d++) {
        int64_t given = row_rank >= 0 ? row_dims[d - 1] : v->dims[d];
        if (given < 0)
            return tern_error_set(err, TERN_ERR_INVALID, "train: input '%s': dim %d is symbolic and no data binds it",
                                  v->name, d);
        if (v->dims[d] >= 0 && v->dims[d] != given)
            return tern_error_set(err, TERN_ERR_INVALID, "train: input '%s': dim %d is %lld in the model, %lld in the data",
                                  v->name, d, (long long)v->dims[d], (long long)given);
        dims[d] = given;
    }
    uint64_t row = 1, count = 0, bytes = 0;
    tern_status st = tern_dims_product(dims + 1, v->rank - 1, 1, 0, &row, "train: a row of the data", err);
    if (st)
        return tern_error_prefix(err, "train: input '%s': ", v->name);
    if (!tern_mul_u64(row, (uint64_t)t->o.batch, &count) || !tern_mul_u64(count, 8, &bytes) || bytes > SIZE_MAX / 4)
        return tern_error_set(err, TERN_ERR_RANGE, "train: input '%s': %lld rows of %llu values overflow", v->name,
                              (long long)t->o.batch, (unsigned long long)row);
    if (strlen(v->name) >= sizeof in->name)
        return tern_error_set(err, TERN_ERR_UNSUPPORTED, "train: input '%.64s...': a name of %zu bytes (at most %zu)",
                              v->name, strlen(v->name), sizeof in->name - 1);
    memcpy(in->name, v->name, strlen(v->name) + 1);
    in->rank = v->rank;
    memcpy(in->dims, dims, sizeof dims);
    in->count = (size_t)count;
    in->row = (size_t)row;
    return tern_graph_set_input_shape(t->g, v->name, v->rank, dims, err);
}

/* Binds every data input (each graph input that is not an initializer) and lays out the packed row: with
 * o.inputs, by name (each input named once); else one input shaped by o.row_rank/row_dims, or several whose
 * declared dims fix their rows. */
tern_status train_bind_data(tern_trainer *t, tern_error *err)
{
    tern_graph *g = t->g;
    const tern_train_opts *o = &t->o;
    int nin = tern_graph_input_count(g);
    char names[512];
    input_list(g, names, sizeof names);
    free(t->data_name);
    t->data_name = NULL;
    t->nin = 0;
    t->row_bytes = t->data_bytes = t->data_count = 0;
    for (size_t k = 0; k < o->n_inputs; k++) {
        const char *nm = o->inputs[k].name;
        int found = 0;
        if (!nm || !*nm)
            return tern_error_set(err, TERN_ERR_INVALID, "train: data binding %zu has no input name", k);
        for (size_t j = 0; j < k; j++)
            if (!strcmp(o->inputs[j].name, nm))
                return tern_error_set(err, TERN_ERR_INVALID, "train: input '%s' is given data twice", nm);
        for (int i = 0; i < nin && !found; i++)
            found = !strcmp(tern_graph_value_at(g, tern_graph_input_id(g, i))->name, nm);
        if (!found)
            return tern_error_set(err, TERN_ERR_NOT_FOUND,
                                  "train: data for '%s': the model '%s' has no such input (its data inputs: %s)", nm,
                                  t->path, nin ? names : "none");
    }
    if (!o->n_inputs && nin > 1 && o->row_rank >= 0)
        return tern_error_set(err, TERN_ERR_INVALID,
                              "train: the model '%s' has %d data inputs (%s): give each its data by name (--data "
                              "NAME=FILE, tern_train_opts.inputs)",
                              t->path, nin, names);
    if (nin == 0)
        return TERN_OK;
    if (nin > TRAIN_MAX_INPUTS)
        return tern_error_set(err, TERN_ERR_UNSUPPORTED, "train: the model '%s' has %d data inputs (%s); at most %d",
                              t->path, nin, names, TRAIN_MAX_INPUTS);
    for (int i = 0; i < nin; i++) {
        const tern_graph_value *v = tern_graph_value_at(g, tern_graph_input_id(g, i));
        int row_rank = o->row_rank;
        const int64_t *row_dims = o->row_dims;
        if (o->n_inputs) {
            const tern_train_input_rows *b = NULL;
            for (size_t k = 0; k < o->n_inputs && !b; k++)
                if (!strcmp(o->inputs[k].name, v->name))
                    b = &o->inputs[k];
            if (!b)
                return tern_error_set(err, TERN_ERR_INVALID,
                                      "train: the model's input '%s' has no data (every data input needs some: %s)",
                                      v->name, names);
            row_rank = b->row_rank;
            row_dims = b->row_dims;
        }
        train_input *in = &t->in[i];
        tern_status st = bind_input(t, v, row_rank, row_dims, in, err);
        if (st)
            return st;
        t->nin = (size_t)i + 1;
        in->off = t->row_bytes;
        t->row_bytes += in->row * (in->is_int ? sizeof(int64_t) : sizeof(float));
    }
    t->data_bytes = t->row_bytes * (size_t)t->o.batch; /* bounded: each input's batch x 8 bytes is checked above */
    t->data_count = t->in[0].count;
    if (!(t->data_name = dup_s(t->in[0].name)))
        return tern_error_set(err, TERN_ERR_NOMEM, "train: out of memory");
    return TERN_OK;
}

/* Gradient accumulation: the micro-step graph, built from the model again (loss and gacc + g, no update) into a
 * scratch trainer whose weight records are dropped after (the step graph's t->w keep the values), compiled and
 * loaded beside the step. */
static tern_status build_micro(tern_trainer *t, tern_error *err)
{
    if (t->o.accumulate <= 1)
        return TERN_OK;
    tern_trainer m;
    memset(&m, 0, sizeof m);
    m.o = t->o;
    m.o.grads_as_outputs = 0;
    m.path = t->path;
    tern_status st = tern_graph_load_onnx(t->path, &m.g, err);
    if (!st)
        st = train_bind_data(&m, err);
    if (!st)
        st = train_build_step_graph(&m, 1, err);
    for (size_t i = 0; !st && i < t->nw; i++)
        if (i >= m.nw || strcmp(m.w[i].name, t->w[i].name) || m.w[i].trained != t->w[i].trained)
            st = tern_error_set(err, TERN_ERR_INVALID, "train: internal: the micro-step graph's weights differ");
    if (!st) {
        tern_compile_opts co;
        tern_compile_opts_default(&co);
        co.machine = t->machine;
        co.matmul_dtype = t->o.matmul_dtype;
        co.no_fusion = t->o.recompute != 0; /* as the step (below) */
        co.no_elementwise_fusion = t->o.no_fused_elementwise;
        tern_compile_report rep;
        if ((st = tern_compile(m.g, &co, &t->exe_micro, &rep, err)))
            tern_error_prefix(err, "train: compiling the micro-step: ");
        t->flops_micro = rep.model_flops;
    }
    if (!st) {
        tern_rt_options ro;
        memset(&ro, 0, sizeof ro);
        ro.mode = t->o.timing_only ? TERN_MODE_TIMING_ONLY : TERN_MODE_FUNCTIONAL;
        st = tern_rt_create(&t->exe_micro, t->machine, &ro, &t->rt_micro, err);
    }
    for (size_t i = 0; i < t->nw && !st; i++)
        if (t->w[i].trained && !(t->w[i].acc = calloc(t->w[i].count + 1, sizeof(float))))
            st = tern_error_set(err, TERN_ERR_NOMEM, "train: out of memory");
    for (size_t i = 0; i < m.nw; i++) {
        free(m.w[i].name);
        free(m.w[i].val);
        free(m.w[i].acc_in);
        free(m.w[i].acc_out);
        free(m.w[i].out_name);
    }
    free(m.w);
    /* the micro-step reads the step graph's masks (the same model: the same names and shapes) */
    for (size_t k = 0; k < m.ndrop && !st; k++)
        if (k >= t->ndrop || strcmp(m.drop[k].input, t->drop[k].input) || m.drop[k].count != t->drop[k].count)
            st = tern_error_set(err, TERN_ERR_INVALID, "train: internal: the micro-step graph's Dropouts differ");
    train_dropout_free(m.drop, m.ndrop);
    free(m.data_name);
    free(m.read_out);
    tern_graph_free(m.g);
    return st;
}

/* The loaded step's interface entry called `name` (the model's name, else the program tensor's, as the runtime
 * looks it up). */
static const tern_exe_io *exe_io(const tern_exe *x, const char *name, int out)
{
    size_t n = out ? x->num_outputs : x->num_inputs;
    const tern_exe_io *io = out ? x->outputs : x->inputs;
    for (int by_tensor = 0; by_tensor < 2; by_tensor++)
        for (size_t i = 0; i < n; i++)
            if (!strcmp(by_tensor ? io[i].name : tern_exe_io_name(&io[i]), name))
                return &io[i];
    return NULL;
}

/* 1 when every updated weight and state output can become its input on the device (tern_rt_carry's rule). */
static int carry_eligible(const tern_trainer *t)
{
    const tern_exe *x = tern_rt_exe(t->rt);
    for (size_t i = 0; i < t->nw; i++) {
        const train_weight *w = &t->w[i];
        if (!w->trained && !w->out_name)
            continue;
        for (int k = 0; k < 1 + w->n_state; k++) {
            const tern_exe_io *in = exe_io(x, k == 0 ? w->name : w->state_in[k - 1], 0);
            const tern_exe_io *out = exe_io(x, k == 0 ? w->out_name : w->state_out[k - 1], 1);
            if (!in || !out || in->dtype != out->dtype || in->text_bytes || out->text_bytes ||
                tern_exe_io_bytes(in) != tern_exe_io_bytes(out) || tern_exe_io_bytes(in) != w->count * 
                tern_dtype_size((tern_dtype)in->dtype) || (x->cores > 1 && in->split_batch != out->split_batch))
                return 0;
        }
    }
    return 1;
}

tern_status tern_train_create(const char *onnx_path, const tern_train_opts *o_in, tern_trainer **out, tern_error *err)
{
    *out = NULL;
    tern_train_opts o;
    if (o_in)
        o = *o_in;
    else
        tern_train_opts_default(&o);
    tern_status st = check_opts(&o, err);
    if (st)
        return st;
    tern_trainer *t = calloc(1, sizeof *t);
    if (!t)
        return tern_error_set(err, TERN_ERR_NOMEM, "train: out of memory");
    tern_exe_init(&t->exe);
    t->o = o;
    t->path = dup_s(onnx_path);
    t->machine = dup_s(o.machine ? o.machine : "trn1.2xlarge");
    t->o.machine = t->machine;
    t->o.output = NULL; /* kept in loss_out's copy below: the caller's string may not outlive create */
    if (!t->path || !t->machine) {
        tern_train_free(t);
        return tern_error_set(err, TERN_ERR_NOMEM, "train: out of memory");
    }
    if (o.output) {
        t->loss_out = dup_s(o.output);
        t->o.output = t->loss_out;
        if (!t->loss_out) {
            tern_train_free(t);
            return tern_error_set(err, TERN_ERR_NOMEM, "train: out of memory");
        }
    }
    tern_exe_init(&t->exe_micro);
    /* tensor / pipeline parallelism: pipeline_parallel.c builds and compiles */
    if (o.tp > 1 || o.pp > 1 || o.micro > 1 || o.vpp > 1) {
        if ((st = train_mp_create(t, err))) {
            tern_train_free(t);
            return st;
        }
        *out = t;
        return TERN_OK;
    }
    if (o.ranks > 1 || o.zero || o.dp_exact) { /* data parallelism: data_parallel.c builds and compiles */
        if ((st = train_dp_create(t, err))) {
            tern_train_free(t);
            return st;
        }
        t->o.inputs = NULL; /* the caller's bindings are read during create only */
        t->o.n_inputs = 0;
        *out = t;
        return TERN_OK;
    }
    if ((st = tern_graph_load_onnx(onnx_path, &t->g, err)) || (st = train_bind_data(t, err)) ||
        (st = train_build_step_graph(t, 0, err)) || (st = build_micro(t, err))) {
        tern_train_free(t);
        return st;
    }
    tern_compile_opts co;
    tern_compile_opts_default(&co);
    co.machine = t->machine;
    co.matmul_dtype = o.matmul_dtype;
    /* recomputation leaves a segment's original forward values fewer readers (the gradient rules read the
     * copies), so a pattern the fuser leaves alone in the plain step could fuse there: compile without fusion.
     * The fusions the plain step gets (a linear layer's bias) round as the unfused nodes do, so the two agree
     * bit for bit (test_train_recompute.sh) */
    co.no_fusion = o.recompute != 0;
    co.no_elementwise_fusion = o.no_fused_elementwise;
    /* the updated weights and state move onto their inputs between steps (t->carry, below): inputs and outputs
     * that start on an HBM page change owners page by page instead of being copied (tern_rt_carry). A timing-only
     * step is compiled the same way, so that it predicts the functional step's time to the bit (the placement
     * moves scratch tensors, and with them the waits between instructions, a little). */
    if (o.accumulate <= 1)
        co.hbm_io_align = tern_core_hbm_page_bytes();
    tern_compile_report rep;
    /* the compiler optimises the graph in place: compile a copy's worth by keeping t->g for names only */
    if ((st = tern_compile(t->g, &co, &t->exe, &rep, err))) {
        tern_error_prefix(err, "train: compiling the step: ");
        tern_train_free(t);
        return st;
    }
    t->flops = rep.model_flops;
    t->hbm = rep.hbm_bytes;
    for (size_t i = 0; i < t->nw; i++)
        t->state_bytes += (uint64_t)t->w[i].count * (o.bf16_weights ? 2 : 4) * (uint64_t)(1 + t->w[i].n_state);
    tern_core_config cfg;
    if ((st = tern_core_config_load(t->machine, &cfg, err))) {
        tern_train_free(t);
        return st;
    }
    t->peak = 2.0 * cfg.pe_rows * cfg.pe_cols * cfg.timing.clock_hz[TERN_ENGINE_TENSOR];
    /* the step's HBM: weights, optimizer state, their updated copies, gradients and activations as the
     * compiler placed them */
    if (cfg.hbm_bytes && rep.hbm_bytes > cfg.hbm_bytes) {
        tern_error_set(err, TERN_ERR_RANGE,
                       "train: the training step needs %llu bytes of HBM per core (weights and optimizer state %llu); "
                       "%s gives a core %llu",
                       (unsigned long long)rep.hbm_bytes, (unsigned long long)t->state_bytes, t->machine,
                       (unsigned long long)cfg.hbm_bytes);
        tern_train_free(t);
        return TERN_ERR_RANGE;
    }
    tern_rt_options ro;
    memset(&ro, 0, sizeof ro);
    ro.mode = o.timing_only ? TERN_MODE_TIMING_ONLY : TERN_MODE_FUNCTIONAL;
    if ((st = tern_rt_create(&t->exe, t->machine, &ro, &t->rt, err))) {
        tern_train_free(t);
        return st;
    }
    t->carry = !o.timing_only && o.accumulate <= 1 && carry_eligible(t);
    size_t sc = t->target_count > t->read_count ? t->target_count : t->read_count;
    t->scratch = calloc(sc + 1, sizeof(float));
    if (!t->scratch) {
        tern_train_free(t);
        return tern_error_set(err, TERN_ERR_NOMEM, "train: out of memory");
    }
    t->o.inputs = NULL;
    t->o.n_inputs = 0;
    *out = t;
    return TERN_OK;
}

const char *tern_train_data_name(const tern_trainer *t)
{
    return tern_train_input_name(t, 0);
}

int tern_train_data_shape(const tern_trainer *t, int64_t *dims)
{
    return tern_train_input_shape(t, 0, dims);
}

int tern_train_data_is_int(const tern_trainer *t)
{
    return tern_train_input_is_int(t, 0);
}

size_t tern_train_input_count(const tern_trainer *t)
{
    return t->nin;
}

const char *tern_train_input_name(const tern_trainer *t, size_t i)
{
    return i < t->nin ? t->in[i].name : NULL;
}

int tern_train_input_shape(const tern_trainer *t, size_t i, int64_t *dims)
{
    if (i >= t->nin)
        return 0;
    for (int d = 0; d < t->in[i].rank; d++)
        dims[d] = t->in[i].dims[d];
    return t->in[i].rank;
}

int tern_train_input_is_int(const tern_trainer *t, size_t i)
{
    return i < t->nin && t->in[i].is_int;
}

int64_t tern_train_classes(const tern_trainer *t)
{
    return t->classes;
}

size_t tern_train_weight_count(const tern_trainer *t)
{
    return t->nw;
}

const char *tern_train_weight_name(const tern_trainer *t, size_t i)
{
    return i < t->nw ? t->w[i].name : NULL;
}

const float *tern_train_weight(const tern_trainer *t, size_t i, size_t *count)
{
    tern_error e;
    if (i >= t->nw || train_sync_host(t, &e))
        return NULL; /* a read of the device's HBM that failed: out of host memory */
    *count = t->w[i].count;
    return t->w[i].val;
}

const float *tern_train_grad(const tern_trainer *t, size_t i, size_t *count)
{
    if (i >= t->nw || !t->w[i].grad)
        return NULL;
    *count = t->w[i].count;
    return t->w[i].grad;
}

double tern_train_model_flops(const tern_trainer *t)
{
    return t->flops;
}

uint64_t tern_train_hbm_bytes(const tern_trainer *t, uint64_t *weights_and_state)
{
    if (weights_and_state)
        *weights_and_state = t->state_bytes;
    return t->hbm;
}

size_t tern_train_graph_nodes(const tern_trainer *t)
{
    return t->nodes;
}

/* The device dtype of the loaded executable's input (out = 0) or output (out = 1) `name`: fp32, except the BF16
 * weights and state of pure BF16. */
static tern_dtype io_dtype(const tern_rt *rt, const char *name, int out)
{
    const tern_exe *x = tern_rt_exe(rt);
    size_t n = out ? x->num_outputs : x->num_inputs;
    const tern_exe_io *io = out ? x->outputs : x->inputs;
    for (size_t i = 0; i < n; i++)
        if (!strcmp(tern_exe_io_name(&io[i]), name))
            return (tern_dtype)io[i].dtype;
    return TERN_DTYPE_FP32;
}

static tern_status set_f(tern_trainer *t, const char *name, const float *v, size_t n, tern_error *err)
{
    if (!t->o.bf16_weights || io_dtype(t->rt, name, 0) != TERN_DTYPE_BF16)
        return tern_rt_set_input(t->rt, name, v, n * sizeof(float), err);
    /* the host copy holds BF16 values exactly (the device wrote them), so this conversion is exact */
    uint16_t *b = malloc(n * sizeof(uint16_t) + 1);
    if (!b)
        return tern_error_set(err, TERN_ERR_NOMEM, "train: out of memory");
    tern_status st = tern_convert_from_f32(TERN_DTYPE_BF16, b, v, n, NULL, err);
    if (!st)
        st = tern_rt_set_input(t->rt, name, b, n * sizeof(uint16_t), err);
    free(b);
    return st;
}

/* An output as n floats (BF16 ones widened exactly). */
static tern_status get_f(tern_trainer *t, const char *name, float *v, size_t n, tern_error *err)
{
    if (!t->o.bf16_weights || io_dtype(t->rt, name, 1) != TERN_DTYPE_BF16)
        return tern_rt_get_output(t->rt, name, v, n * sizeof(float), err);
    uint16_t *b = malloc(n * sizeof(uint16_t) + 1);
    if (!b)
        return tern_error_set(err, TERN_ERR_NOMEM, "train: out of memory");
    tern_status st = tern_rt_get_output(t->rt, name, b, n * sizeof(uint16_t), err);
    if (!st)
        st = tern_convert_to_f32(v, TERN_DTYPE_BF16, b, n, err);
    free(b);
    return st;
}

/* The rounding seed of execution `micro` (0-based; the update is the last) of step `step`: the core's SR stream
 * restarts with every execution, so each gets its own key, a function of (seed, step, micro) only, which a
 * resumed run therefore draws again. */
static void set_rounding(tern_trainer *t, uint64_t step, int64_t micro)
{
    uint64_t s = t->o.seed ^ (step * 0x9E6C63D0676A9A99ull) ^ ((uint64_t)(micro + 1) * 0xC2B2AE3D27D4EB4Full);
    s = (s ^ (s >> 31)) * 0xBF58476D1CE4E5B9ull;
    tern_rt_set_rounding(t->rt, t->o.rounding, s ^ (s >> 29));
}

/* The helpers above, for the data-parallel trainer (data_parallel.c), on the runtime t->rt points at. */
tern_status train_set_f(tern_trainer *t, const char *name, const float *v, size_t n, tern_error *err)
{
    return set_f(t, name, v, n, err);
}

tern_status train_get_f(tern_trainer *t, const char *name, float *v, size_t n, tern_error *err)
{
    return get_f(t, name, v, n, err);
}

void train_set_rounding(tern_trainer *t, uint64_t step, int64_t micro)
{
    set_rounding(t, step, micro);
}

static tern_status set_scalar(tern_trainer *t, const char *name, double v, tern_error *err)
{
    float f = (float)v;
    return set_f(t, name, &f, 1, err);
}

/* Integer data (token ids, int64 from the caller) in the device type the executable gives the input. */
static tern_status set_indices(tern_trainer *t, const char *name, const int64_t *x, size_t n, uint64_t step,
                               tern_error *err)
{
    const tern_exe_io *io = NULL;
    const tern_exe *xe = tern_rt_exe(t->rt); /* the runtime's own (the micro-step's, a data-parallel grad graph's) */
    for (size_t i = 0; i < xe->num_inputs && !io; i++)
        if (!strcmp(tern_exe_io_name(&xe->inputs[i]), name))
            io = &xe->inputs[i];
    if (!io)
        return tern_error_set(err, TERN_ERR_NOT_FOUND, "train: input '%s' is not in the executable", name);
    if (io->dtype != TERN_DTYPE_INT32)
        return tern_error_set(err, TERN_ERR_UNSUPPORTED, "train: input '%s' is %s on the device (int32 expected)",
                              name, tern_dtype_name(io->dtype));
    int32_t *b = malloc(n * sizeof(int32_t) + 1);
    if (!b)
        return tern_error_set(err, TERN_ERR_NOMEM, "train: out of memory");
    for (size_t i = 0; i < n; i++) {
        if (x[i] < INT32_MIN || x[i] > INT32_MAX) {
            free(b);
            return tern_error_set(err, TERN_ERR_RANGE, "train: step %llu: input '%s' element %zu: %lld outside int32",
                                  (unsigned long long)step, name, i, (long long)x[i]);
        }
        b[i] = (int32_t)x[i];
    }
    tern_status st = tern_rt_set_input(t->rt, name, b, n * sizeof(int32_t), err);
    free(b);
    return st;
}

/* The smoothed one-hot target rows and 1/(counted rows), from class labels; PyTorch's cross_entropy with
 * ignore_index and label_smoothing: (1 - e) onehot + e / C on counted rows, zero rows on ignored ones. */
tern_status train_ce_targets(tern_trainer *t, const int64_t *lab, size_t n, float *inv, tern_error *err)
{
    size_t rows = t->target_count / (size_t)t->classes;
    if (n != rows)
        return tern_error_set(err, TERN_ERR_INVALID, "train: step %llu: labels: %zu given, the batch needs %zu",
                              (unsigned long long)t->step + 1, n, rows);
    int64_t c = t->classes;
    float e = (float)t->o.label_smoothing, base = e / (float)c, hot = (1.0f - e) + base;
    size_t counted = 0;
    for (size_t r = 0; r < rows; r++) {
        float *row = t->scratch + r * (size_t)c;
        if (lab[r] == t->o.ignore_index) {
            memset(row, 0, sizeof(float) * (size_t)c);
            continue;
        }
        if (lab[r] < 0 || lab[r] >= c)
            return tern_error_set(err, TERN_ERR_RANGE,
                                  "train: step %llu: labels row %zu: class %lld outside [0, %lld) (ignore_index %lld)",
                                  (unsigned long long)t->step + 1, r, (long long)lab[r], (long long)c,
                                  (long long)t->o.ignore_index);
        for (int64_t k = 0; k < c; k++)
            row[k] = base;
        row[lab[r]] = hot;
        counted++;
    }
    *inv = counted ? 1.0f / (float)counted : 0.0f;
    return TERN_OK;
}

/* Blocks of a fixed length are checked by the exponent bits (all ones: inf or NaN) with no early exit, a loop the
 * compiler vectorises (4x the element-by-element isfinite over a step's 124M weights and twice as many state
 * values); a block that has one is then searched for the first. */
typedef uint32_t train_u32_alias __attribute__((may_alias));
int train_first_nonfinite(const float *v, size_t n, size_t *at)
{
    enum { B = 4096 };
    size_t i0 = 0;
    for (; i0 + B <= n; i0 += B) {
        const train_u32_alias *u = (const train_u32_alias *)(const void *)(v + i0);
        uint32_t bad = 0;
        for (size_t i = 0; i < B; i++)
            bad |= (u[i] & 0x7f800000u) == 0x7f800000u;
        if (bad)
            break;
    }
    for (size_t i = i0; i < n; i++)
        if (!isfinite(v[i])) {
            *at = i;
            return 1;
        }
    return 0;
}

/* The batch's data (packed rows, train_internal.h) and targets into the runtime t->rt points at. */
tern_status train_feed_rows(tern_trainer *t, const void *x, size_t x_bytes, const void *labels, size_t label_count,
                            uint64_t step, const float *inv_count, tern_error *err)
{
    tern_status st;
    if (t->nin && (!x || x_bytes != t->data_bytes))
        return tern_error_set(err, TERN_ERR_INVALID, "train: step %llu: %zu rows of data given, %lld expected",
                              (unsigned long long)step, x ? x_bytes / t->row_bytes : 0, (long long)t->o.batch);
    char *buf = NULL;
    if (t->nin > 1 && !(buf = malloc(t->data_bytes + 1)))
        return tern_error_set(err, TERN_ERR_NOMEM, "train: out of memory");
    for (size_t i = 0; i < t->nin; i++) {
        const train_input *in = &t->in[i];
        size_t esz = in->is_int ? sizeof(int64_t) : sizeof(float), rb = in->row * esz;
        const void *v = x;
        if (buf) { /* input i's rows out of the packed ones */
            for (size_t r = 0; r < (size_t)t->o.batch; r++)
                memcpy(buf + r * rb, (const char *)x + r * t->row_bytes + in->off, rb);
            v = buf;
        }
        st = in->is_int ? set_indices(t, in->name, v, in->count, step, err) : set_f(t, in->name, v, in->count, err);
        if (st) {
            free(buf);
            return st;
        }
    }
    free(buf);
    if (t->o.loss == TERN_LOSS_CROSS_ENTROPY) {
        float inv;
        if (!labels)
            return tern_error_set(err, TERN_ERR_INVALID, "train: cross-entropy needs labels");
        if ((st = train_ce_targets(t, labels, label_count, &inv, err)))
            return st;
        if (inv_count) /* data parallelism: 1 / the counted rows of the whole batch, over every rank */
            inv = *inv_count;
        if ((st = set_f(t, TRAIN_TARGET, t->scratch, t->target_count, err)) ||
            (st = set_f(t, TRAIN_INV_COUNT, &inv, 1, err)))
            return st;
    } else if (t->o.loss == TERN_LOSS_MSE) {
        if (!labels || label_count != t->target_count)
            return tern_error_set(err, TERN_ERR_INVALID, "train: step %llu: targets: %zu values given, %zu expected",
                                  (unsigned long long)step, labels ? label_count : 0, t->target_count);
        if ((st = set_f(t, TRAIN_TARGET, labels, label_count, err)))
            return st;
    }
    return TERN_OK;
}

tern_status train_feed_batch(tern_trainer *t, const void *x, size_t x_count, const void *labels, size_t label_count,
                             uint64_t step, const float *inv_count, tern_error *err)
{
    if (t->nin > 1)
        return tern_error_set(err, TERN_ERR_UNSUPPORTED,
                              "train: step %llu: this trainer feeds one data input; the model has %zu",
                              (unsigned long long)step, t->nin);
    if (t->nin && x_count != t->data_count)
        return tern_error_set(err, TERN_ERR_INVALID, "train: step %llu: input '%s': %zu values given, %zu expected",
                              (unsigned long long)step, t->in[0].name, x_count, t->data_count);
    return train_feed_rows(t, x, t->nin ? t->data_bytes : 0, labels, label_count, step, inv_count, err);
}

/* Micro-batches 1 .. K-1 of an accumulated step on the micro-step graph: each adds its gradient into w->acc.
 * Returns the sum of their losses and device time. */
static tern_status micro_steps(tern_trainer *t, const void *x, const void *labels, size_t label_count, uint64_t step,
                               double *loss_sum, int64_t *time_ps, tern_error *err)
{
    int64_t k = t->o.accumulate;
    size_t xs = t->data_bytes, ls = label_count / (size_t)k;
    size_t lsz = t->o.loss == TERN_LOSS_CROSS_ENTROPY ? sizeof(int64_t) : sizeof(float);
    tern_rt *main_rt = t->rt;
    tern_status st = TERN_OK;
    t->rt = t->rt_micro;
    for (int64_t i = 0; i + 1 < k && !st; i++) {
        if ((st = train_feed_rows(t, x ? (const char *)x + (size_t)i * xs : NULL, xs,
                                   labels ? (const char *)labels + (size_t)i * ls * lsz : NULL, ls, step, NULL, err)))
            break;
        for (size_t w = 0; w < t->nw && !st; w++) {
            train_weight *wt = &t->w[w];
            st = set_f(t, wt->name, wt->val, wt->count, err);
            if (!st && wt->trained)
                st = set_f(t, wt->acc_in, wt->acc, wt->count, err);
        }
        if (!st) /* micro-batch i: block i of the step's rows */
            st = train_feed_masks(t, t->rt, step, i, 0, err);
        tern_run_stats rs;
        float l = 0;
        if (!st)
            set_rounding(t, step, i);
        if (st || (st = tern_rt_execute(t->rt, &rs, err)))
            break;
        *time_ps += rs.time_ps;
        if (t->o.timing_only)
            continue;
        if ((st = tern_rt_get_output(t->rt, TRAIN_LOSS, &l, sizeof l, err)))
            break;
        *loss_sum += l;
        for (size_t w = 0; w < t->nw && !st; w++)
            if (t->w[w].trained)
                st = tern_rt_get_output(t->rt, t->w[w].acc_out, t->w[w].acc, t->w[w].count * sizeof(float), err);
            else if (t->w[w].out_name) /* a BatchNormalization running statistic: this micro-batch's update */
                st = get_f(t, t->w[w].out_name, t->w[w].val, t->w[w].count, err);
    }
    t->rt = main_rt;
    return st;
}

/* The step's learning rate and Adam's bias corrections (double on the host, as PyTorch computes them) into the
 * runtime t->rt points at. */
tern_status train_set_step_scalars(tern_trainer *t, uint64_t step, double *lr_out, tern_error *err)
{
    const tern_train_opts *o = &t->o;
    double lr = tern_train_lr(o, step);
    tern_status st;
    *lr_out = lr;
    if (o->optimizer == TERN_OPT_SGD) {
        st = set_scalar(t, TRAIN_LR, lr, err);
    } else {
        double bc1 = 1 - pow(o->beta1, (double)step), bc2 = 1 - pow(o->beta2, (double)step);
        st = set_scalar(t, TRAIN_STEP_SIZE, o->optimizer == TERN_OPT_LAMB ? lr : lr / bc1, err);
        if (!st)
            st = set_scalar(t, TRAIN_BC2_SQRT, sqrt(bc2), err);
        if (!st && o->optimizer == TERN_OPT_LAMB)
            st = set_scalar(t, TRAIN_BC1, bc1, err);
        if (!st && o->optimizer == TERN_OPT_ADAMW && o->weight_decay != 0)
            st = set_scalar(t, TRAIN_DECAY, 1 - lr * o->weight_decay, err);
    }
    return st;
}

/* The device-resident update (t->carry): every updated weight and state checked for non-finite values where it
 * lies in HBM, page by page without a copy (tern_rt_scan_output), in the order of the host path below (same
 * message); then, only when all pass, each output becomes its input for the next step (tern_rt_carry). A failed
 * check carries nothing: the inputs keep the last good step's values. */
typedef struct {
    float *buf;                 /* bf16 pieces widened here (CHUNK floats) */
    int bf;                     /* the tensor is bf16 */
    const char *name;
    uint64_t step;
    const tern_train_step_info *in;
} scan_check;

/* One piece of an updated tensor where HBM holds it (tern_rt_scan_output): the first non-finite value, if any,
 * named with its element index. */
static tern_status scan_piece(void *ctx, uint64_t at, const void *data, size_t n, tern_error *err)
{
    enum { CHUNK = 1 << 16 }; /* floats */
    const scan_check *c = ctx;
    size_t es = c->bf ? 2 : 4;
    if (n % es || at % es)
        return tern_error_set(err, TERN_ERR_INVALID,
                              "train: internal: '%s': a piece of %zu bytes at %llu splits an element", c->name, n,
                              (unsigned long long)at);
    size_t count = n / es, base = (size_t)(at / es), bad;
    for (size_t e = 0; e < count; e += CHUNK) {
        size_t m = count - e < CHUNK ? count - e : CHUNK;
        const float *v = (const float *)data + e;
        if (c->bf) {
            tern_status st = tern_convert_to_f32(c->buf, TERN_DTYPE_BF16, (const uint16_t *)data + e, m, err);
            if (st)
                return st;
            v = c->buf;
        }
        if (train_first_nonfinite(v, m, &bad))
            return tern_error_set(err, TERN_ERR_RANGE,
                                  "train: step %llu: '%s' is not finite (element %zu = %g); loss %g, gradient norm %g",
                                  (unsigned long long)c->step, c->name, base + e + bad, (double)v[bad],
                                  c->in->loss, c->in->grad_norm);
    }
    return TERN_OK;
}

static tern_status check_and_carry(tern_trainer *t, uint64_t step, const tern_train_step_info *in, tern_error *err)
{
    enum { CHUNK = 1 << 16 }; /* floats */
    float *buf = t->o.bf16_weights ? malloc(CHUNK * sizeof(float)) : NULL;
    tern_status st = TERN_OK;
    if (t->o.bf16_weights && !buf)
        st = tern_error_set(err, TERN_ERR_NOMEM, "train: out of memory");
    for (size_t i = 0; i < t->nw && !st; i++) {
        const train_weight *w = &t->w[i];
        if (!w->trained && !w->out_name) /* a running statistic has a new value, no state */
            continue;
        for (int k = 0; k < 1 + w->n_state && !st; k++) {
            const char *nm = k == 0 ? w->out_name : w->state_out[k - 1];
            scan_check c = {buf, t->o.bf16_weights && io_dtype(t->rt, nm, 1) == TERN_DTYPE_BF16, nm, step, in};
            st = tern_rt_scan_output(t->rt, nm, 0, (uint64_t)w->count * (c.bf ? 2 : 4), scan_piece, &c, err);
        }
    }
    free(buf);
    for (size_t i = 0; i < t->nw && !st; i++) {
        const train_weight *w = &t->w[i];
        if (!w->trained && !w->out_name)
            continue;
        for (int k = 0; k < 1 + w->n_state && !st; k++)
            st = tern_rt_carry(t->rt, k == 0 ? w->out_name : w->state_out[k - 1], k == 0 ? w->name : w->state_in[k - 1],
                               err);
    }
    if (st)
        return st;
    /* the weights that are not updated stay host-set inputs (rewritten each execution): every input is current */
    t->dev_valid = t->dev_ahead = 1;
    return TERN_OK;
}

/* From the device: the current weights and state of a device-resident trainer into the host copies. */
tern_status train_sync_host(const tern_trainer *ct, tern_error *err)
{
    tern_trainer *t = (tern_trainer *)ct; /* the host copies cache the device's values: t is logically const */
    if (!t->dev_ahead)
        return TERN_OK;
    for (size_t i = 0; i < t->nw; i++) {
        train_weight *w = &t->w[i];
        if (!w->trained && !w->out_name)
            continue;
        for (int k = 0; k < 1 + w->n_state; k++) {
            const char *nm = k == 0 ? w->name : w->state_in[k - 1];
            float *v = k == 0 ? w->val : w->state[k - 1];
            tern_status st;
            if (t->o.bf16_weights && io_dtype(t->rt, nm, 0) == TERN_DTYPE_BF16) {
                uint16_t *b = malloc(w->count * sizeof(uint16_t) + 1);
                if (!b)
                    return tern_error_set(err, TERN_ERR_NOMEM, "train: out of memory");
                st = tern_rt_get_input(t->rt, nm, b, w->count * sizeof(uint16_t), err);
                if (!st)
                    st = tern_convert_to_f32(v, TERN_DTYPE_BF16, b, w->count, err);
                free(b);
            } else {
                st = tern_rt_get_input(t->rt, nm, v, w->count * sizeof(float), err);
            }
            if (st)
                return tern_error_prefix(err, "train: the weights from the device: ");
        }
    }
    t->dev_ahead = 0;
    return TERN_OK;
}

/* One step on packed data (train_internal.h): x_bytes of whole rows. */
static tern_status step_packed(tern_trainer *t, const void *x, size_t x_count, const void *labels, size_t label_count,
                               tern_train_step_info *info, tern_error *err)
{
    if (t->mp) /* tensor / pipeline parallelism: x_count bytes of packed rows, as here */
        return train_mp_step(t, x, x_count, labels, label_count, info, err);
    if (t->dp)
        return train_dp_step(t, x, x_count, labels, label_count, info, err);
    tern_status st;
    uint64_t step = t->step + 1;
    int64_t nmb = t->o.accumulate > 1 ? t->o.accumulate : 1; /* micro-batches */
    double micro_loss = 0;
    int64_t micro_ps = 0;
    if (nmb > 1) {
        if ((t->nin && x_count != t->data_bytes * (size_t)nmb) || label_count % (size_t)nmb)
            return tern_error_set(err, TERN_ERR_INVALID,
                                  "train: step %llu: %zu rows of data and %zu labels for %lld micro-batches of %lld rows",
                                  (unsigned long long)step, t->row_bytes ? x_count / t->row_bytes : 0, label_count,
                                  (long long)nmb, (long long)t->o.batch);
        for (size_t w = 0; w < t->nw; w++)
            if (t->w[w].acc)
                memset(t->w[w].acc, 0, t->w[w].count * sizeof(float));
        if ((st = micro_steps(t, x, labels, label_count, step, &micro_loss, &micro_ps, err)))
            return st;
        size_t xs = t->data_bytes, ls = label_count / (size_t)nmb;
        size_t lsz = t->o.loss == TERN_LOSS_CROSS_ENTROPY ? sizeof(int64_t) : sizeof(float);
        if (x)
            x = (const char *)x + (size_t)(nmb - 1) * xs;
        if (labels)
            labels = (const char *)labels + (size_t)(nmb - 1) * ls * lsz;
        x_count = xs;
        label_count = ls;
        for (size_t w = 0; w < t->nw; w++)
            if (t->w[w].trained && (st = set_f(t, t->w[w].acc_in, t->w[w].acc, t->w[w].count, err)))
                return st;
        if ((st = set_scalar(t, TRAIN_GSCALE, 1.0 / (double)nmb, err)))
            return st;
    }
    if ((st = train_feed_rows(t, x, x_count, labels, label_count, step, NULL, err)))
        return st;
    for (size_t i = 0; i < t->nw && !t->dev_valid; i++) { /* else the last step's outputs, carried in HBM */
        train_weight *w = &t->w[i];
        if ((st = set_f(t, w->name, w->val, w->count, err)))
            return st;
        for (int k = 0; k < w->n_state; k++)
            if ((st = set_f(t, w->state_in[k], w->state[k], w->count, err)))
                return st;
    }
    if ((st = train_feed_masks(t, t->rt, step, nmb - 1, 0, err))) /* the last micro-batch's block */
        return st;
    const tern_train_opts *o = &t->o;
    double lr;
    if ((st = train_set_step_scalars(t, step, &lr, err)))
        return st;
    tern_run_stats rs;
    set_rounding(t, step, nmb - 1);
    if ((st = tern_rt_execute(t->rt, &rs, err)))
        return tern_error_prefix(err, "train: step %llu: ", (unsigned long long)step);
    tern_train_step_info in;
    memset(&in, 0, sizeof in);
    in.step = step;
    in.lr = lr;
    in.step_seconds = (double)(rs.time_ps + micro_ps) * 1e-12;
    in.samples_per_s = in.step_seconds > 0 ? (double)(o->batch * nmb) / in.step_seconds : 0;
    in.mfu = t->peak > 0 && in.step_seconds > 0 ? (t->flops + t->flops_micro * (double)(nmb - 1)) /
                                                      (t->peak * in.step_seconds) * 100
                                                : 0;
    in.loss = in.grad_norm = NAN;
    if (!o->timing_only) {
        float l, gn;
        size_t at;
        if ((st = tern_rt_get_output(t->rt, TRAIN_LOSS, &l, sizeof l, err)) ||
            (st = tern_rt_get_output(t->rt, TRAIN_GNORM, &gn, sizeof gn, err)))
            return st;
        in.loss = nmb > 1 ? (micro_loss + l) / (double)nmb : l; /* the step's loss: the mean over its micro-batches */
        in.grad_norm = gn;
        /* the first tensor that went non-finite, in the order the step computes them */
        if (t->read_out) {
            if ((st = tern_rt_get_output(t->rt, t->read_out, t->scratch, t->read_count * sizeof(float), err)))
                return st;
            if (train_first_nonfinite(t->scratch, t->read_count, &at))
                return tern_error_set(err, TERN_ERR_RANGE,
                                      "train: step %llu: output '%s' is not finite (element %zu = %g); loss %g",
                                      (unsigned long long)step, t->read_out, at, (double)t->scratch[at], in.loss);
        }
        if (!isfinite(l))
            return tern_error_set(err, TERN_ERR_RANGE, "train: step %llu: the loss is not finite (%g)",
                                  (unsigned long long)step, (double)l);
        if (!isfinite(gn))
            return tern_error_set(err, TERN_ERR_RANGE,
                                  "train: step %llu: the gradient norm is not finite (%g); loss %g",
                                  (unsigned long long)step, (double)gn, (double)l);
        /* new values land in the gradient buffers' place only after every check passes */
        for (size_t i = 0; i < t->nw; i++) {
            train_weight *w = &t->w[i];
            if (!w->trained)
                continue;
            if (w->grad && (st = tern_rt_get_output(t->rt, w->grad_out, w->grad, w->count * sizeof(float), err)))
                return st;
        }
        if (t->carry) {
            if ((st = check_and_carry(t, step, &in, err)))
                return st;
            t->step = step;
            if (info)
                *info = in;
            return TERN_OK;
        }
        st = TERN_OK;
        for (size_t i = 0; i < t->nw && !st; i++) {
            train_weight *w = &t->w[i];
            if (!w->trained && !w->out_name) /* a running statistic has a new value, no state */
                continue;
            for (int k = 0; k < 1 + w->n_state && !st; k++) {
                if (!w->spare[k] && !(w->spare[k] = malloc(w->count * sizeof(float) + 1))) {
                    st = tern_error_set(err, TERN_ERR_NOMEM, "train: out of memory");
                    break;
                }
                float *b = w->spare[k];
                const char *nm = k == 0 ? w->out_name : w->state_out[k - 1];
                if ((st = get_f(t, nm, b, w->count, err)))
                    break;
                if (train_first_nonfinite(b, w->count, &at))
                    st = tern_error_set(err, TERN_ERR_RANGE,
                                        "train: step %llu: '%s' is not finite (element %zu = %g); loss %g, gradient "
                                        "norm %g",
                                        (unsigned long long)step, nm, at, (double)b[at], in.loss, in.grad_norm);
            }
        }
        if (st)
            return st; /* the weights and state stay the last good step's; the spares hold the rejected values */
        for (size_t i = 0; i < t->nw; i++) {
            train_weight *w = &t->w[i];
            if (!w->trained && !w->out_name)
                continue;
            for (int k = 0; k < 1 + w->n_state; k++) { /* the new values become current, the old ones the spares */
                float **dst = k == 0 ? &w->val : &w->state[k - 1], *old = *dst;
                *dst = w->spare[k];
                w->spare[k] = old;
            }
        }
    }
    t->step = step;
    if (info)
        *info = in;
    return TERN_OK;
}

/* The values of one input as whole rows: their row count, or an error naming the input. */
static tern_status whole_rows(const tern_trainer *t, const train_input *in, size_t count, size_t *rows,
                              tern_error *err)
{
    if (in->row == 0 || count % in->row)
        return tern_error_set(err, TERN_ERR_INVALID,
                              "train: step %llu: input '%s': %zu values are not whole rows of %zu values",
                              (unsigned long long)t->step + 1, in->name, count, in->row);
    *rows = count / in->row;
    return TERN_OK;
}

tern_status tern_train_step(tern_trainer *t, const void *x, size_t x_count, const void *labels, size_t label_count,
                            tern_train_step_info *info, tern_error *err)
{
    if (t->nin > 1) {
        char names[512];
        input_list(t->g, names, sizeof names);
        return tern_error_set(err, TERN_ERR_INVALID,
                              "train: the model has %zu data inputs (%s): give each by name (tern_train_step_inputs)",
                              t->nin, names);
    }
    size_t rows = 0;
    tern_status st;
    if (t->nin && x && (st = whole_rows(t, &t->in[0], x_count, &rows, err)))
        return st;
    return step_packed(t, x, rows * t->row_bytes, labels, label_count, info, err);
}

tern_status tern_train_step_inputs(tern_trainer *t, const tern_train_data *data, size_t n, const void *labels,
                                   size_t label_count, tern_train_step_info *info, tern_error *err)
{
    size_t rows = 0;
    tern_status st;
    const tern_train_data **by = calloc(t->nin + 1, sizeof *by); /* data for input i */
    if (!by)
        return tern_error_set(err, TERN_ERR_NOMEM, "train: out of memory");
    for (size_t k = 0; k < n; k++) {
        size_t i = 0;
        while (i < t->nin && (!data[k].name || strcmp(data[k].name, t->in[i].name)))
            i++;
        if (i == t->nin) {
            char names[512];
            input_list(t->g, names, sizeof names);
            free(by);
            return tern_error_set(err, TERN_ERR_NOT_FOUND, "train: data for '%s': the model has no such input (its data "
                                  "inputs: %s)", data[k].name ? data[k].name : "(null)", t->nin ? names : "none");
        }
        if (by[i]) {
            free(by);
            return tern_error_set(err, TERN_ERR_INVALID, "train: input '%s' is given data twice", t->in[i].name);
        }
        by[i] = &data[k];
    }
    for (size_t i = 0; i < t->nin; i++) {
        size_t r = 0;
        if (!by[i] || !by[i]->data) {
            st = tern_error_set(err, TERN_ERR_INVALID, "train: step %llu: the model's input '%s' has no data",
                                (unsigned long long)t->step + 1, t->in[i].name);
        } else if (!(st = whole_rows(t, &t->in[i], by[i]->count, &r, err)) && i && r != rows) {
            st = tern_error_set(err, TERN_ERR_INVALID,
                                "train: step %llu: input '%s' has %zu rows, input '%s' %zu: every input needs the "
                                "same rows",
                                (unsigned long long)t->step + 1, t->in[i].name, r, t->in[0].name, rows);
        }
        if (st) {
            free(by);
            return st;
        }
        rows = r;
    }
    if (t->nin <= 1) { /* one input: its values are the packed rows */
        const void *x = t->nin ? by[0]->data : NULL;
        free(by);
        return step_packed(t, x, rows * t->row_bytes, labels, label_count, info, err);
    }
    char *x = malloc(rows * t->row_bytes + 1); /* rows x row_bytes <= the inputs' own bytes */
    if (!x) {
        free(by);
        return tern_error_set(err, TERN_ERR_NOMEM, "train: out of memory");
    }
    for (size_t i = 0; i < t->nin; i++) {
        const train_input *in = &t->in[i];
        size_t rb = in->row * (in->is_int ? sizeof(int64_t) : sizeof(float));
        for (size_t r = 0; r < rows; r++)
            memcpy(x + r * t->row_bytes + in->off, (const char *)by[i]->data + r * rb, rb);
    }
    free(by);
    st = step_packed(t, x, rows * t->row_bytes, labels, label_count, info, err);
    free(x);
    return st;
}

tern_status train_oom(tern_error *err)
{
    return tern_error_set(err, TERN_ERR_NOMEM, "train: out of memory");
}

char *train_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}
