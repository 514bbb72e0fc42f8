"""A Llama-style decoder block in plain PyTorch: random weights, no downloads.

RMSNorm -> Q/K/V projections (GQA) -> causal attention -> output projection -> residual ->
RMSNorm -> SwiGLU MLP -> residual. Trace it onto the roofline:

    roofline trace examples/llama_block.py:main --hw h100

`CONFIG` is the same shape `roofline model` analyses (see `spec()`), so the two can be
compared: tests/test_trace.py checks that their FLOPs agree.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

CONFIG = {"hidden": 1024, "ffn": 2816, "heads": 16, "kv_heads": 4, "head_dim": 64,
          "batch": 2, "seq": 512}


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


class Block:
    def __init__(self, hidden: int, ffn: int, heads: int, kv_heads: int, head_dim: int,
                 dtype: torch.dtype = torch.float32) -> None:
        def w(rows: int, cols: int) -> torch.Tensor:
            return torch.randn(rows, cols, dtype=dtype) / rows**0.5

        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, head_dim
        self.wq, self.wk, self.wv = w(hidden, heads * head_dim), w(hidden, kv_heads * head_dim), \
            w(hidden, kv_heads * head_dim)
        self.wo = w(heads * head_dim, hidden)
        self.w_gate, self.w_up, self.w_down = w(hidden, ffn), w(hidden, ffn), w(ffn, hidden)
        self.norm1 = torch.ones(hidden, dtype=dtype)
        self.norm2 = torch.ones(hidden, dtype=dtype)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        h = rms_norm(x, self.norm1)
        q = (h @ self.wq).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        k = (h @ self.wk).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        v = (h @ self.wv).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        attn = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        x = x + attn.transpose(1, 2).reshape(b, s, -1) @ self.wo
        h = rms_norm(x, self.norm2)
        return x + (F.silu(h @ self.w_gate) * (h @ self.w_up)) @ self.w_down


def _build() -> tuple[Block, torch.Tensor]:
    torch.manual_seed(0)
    c = CONFIG
    block = Block(c["hidden"], c["ffn"], c["heads"], c["kv_heads"], c["head_dim"])
    return block, torch.randn(c["batch"], c["seq"], c["hidden"])


# Built when the module is imported, so a trace of main() holds only the forward pass.
BLOCK, X = _build()


def main() -> torch.Tensor:
    """One forward pass: what `roofline trace examples/llama_block.py:main` runs."""
    with torch.no_grad():
        return BLOCK(X)


def spec():  # the same shapes as a roofline ModelSpec (one layer)
    from roofline.models import ModelSpec

    c = CONFIG
    return ModelSpec(name="llama-block-example", model_type="llama", hidden=c["hidden"],
                     layers=1, heads=c["heads"], kv_heads=c["kv_heads"],
                     head_dim=c["head_dim"], ffn=c["ffn"], vocab=32000)
