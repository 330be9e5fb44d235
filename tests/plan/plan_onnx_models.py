"""Models for tests/plan/test_plan_onnx.sh: small GPT-2-, Llama- and BERT-style transformers (scripts/gen_models.py's
GPT, Llama and BERT, seeded random weights) exported from PyTorch to ONNX as a user would (opset 14, constant folding on),
each with the config.json that describes the same architecture; and models it refuses: a T5-style encoder, a
symbolic sequence length, a small CNN (not a transformer).

usage: plan_onnx_models.py OUTDIR"""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
from gen_models import BERT, GPT, Llama, ResNet, T5Encoder  # noqa: E402

out = sys.argv[1]
torch.manual_seed(0)
torch.set_num_threads(1)


def export(m, x, name):
    with torch.no_grad():
        torch.onnx.export(m.eval(), (x,), os.path.join(out, name + ".onnx"), input_names=["input_ids"],
                          output_names=["logits"], opset_version=14, do_constant_folding=True)


S = 128
# GPT-2 style: vocab 512, width 128, 4 heads, 2 layers, 128 positions (tied LM head, fused QKV, GELU MLP of 4 x width)
export(GPT(512, 128, 4, 2, S), torch.randint(0, 512, (1, S)), "gpt2s")
json.dump({"model_type": "gpt2", "n_embd": 128, "n_layer": 2, "n_head": 4, "n_inner": 512, "vocab_size": 512,
           "n_positions": S}, open(os.path.join(out, "gpt2s.json"), "w"))
# Llama style: vocab 256, width 128, 4 query heads sharing 2 K/V heads, SwiGLU of 256, 2 layers, rotary over 128
export(Llama(256, 128, 4, 2, 256, 2, S), torch.randint(0, 256, (1, S)), "llamas")
json.dump({"model_type": "llama", "hidden_size": 128, "intermediate_size": 256, "num_attention_heads": 4,
           "num_key_value_heads": 2, "num_hidden_layers": 2, "vocab_size": 256, "max_position_embeddings": S,
           "tie_word_embeddings": False}, open(os.path.join(out, "llamas.json"), "w"))
# BERT style: vocab 300, width 64, 4 heads, 2 post-LN layers, no mask, a pooler (no LM head), 128 positions
export(BERT(300, 64, 4, 2, S), torch.randint(0, 300, (1, S)), "berts")
json.dump({"model_type": "bert", "hidden_size": 64, "intermediate_size": 256, "num_attention_heads": 4,
           "num_hidden_layers": 2, "vocab_size": 300, "max_position_embeddings": S},
          open(os.path.join(out, "berts.json"), "w"))
# as tests/train/llama_ref.py exports: no constant folding (buffers reach the graph through Slice nodes) and a
# symbolic batch; vocab 64, width 32, 2 layers, 16 positions
with torch.no_grad():
    torch.onnx.export(Llama(64, 32, 4, 2, 64, 2, 16).eval(), (torch.zeros(2, 16, dtype=torch.int64),),
                      os.path.join(out, "llama_dyn.onnx"), input_names=["input_ids"], output_names=["logits"],
                      opset_version=14, dynamic_axes={"input_ids": {0: "batch"}, "logits": {0: "batch"}},
                      do_constant_folding=False)
json.dump({"model_type": "llama", "hidden_size": 32, "intermediate_size": 64, "num_attention_heads": 4,
           "num_key_value_heads": 2, "num_hidden_layers": 2, "vocab_size": 64, "max_position_embeddings": 16},
          open(os.path.join(out, "llama_dyn.json"), "w"))
# a symbolic sequence length (refused: the tables are read at the exported length)
with torch.no_grad():
    torch.onnx.export(GPT(64, 32, 2, 1, 16).eval(), (torch.zeros(1, 16, dtype=torch.int64),),
                      os.path.join(out, "gpt_dynseq.onnx"), input_names=["input_ids"], output_names=["logits"],
                      opset_version=14, dynamic_axes={"input_ids": {0: "batch", 1: "seq"}, "logits": {0: "batch", 1: "seq"}})
# a T5-style encoder: its attention mask is the relative position bias (refused: not causal, not absent)
export(T5Encoder(128, 64, 2, 32, 128, 1), torch.randint(0, 128, (1, 32)), "t5")
m = ResNet([8, 16], [1, 1], 10).eval()
with torch.no_grad():
    torch.onnx.export(m, (torch.randn(1, 3, 32, 32),), os.path.join(out, "cnn.onnx"), input_names=["image"],
                      output_names=["logits"], opset_version=14, do_constant_folding=True)
