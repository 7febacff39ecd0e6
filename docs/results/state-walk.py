"""Which state coordinates of a trained one-layer AUSSM (or Simple AUSSM, DCD) carry its count, and whether
those that random-walk are what makes it fail at long lengths.

A unit-modulus coordinate h <- exp(i theta(x)) h + b(x) stays on a finite orbit only if every input's
rotation shares one centre c, b(x) = (1 - exp(i theta(x))) c (DiagLimits2026's Lemma 1-3, docs/theory.md);
otherwise its state wanders like a random walk and its root-mean-square grows as sqrt(t). For each
checkpoint this script (1) runs 128 random sequences of 1,000 inputs through the layer in float64, and per
coordinate (e, n) takes the growth of rms |h_t| from t = 60 (the training length) to t = 1,000 (a random
walk's is sqrt(1000 / 60) = 4.08, a bounded orbit's about 1); (2) evaluates the model with the coordinates
that grow by more than 3 (walking), or by 2 or more (all but the bounded), held at 0, on 256 test sequences
per length: if the walking coordinates were what fails, removing them would lengthen the hold; (3) feeds
the model a run of 1,000 copies of each symbol (the conv then sees that symbol alone) and gives the first
length at which its answer is wrong.

    PYTHONPATH=src python docs/results/state-walk.py [LABEL=]CHECKPOINT.safetensors ... > docs/results/state-walk.md
"""

from __future__ import annotations

import sys

import numpy as np
import torch

from statetrack.training.checkpoint import load_checkpoint

TRAIN, LONG = 60, 1000
LENGTHS = [60, 120, 160, 240, 360, 500, 750, 1000]


def _mixer_out(mixer, x: torch.Tensor, hold: torch.Tensor | None):
    """The mixer's output on x (B, T, d) by a float64 loop, coordinates in ``hold`` (E, N) kept at 0, and
    rms |h| over the batch at t = TRAIN and at the last t."""
    # the layer's own pieces (docs/models.md): its inputs, transition and read-out, run here step by step
    u, z, _, low, Bm, Cm = mixer._read(x, mixer.init_state(x.shape[0])[1], True)  # noqa: SLF001
    r, theta, scale = mixer._polar(low)  # noqa: SLF001
    keep = 1.0 if hold is None else (~hold).double()
    h = torch.zeros(x.shape[0], mixer.d_inner, mixer.d_state, dtype=torch.complex128)
    ys, rms = [], []
    for t in range(x.shape[1]):
        a = torch.polar(torch.ones_like(theta[:, t], dtype=torch.float64), theta[:, t].double())
        if r is not None:
            a = a * r[:, t].double()
        b = ((scale * u)[:, t].unsqueeze(-1) * Bm[:, t].unsqueeze(-2)).double() * keep
        h = a * h + b
        ys.append((h * Cm[:, t].to(torch.complex128).unsqueeze(-2)).sum(-1).real)
        if t + 1 in (TRAIN, x.shape[1]):
            rms.append(h.abs().pow(2).mean(0).sqrt())
    return mixer._gate(torch.stack(ys, 1).float(), u, z), rms  # noqa: SLF001


@torch.no_grad()
def main(paths: list[str]) -> None:
    print("# Random-walking state coordinates of trained AUSSM layers, and the hold without them\n")
    print(__doc__.split("\n\n")[1].replace("\n", " ") + "\n")
    print(
        "| checkpoint | task | coordinates | median growth 60 -> 1,000 | held at 0 | accuracy at "
        + ", ".join(map(str, LENGTHS))
        + " |"
    )
    print("|---|---|---|---|---|---|")
    runs = []
    for arg in paths:
        name, _, path = arg.rpartition("=")
        name = name or path.rsplit("/", 1)[-1]
        model, _, task, _ = load_checkpoint(path)
        model.eval()
        if len(model.blocks) != 1:
            raise SystemExit(f"{path}: one layer only, found {len(model.blocks)}")
        block = model.blocks[0]

        def logits(tokens, hold=None, block=block, model=model):
            x = model.embed(tokens)
            y, rms = _mixer_out(block.mixer, block.norm(x), hold)
            return model.head(model.norm(x + y)), rms

        tok = torch.randint(0, task.vocab_size, (128, LONG), generator=torch.Generator().manual_seed(1))
        _, (r_train, r_long) = logits(tok)
        growth = r_long / r_train.clamp_min(1e-300)
        rng = np.random.default_rng(0)
        tests = {n: task.sample_batch(rng, 256, n) for n in LENGTHS}
        for label, hold in (("none", None), ("growth > 3", growth > 3), ("growth >= 2", growth >= 2)):
            accs = []
            for b in tests.values():
                tokens = torch.as_tensor(b.inputs)
                pred = torch.cat(
                    [logits(part, hold)[0][:, -1].argmax(-1) for part in tokens.split(64)]
                ).numpy()
                accs.append(f"{(pred == np.asarray(b.targets)[:, -1]).mean():.3f}")
            held = "-" if hold is None else f"{label}: {int(hold.sum())}"
            cells = [
                name,
                task.name,
                str(growth.numel()),
                f"{float(growth.median()):.2f}",
                held,
                " ".join(accs),
            ]
            print("| " + " | ".join(cells) + " |")
        first, auto = [], task.automaton()
        for sym in auto.tokens.tolist():
            tokens = torch.full((1, LONG), sym)
            pred = model(tokens)[0][0].argmax(-1).numpy()
            wrong = np.nonzero(pred != auto.labels[auto.run(tokens.numpy())[0]])[0]
            first.append(str(int(wrong[0]) + 1) if len(wrong) else f">{LONG}")
        runs.append(f"| {name} | {task.name} | {', '.join(first)} |")
    print("\nA run of one symbol: the first length at which the answer is wrong, per symbol 0, 1, ...\n")
    print("| checkpoint | task | first wrong answer |")
    print("|---|---|---|")
    print("\n".join(runs))


if __name__ == "__main__":
    main(sys.argv[1:])
