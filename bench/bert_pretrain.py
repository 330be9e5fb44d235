"""BERT pre-training as bench/bench_train_dp.c trains it, timing-only: scripts/gen_models.py's BERT encoder (post-LN
blocks, learned positions) with the masked-language-model head of BertForPreTraining (dense + GELU + LayerNorm,
then the decoder tied to the word embeddings, with its own bias), exported for one rank's micro-batch. The
next-sentence head (a 1024 x 2 linear on the pooled [CLS]) is left out: tern trains on one loss. Random
weights (the step time does not depend on them).

usage: bert_pretrain.py OUT.onnx LAYERS D HEADS VOCAB SEQ BATCH"""
import os
import sys

import torch
import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
from gen_models import OPSET, Block  # noqa: E402


class BertMLM(nn.Module):
    def __init__(self, vocab, d, heads, layers, seq):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(seq, d)
        self.ln = nn.LayerNorm(d)
        self.blocks = nn.ModuleList([Block(d, heads, False, seq, post_ln=True) for _ in range(layers)])
        self.dense, self.mlm_ln = nn.Linear(d, d), nn.LayerNorm(d)
        self.bias = nn.Parameter(torch.zeros(vocab))

    def forward(self, ids):
        x = self.ln(self.wte(ids) + self.wpe(torch.arange(ids.shape[1])))
        for b in self.blocks:
            x = b(x)
        h = self.mlm_ln(torch.nn.functional.gelu(self.dense(x)))
        return h @ self.wte.weight.t() + self.bias  # logits [batch, seq, vocab], the decoder tied


def main():
    out, layers, d, heads, vocab, seq, batch = sys.argv[1], *map(int, sys.argv[2:8])
    torch.manual_seed(0)
    m = BertMLM(vocab, d, heads, layers, seq).eval()
    ids = torch.randint(0, vocab, (batch, seq))
    with torch.no_grad():
        # no constant folding: it would fold wte.weight.t() into a second initializer and untie the decoder
        torch.onnx.export(m, (ids,), out, input_names=["input_ids"], output_names=["logits"], opset_version=OPSET,
                          do_constant_folding=False)


if __name__ == "__main__":
    main()
