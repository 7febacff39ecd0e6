"""Eigenvalues of A(x) per layer, on the complex plane with the unit circle.

Layer 1 is evaluated per vocabulary token: the token's embedding, through the block's norm, as a
one-step input (a causal conv then sees zero history: an approximation for conv layers, stated in
the output). Every layer, layer 1 included, is also evaluated on the inputs it actually sees on a few
random sample sequences of the model's task (``samples`` x ``length`` tokens), coloured by the current
token. Non-linear layers have no transition matrix and are skipped.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from statetrack.training.checkpoint import load_checkpoint


@torch.no_grad()
def spectrum(checkpoint, samples: int = 4, length: int = 64, seed: int = 0) -> dict:
    if isinstance(checkpoint, (str, bytes)) or hasattr(checkpoint, "__fspath__"):
        model, cfg, task, _ = load_checkpoint(checkpoint)
    else:
        model, task = checkpoint
        cfg = None
    model.eval()
    V = model.vocab_size
    layers = []
    # per token, layer 1
    emb = model.embed.weight[:, None, :]  # (V, 1, d)
    first = model.block(0).mixer.eigenvalues(model.block(0).norm(emb))
    # sample sequences: each layer's actual inputs
    rng = np.random.default_rng(seed)
    b = task.sample_batch(rng, samples, length)
    tokens = torch.as_tensor(b.inputs)
    x = model.embed(tokens)
    for li, block in enumerate(model.blocks):
        xin = block.norm(x)
        ev = block.mixer.eigenvalues(xin)
        entry = {
            "layer": li + 1,
            "mixer": type(block.mixer).name,
            "properties": block.mixer.properties.as_dict(),
        }
        if ev is not None:
            ev = ev.detach().to(torch.complex128)
            per_tok = None
            if li == 0 and first is not None:
                f = first.detach().to(torch.complex128)[:, 0, :]  # (V, n)
                per_tok = {str(t): [[z.real, z.imag] for z in f[t].tolist()] for t in range(V)}
            flat = ev.reshape(-1)
            ang = torch.angle(flat)
            entry.update(
                {
                    "per_token": per_tok,
                    "samples": ev.reshape(ev.shape[0] * ev.shape[1], -1).tolist(),
                    "sample_tokens": tokens.reshape(-1).tolist(),
                    "min_real": float(flat.real.min()),
                    "max_modulus": float(flat.abs().max()),
                    "min_modulus": float(flat.abs().min()),
                    "angles_deg": sorted(
                        {round(math.degrees(a), 1) for a in ang[flat.abs() > 1e-6].tolist()}
                    )[:40],
                    "n_angles": len({round(math.degrees(a), 1) for a in ang[flat.abs() > 1e-6].tolist()}),
                }
            )
            if per_tok is not None:
                f = first.detach().to(torch.complex128)[:, 0, :]
                entry["per_token_min_real"] = {str(t): float(f[t].real.min()) for t in range(V)}
        layers.append(entry)
        x, _ = block(x)
    return {
        "checkpoint": str(checkpoint) if cfg is not None else "<model>",
        "layers_spec": model.cfg.layers,
        "task": task.name,
        "layers": layers,
        "note": "layer 1 per token uses a one-step input (zero conv history); sample rows use the inputs "
        f"each layer sees on {samples} random {task.name} sequences of length {length}",
    }
