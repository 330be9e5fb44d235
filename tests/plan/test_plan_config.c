/* tern plan's model configurations: the example configs parse to the published sizes (parameter counts checked
 * against the published totals: GPT-2 small's 124,439,808 exactly, Llama 3.1 8B's 8.03 B), defaults apply where
 * Hugging Face has them, and bad input is an error naming the field, the rule and the value. */
#include "../check.h"
#include "tern/plan.h"

static tern_status parse(const char *json, tern_model_cfg *c, tern_error *e)
{
    return tern_model_cfg_parse(json, strlen(json), "test.json", c, e);
}

int main(void)
{
    tern_model_cfg c;
    tern_error e = {0};
    TEST_BEGIN("llama-3.1-8b");
    CHECK_EQ_INT(tern_model_cfg_load("data/models/llama-3.1-8b.json", &c, &e), TERN_OK);
    CHECK_EQ_INT(c.family, TERN_MODEL_LLAMA);
    CHECK_EQ_INT(c.hidden, 4096);
    CHECK_EQ_INT(c.kv_heads, 8);
    CHECK_EQ_INT(c.head_dim, 128);
    CHECK_EQ_INT(c.vocab, 128256);
    CHECK_NEAR(tern_model_params(&c) / 1e9, 8.03, 0.01);
    TEST_BEGIN("llama-3.1-70b");
    CHECK_EQ_INT(tern_model_cfg_load("data/models/llama-3.1-70b.json", &c, &e), TERN_OK);
    CHECK_NEAR(tern_model_params(&c) / 1e9, 70.55, 0.05);
    TEST_BEGIN("gpt2 defaults");
    CHECK_EQ_INT(tern_model_cfg_load("data/models/gpt2.json", &c, &e), TERN_OK);
    CHECK_EQ_INT(c.ffn, 4 * 768); /* n_inner absent: 4 x n_embd */
    CHECK_EQ_INT(c.kv_heads, 12);
    CHECK_EQ_INT((int64_t)tern_model_params(&c), 124439808);
    TEST_BEGIN("bert defaults");
    CHECK_EQ_INT(parse("{\"model_type\":\"bert\",\"hidden_size\":768,\"intermediate_size\":3072,"
                       "\"num_attention_heads\":12,\"num_hidden_layers\":12}",
                       &c, &e),
                 TERN_OK);
    CHECK_EQ_INT(c.type_vocab, 2);
    CHECK_EQ_INT(c.vocab, 30522);
    CHECK_EQ_INT(c.max_positions, 512);
    CHECK_EQ_INT(c.causal, 0);
    TEST_BEGIN("mixtral");
    CHECK_EQ_INT(tern_model_cfg_load("data/models/mixtral-8x7b.json", &c, &e), TERN_OK);
    CHECK_EQ_INT(c.experts, 8);
    CHECK_EQ_INT(c.experts_per_tok, 2);
    CHECK_NEAR(tern_model_params(&c) / 1e9, 46.7, 0.1);
    CHECK_EQ_INT(parse("{\"architectures\":[\"MixtralForCausalLM\"],\"hidden_size\":64,\"intermediate_size\":128,"
                       "\"num_attention_heads\":4,\"num_hidden_layers\":2}",
                       &c, &e),
                 TERN_OK);
    CHECK_EQ_INT(c.experts, 8); /* num_local_experts absent: the default */
    TEST_BEGIN("missing field without a default");
    CHECK_EQ_INT(parse("{\"model_type\":\"llama\",\"intermediate_size\":11008,\"num_attention_heads\":32,"
                       "\"num_hidden_layers\":32}",
                       &c, &e),
                 TERN_ERR_INVALID);
    CHECK_STR_CONTAINS(e.msg, "'hidden_size' is missing");
    CHECK_EQ_INT(parse("{\"model_type\":\"gpt2\",\"n_embd\":768,\"n_head\":12}", &c, &e), TERN_ERR_INVALID);
    CHECK_STR_CONTAINS(e.msg, "'n_layer'");
    TEST_BEGIN("unknown architecture");
    CHECK_EQ_INT(parse("{\"model_type\":\"t5\",\"d_model\":512}", &c, &e), TERN_ERR_UNSUPPORTED);
    CHECK_STR_CONTAINS(e.msg, "model_type 't5'");
    CHECK_EQ_INT(parse("{\"architectures\":[\"FooForCausalLM\"]}", &c, &e), TERN_ERR_UNSUPPORTED);
    CHECK_STR_CONTAINS(e.msg, "'FooForCausalLM'");
    CHECK_EQ_INT(parse("{\"hidden_size\":64}", &c, &e), TERN_ERR_INVALID);
    CHECK_STR_CONTAINS(e.msg, "model_type");
    TEST_BEGIN("bad values");
    CHECK_EQ_INT(parse("{\"model_type\":\"gpt2\",\"n_embd\":768.5,\"n_layer\":2,\"n_head\":12}", &c, &e),
                 TERN_ERR_INVALID);
    CHECK_STR_CONTAINS(e.msg, "'n_embd' must be a positive integer, got 768.5");
    CHECK_EQ_INT(parse("{\"model_type\":\"gpt2\",\"n_embd\":\"768\",\"n_layer\":2,\"n_head\":12}", &c, &e),
                 TERN_ERR_INVALID);
    CHECK_STR_CONTAINS(e.msg, "'n_embd' must be a number");
    CHECK_EQ_INT(parse("{\"model_type\":\"llama\",\"hidden_size\":4096,\"intermediate_size\":1,"
                       "\"num_attention_heads\":32,\"num_key_value_heads\":5,\"num_hidden_layers\":2}",
                       &c, &e),
                 TERN_ERR_INVALID);
    CHECK_STR_CONTAINS(e.msg, "num_key_value_heads (5) must divide num_attention_heads (32)");
    CHECK_EQ_INT(parse("{\"model_type\":\"gpt2\",\"n_embd\":100,\"n_layer\":2,\"n_head\":12}", &c, &e),
                 TERN_ERR_INVALID);
    CHECK_STR_CONTAINS(e.msg, "heads (12) must divide the hidden size (100)");
    CHECK_EQ_INT(parse("[1,2]", &c, &e), TERN_ERR_PARSE);
    CHECK_EQ_INT(parse("{\"model_type\":", &c, &e), TERN_ERR_PARSE);
    CHECK_EQ_INT(tern_model_cfg_load("/nonexistent/config.json", &c, &e), TERN_ERR_IO);
    CHECK_STR_CONTAINS(e.msg, "/nonexistent/config.json");
    return check_report();
}
