/* Model configurations for the planner: a Hugging Face config.json (Llama, GPT-2, BERT, Mixtral) read into a
 * tern_model_cfg, with the parameter count and the model-FLOPs definition MFU is measured against. Which fields
 * take a default: Hugging Face's config classes give every field one, but a config that omits hidden_size and
 * silently becomes a 4096-wide model is a wrong answer, not a convenience. So the fields that define a model's
 * size (width, depth, heads, MLP width) are required, and the ones Hugging Face derives or that are the same for
 * every model of the family (key/value heads = heads, head_dim = hidden / heads, GPT-2's n_inner = 4 x n_embd,
 * vocabulary and position sizes, BERT's type_vocab_size = 2, Mixtral's 8 experts and 2 per token) take the
 * transformers library's default. docs/planner.md lists both sets. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "tern/plan.h"

const char *tern_model_family_name(tern_model_family f)
{
    switch (f) {
    case TERN_MODEL_LLAMA: return "llama";
    case TERN_MODEL_GPT2: return "gpt2";
    case TERN_MODEL_BERT: return "bert";
    case TERN_MODEL_MIXTRAL: return "mixtral";
    }
    return "?";
}

/* An integer field: *out = the value, or dflt when absent and dflt >= 0; absent with dflt < 0 is an error. */
static tern_status get_int(const cJSON *root, const char *src, const char *field, int64_t dflt, int64_t *out,
                           tern_error *err)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, field);
    if (!v || cJSON_IsNull(v)) {
        if (dflt < 0)
            return tern_error_set(err, TERN_ERR_INVALID,
                                  "%s: field '%s' is missing and has no default (it sets the model's size)", src,
                                  field);
        *out = dflt;
        return TERN_OK;
    }
    if (!cJSON_IsNumber(v))
        return tern_error_set(err, TERN_ERR_INVALID, "%s: field '%s' must be a number", src, field);
    double d = v->valuedouble;
    if (!(d >= 1) || d > 1e12 || d != floor(d))
        return tern_error_set(err, TERN_ERR_INVALID, "%s: field '%s' must be a positive integer, got %g", src, field,
                              d);
    *out = (int64_t)d;
    return TERN_OK;
}

static int get_bool(const cJSON *root, const char *field, int dflt)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, field);
    if (cJSON_IsBool(v))
        return cJSON_IsTrue(v);
    return dflt;
}

#define TRY(x)                                                                                                    \
    do {                                                                                                          \
        tern_status s_ = (x);                                                                                     \
        if (s_ != TERN_OK) {                                                                                      \
            cJSON_Delete(root);                                                                                   \
            return s_;                                                                                            \
        }                                                                                                         \
    } while (0)

static int family_from_name(const char *s, tern_model_family *f)
{
    static const struct {
        const char *name;
        tern_model_family f;
    } map[] = {
        {"llama", TERN_MODEL_LLAMA},           {"LlamaForCausalLM", TERN_MODEL_LLAMA},
        {"gpt2", TERN_MODEL_GPT2},             {"GPT2LMHeadModel", TERN_MODEL_GPT2},
        {"GPT2Model", TERN_MODEL_GPT2},        {"bert", TERN_MODEL_BERT},
        {"BertForMaskedLM", TERN_MODEL_BERT},  {"BertForPreTraining", TERN_MODEL_BERT},
        {"BertModel", TERN_MODEL_BERT},        {"mixtral", TERN_MODEL_MIXTRAL},
        {"MixtralForCausalLM", TERN_MODEL_MIXTRAL},
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (!strcmp(map[i].name, s)) {
            *f = map[i].f;
            return 1;
        }
    return 0;
}

tern_status tern_model_cfg_parse(const char *json, size_t len, const char *source, tern_model_cfg *out,
                                 tern_error *err)
{
    const char *src = source ? source : "config";
    memset(out, 0, sizeof *out);
    cJSON *root = cJSON_ParseWithLength(json, len);
    if (!root) {
        const char *at = cJSON_GetErrorPtr();
        return tern_error_set(err, TERN_ERR_PARSE, "%s: not valid JSON (near byte %ld)", src,
                              at && at >= json && at <= json + len ? (long)(at - json) : -1L);
    }
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return tern_error_set(err, TERN_ERR_PARSE, "%s: a config.json must be a JSON object", src);
    }
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(root, "model_type");
    const cJSON *ar = cJSON_GetObjectItemCaseSensitive(root, "architectures");
    const char *arch0 = cJSON_IsArray(ar) && cJSON_IsString(cJSON_GetArrayItem(ar, 0))
                            ? cJSON_GetArrayItem(ar, 0)->valuestring
                            : NULL;
    tern_model_family fam;
    if (cJSON_IsString(mt)) {
        if (!family_from_name(mt->valuestring, &fam)) {
            tern_error_set(err, TERN_ERR_UNSUPPORTED,
                           "%s: model_type '%s' is not a known architecture (llama, gpt2, bert, mixtral)", src,
                           mt->valuestring);
            cJSON_Delete(root);
            return TERN_ERR_UNSUPPORTED;
        }
    } else if (arch0) {
        if (!family_from_name(arch0, &fam)) {
            tern_error_set(err, TERN_ERR_UNSUPPORTED,
                           "%s: architectures[0] '%s' is not a known architecture (LlamaForCausalLM, "
                           "GPT2LMHeadModel, BertForMaskedLM, MixtralForCausalLM)",
                           src, arch0);
            cJSON_Delete(root);
            return TERN_ERR_UNSUPPORTED;
        }
    } else {
        cJSON_Delete(root);
        return tern_error_set(err, TERN_ERR_INVALID,
                              "%s: neither 'model_type' nor 'architectures' names the architecture", src);
    }
    out->family = fam;
    snprintf(out->model_type, sizeof out->model_type, "%s", tern_model_family_name(fam));
    out->experts = 1;
    out->experts_per_tok = 1;
    switch (fam) {
    case TERN_MODEL_LLAMA:
    case TERN_MODEL_MIXTRAL:
        TRY(get_int(root, src, "hidden_size", -1, &out->hidden, err));
        TRY(get_int(root, src, "intermediate_size", -1, &out->ffn, err));
        TRY(get_int(root, src, "num_attention_heads", -1, &out->heads, err));
        TRY(get_int(root, src, "num_hidden_layers", -1, &out->layers, err));
        TRY(get_int(root, src, "num_key_value_heads", out->heads, &out->kv_heads, err));
        TRY(get_int(root, src, "vocab_size", 32000, &out->vocab, err));
        TRY(get_int(root, src, "max_position_embeddings", fam == TERN_MODEL_LLAMA ? 2048 : 4096 * 32,
                    &out->max_positions, err));
        if (fam == TERN_MODEL_MIXTRAL) {
            TRY(get_int(root, src, "num_local_experts", 8, &out->experts, err));
            TRY(get_int(root, src, "num_experts_per_tok", 2, &out->experts_per_tok, err));
        }
        out->gated_mlp = 1;
        out->rms_norm = 1;
        out->causal = 1;
        out->tied_embeddings = get_bool(root, "tie_word_embeddings", 0);
        break;
    case TERN_MODEL_GPT2:
        TRY(get_int(root, src, "n_embd", -1, &out->hidden, err));
        TRY(get_int(root, src, "n_layer", -1, &out->layers, err));
        TRY(get_int(root, src, "n_head", -1, &out->heads, err));
        TRY(get_int(root, src, "n_inner", 4 * out->hidden, &out->ffn, err));
        TRY(get_int(root, src, "vocab_size", 50257, &out->vocab, err));
        TRY(get_int(root, src, "n_positions", 1024, &out->max_positions, err));
        out->kv_heads = out->heads;
        out->causal = 1;
        out->tied_embeddings = 1;
        break;
    case TERN_MODEL_BERT:
        TRY(get_int(root, src, "hidden_size", -1, &out->hidden, err));
        TRY(get_int(root, src, "intermediate_size", -1, &out->ffn, err));
        TRY(get_int(root, src, "num_attention_heads", -1, &out->heads, err));
        TRY(get_int(root, src, "num_hidden_layers", -1, &out->layers, err));
        TRY(get_int(root, src, "vocab_size", 30522, &out->vocab, err));
        TRY(get_int(root, src, "max_position_embeddings", 512, &out->max_positions, err));
        TRY(get_int(root, src, "type_vocab_size", 2, &out->type_vocab, err));
        out->kv_heads = out->heads;
        out->tied_embeddings = 1;
        break;
    }
    int64_t dflt_hd = out->hidden % out->heads == 0 ? out->hidden / out->heads : -1;
    const cJSON *hdv = cJSON_GetObjectItemCaseSensitive(root, "head_dim");
    if (dflt_hd < 0 && (!hdv || cJSON_IsNull(hdv))) {
        tern_error_set(err, TERN_ERR_INVALID,
                       "%s: attention heads (%lld) must divide the hidden size (%lld) when head_dim is not given",
                       src, (long long)out->heads, (long long)out->hidden);
        cJSON_Delete(root);
        return TERN_ERR_INVALID;
    }
    TRY(get_int(root, src, "head_dim", dflt_hd, &out->head_dim, err));
    if (out->heads % out->kv_heads) {
        tern_error_set(err, TERN_ERR_INVALID,
                       "%s: num_key_value_heads (%lld) must divide num_attention_heads (%lld)", src,
                       (long long)out->kv_heads, (long long)out->heads);
        cJSON_Delete(root);
        return TERN_ERR_INVALID;
    }
    if (out->experts_per_tok > out->experts) {
        tern_error_set(err, TERN_ERR_INVALID, "%s: num_experts_per_tok (%lld) exceeds num_local_experts (%lld)",
                       src, (long long)out->experts_per_tok, (long long)out->experts);
        cJSON_Delete(root);
        return TERN_ERR_INVALID;
    }
    if (out->head_dim > 256) {
        tern_error_set(err, TERN_ERR_UNSUPPORTED, "%s: head_dim %lld above the 256 the attention kernels take",
                       src, (long long)out->head_dim);
        cJSON_Delete(root);
        return TERN_ERR_UNSUPPORTED;
    }
    cJSON_Delete(root);
    return TERN_OK;
}

tern_status tern_model_cfg_load(const char *path, tern_model_cfg *out, tern_error *err)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return tern_error_set(err, TERN_ERR_IO, "model config '%s': cannot open", path);
    char *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n + 4096 > cap) {
            cap = cap ? 2 * cap : 8192;
            if (cap > (64u << 20)) {
                free(buf);
                fclose(f);
                return tern_error_set(err, TERN_ERR_RANGE, "model config '%s': larger than 64 MiB", path);
            }
            char *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                fclose(f);
                return tern_error_set(err, TERN_ERR_NOMEM, "model config '%s': out of memory", path);
            }
            buf = nb;
        }
        size_t r = fread(buf + n, 1, cap - n, f);
        n += r;
        if (r == 0)
            break;
    }
    fclose(f);
    tern_status s = tern_model_cfg_parse(buf, n, path, out, err);
    free(buf);
    return s;
}

/* Matmul parameters of one layer that one token multiplies by (active experts only when active != 0). */
static double layer_linear_params(const tern_model_cfg *c, int active)
{
    double h = (double)c->hidden, hd = (double)c->head_dim;
    double attn = h * hd * (double)c->heads * 2 + h * hd * (double)c->kv_heads * 2;
    double mlp = (c->gated_mlp ? 3.0 : 2.0) * h * (double)c->ffn;
    double e = active ? (double)c->experts_per_tok : (double)c->experts;
    double router = c->experts > 1 ? h * (double)c->experts : 0;
    return attn + mlp * e + router;
}

double tern_model_params(const tern_model_cfg *c)
{
    double h = (double)c->hidden, v = (double)c->vocab;
    double per = layer_linear_params(c, 0);
    double emb = v * h;
    if (c->family == TERN_MODEL_GPT2 || c->family == TERN_MODEL_BERT) {
        /* biases of the four projections and the two MLP linears, two LayerNorms (gamma, beta) */
        per += 4 * h + (double)c->ffn + h + 4 * h;
        emb += (double)c->max_positions * h + (double)c->type_vocab * h;
    } else {
        per += 2 * h; /* two RMSNorm gains */
    }
    double total = emb + (double)c->layers * per + 2 * h;
    if (!c->tied_embeddings)
        total += v * h;
    return total;
}

double tern_model_train_flops_per_token(const tern_model_cfg *c, int64_t seq)
{
    double n = (double)c->layers * layer_linear_params(c, 1) + (double)c->hidden * (double)c->vocab;
    double attn = 12.0 * (double)c->layers * (double)seq * (double)c->heads * (double)c->head_dim;
    return 6.0 * n + attn;
}
