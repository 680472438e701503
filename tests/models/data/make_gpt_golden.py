#!/usr/bin/env python3
"""f64 goldens for octet's Gpt (tests/models/test_gpt.cpp): a nanoGPT-style GPT written here in
PyTorch from the architecture's description (token + learned position embeddings, pre-LayerNorm
blocks of causal self-attention with one fused QKV projection and a GELU MLP, a final LayerNorm and
an lm_head tied to the token embedding; nanoGPT's module names and initialization).

  python3 make_gpt_golden.py     # writes gpt_tiny.safetensors next to this script

gpt_tiny.safetensors holds, in float64: the model's state_dict (lm_head.weight left out: it is
transformer.wte.weight), the input ids [3, 11] and targets (int64), the logits [3, 11, 37], the mean
cross-entropy loss and, as "grad.NAME", the gradient of every parameter. Config: vocab 37, context
16, 2 layers, 2 heads, width 12, dropout 0. Made with torch 2.5.1 (CPU), safetensors 0.4+.
"""
import math
import os

import torch
import torch.nn as nn
import torch.nn.functional as F
from safetensors.torch import save_file

HERE = os.path.dirname(os.path.abspath(__file__))
VOCAB, CONTEXT, LAYERS, HEADS, WIDTH = 37, 16, 2, 2, 12


class SelfAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_attn = nn.Linear(WIDTH, 3 * WIDTH)
        self.c_proj = nn.Linear(WIDTH, WIDTH)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(x).split(WIDTH, dim=2)
        q, k, v = (z.view(b, t, HEADS, c // HEADS).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(b, t, c))


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_fc = nn.Linear(WIDTH, 4 * WIDTH)
        self.c_proj = nn.Linear(4 * WIDTH, WIDTH)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1 = nn.LayerNorm(WIDTH)
        self.attn = SelfAttention()
        self.ln_2 = nn.LayerNorm(WIDTH)
        self.mlp = Mlp()

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class Gpt(nn.Module):
    def __init__(self):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(VOCAB, WIDTH), wpe=nn.Embedding(CONTEXT, WIDTH),
            h=nn.ModuleList([Block() for _ in range(LAYERS)]), ln_f=nn.LayerNorm(WIDTH)))
        self.lm_head = nn.Linear(WIDTH, VOCAB, bias=False)
        self.transformer.wte.weight = self.lm_head.weight
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, 0.0, 0.02)
            if isinstance(m, nn.Linear) and m.bias is not None:
                nn.init.zeros_(m.bias)
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * LAYERS))

    def forward(self, ids):
        pos = torch.arange(ids.shape[1])
        x = self.transformer.wte(ids) + self.transformer.wpe(pos)
        for block in self.transformer.h:
            x = block(x)
        return self.lm_head(self.transformer.ln_f(x))


def main():
    torch.manual_seed(0)
    model = Gpt().double()
    # Larger weights than the initialization's, so every part of the network shapes the output.
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.3)
    ids = torch.randint(0, VOCAB, (3, 11))
    targets = torch.randint(0, VOCAB, (3, 11))
    logits = model(ids)
    loss = F.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1))
    loss.backward()
    out = {k: v.detach().clone() for k, v in model.state_dict().items() if k != "lm_head.weight"}
    out.update({"ids": ids, "targets": targets, "logits": logits.detach(), "loss": loss.detach().reshape(1)})
    for name, p in model.named_parameters():
        out["grad." + name] = p.grad.detach().clone()
    path = os.path.join(HERE, "gpt_tiny.safetensors")
    save_file(out, path)
    print(f"{path}: loss {loss.item():.12f}, {len(out)} tensors")


if __name__ == "__main__":
    main()
