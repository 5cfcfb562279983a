"""`flashsim demo train`: a tiny causal language model trained three times on the GPU, with flashsim's FlashAttention
kernels, with its standard-attention baseline and with PyTorch's default `scaled_dot_product_attention` (what a
PyTorch model calls; on an H100, cuDNN's attention), from the same weights on the same batches.

The model reads the simulator's own source code byte by byte (vocabulary 256; always installed): embeddings, `layers` pre-norm blocks of
causal self-attention (q, k, v cast to `dtype`, attention through gpu.autograd) and an MLP, then a linear head,
trained with AdamW. The runs should give one loss curve, up to fp16/bf16 rounding. The report (`kind` "train",
see gpu/lab/results.py) holds the config, the loss curves (one value per step), tokens per second for each run
(steps after WARMUP_STEPS, between synchronizations), and the largest gap between flashsim's two curves.
"""

import time
from dataclasses import asdict, dataclass
from pathlib import Path

import sim
from gpu import backward, flash
from gpu.autograd import IMPLS, attention, require_torch
from gpu.lab import results
from sim.core.errors import InputError

SOURCES = Path(sim.__file__).parent  # the training text: every sim/**/*.py, in sorted order
RUNS = (*IMPLS, "sdpa")  # flashsim's two, then PyTorch's default SDPA
WARMUP_STEPS = 5  # the first steps compile the kernels (NVRTC) and fill the allocators: not timed


@dataclass(frozen=True)
class TrainConfig:
    """The tiny model and its run."""

    steps: int = 300
    batch: int = 32
    seq: int = 256
    d_model: int = 256
    heads: int = 4
    layers: int = 2
    lr: float = 3e-3
    dtype: str = "bfloat16"  # of q, k, v inside attention; the rest of the model is float32
    seed: int = 0


def train(config: TrainConfig = TrainConfig(), *, progress=None, command=None) -> dict:
    """Train the model with each attention implementation ("flash", "standard"); returns the report."""
    if config.steps <= WARMUP_STEPS:
        raise InputError(
            f"steps: must be more than {WARMUP_STEPS} (the first {WARMUP_STEPS} are not timed), got {config.steps}"
        )
    torch = require_torch()
    text = b"".join(path.read_bytes() for path in sorted(SOURCES.rglob("*.py")))
    data = torch.tensor(list(text), dtype=torch.long, device="cuda")
    runs = {impl: _run(torch, config, data, impl, progress) for impl in RUNS}
    curves = {impl: run["losses"] for impl, run in runs.items()}
    gaps = [abs(a - b) for a, b in zip(curves["flash"], curves["standard"], strict=True)]
    return {
        "kind": "train",
        "env": results.environment(command),
        "config": asdict(config),
        "rungs": {
            "forward": flash.resolve(None, config.d_model // config.heads).rung,
            "backward": backward.resolve(None, config.d_model // config.heads).rung,
        },
        "text": f"sim/**/*.py, {len(data):,} bytes",
        "losses": curves,
        "tokens_per_s": {impl: run["tokens_per_s"] for impl, run in runs.items()},
        "max_loss_gap": max(gaps),
        "mean_loss_gap": sum(gaps) / len(gaps),
    }


def _run(torch, config: TrainConfig, data, impl: str, progress) -> dict:
    torch.manual_seed(config.seed)
    model = _model(torch, config, impl).cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr)
    batches = torch.Generator(device="cuda").manual_seed(config.seed)
    losses, start = [], None
    for step in range(config.steps):
        if step == WARMUP_STEPS:
            torch.cuda.synchronize()
            start = time.perf_counter()
        offsets = torch.randint(0, len(data) - config.seq - 1, (config.batch, 1), device="cuda", generator=batches)
        idx = offsets + torch.arange(config.seq + 1, device="cuda")
        x, y = data[idx[:, :-1]], data[idx[:, 1:]]
        loss = torch.nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten())
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
        if progress and (step + 1) % 50 == 0:
            progress(impl, step + 1, float(loss))
    torch.cuda.synchronize()
    elapsed = time.perf_counter() - start
    tokens = (config.steps - WARMUP_STEPS) * config.batch * config.seq
    return {"losses": [float(x) for x in losses], "tokens_per_s": tokens / elapsed}


def _model(torch, c: TrainConfig, impl: str):
    """Embeddings, c.layers pre-norm blocks (causal attention through gpu.autograd, MLP), a linear head."""
    nn = torch.nn
    dtype = {"float16": torch.float16, "bfloat16": torch.bfloat16}[c.dtype]

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(c.d_model), nn.LayerNorm(c.d_model)
            self.qkv, self.proj = nn.Linear(c.d_model, 3 * c.d_model), nn.Linear(c.d_model, c.d_model)
            self.mlp = nn.Sequential(
                nn.Linear(c.d_model, 4 * c.d_model), nn.GELU(), nn.Linear(4 * c.d_model, c.d_model)
            )

        def forward(self, x):
            b, t, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, c.heads, -1).permute(2, 0, 3, 1, 4).to(dtype)  # (b, h, t, dh)
            if impl == "sdpa":
                o = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            else:
                o = attention(q.contiguous(), k.contiguous(), v.contiguous(), causal=True, impl=impl)
            x = x + self.proj(o.float().transpose(1, 2).reshape(b, t, c.d_model))
            return x + self.mlp(self.ln2(x))

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.tokens, self.positions = nn.Embedding(256, c.d_model), nn.Embedding(c.seq, c.d_model)
            self.blocks = nn.Sequential(*(Block() for _ in range(c.layers)))
            self.ln, self.head = nn.LayerNorm(c.d_model), nn.Linear(c.d_model, 256)

        def forward(self, x):
            h = self.tokens(x) + self.positions(torch.arange(x.shape[1], device=x.device))
            return self.head(self.ln(self.blocks(h)))

    return Model()
