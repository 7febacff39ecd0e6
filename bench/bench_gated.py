"""The gated recurrences alone, forward + backward, against fla-core's PyTorch forms: our own chunked forms
of the gated delta rule (``ops.gated_delta.chunk``), GLA (``ops.gla.chunk``) and KDA (``ops.kda.chunk``), the
general DPLR chunked form they replaced (``ops.dplr.chunk.dplr_chunked``) and fla 0.6.0's naive chunk and naive
recurrent functions (GLA has only a recurrent one there), at the benchmark shapes (batch x length x width: 64 x 256 x
64 and 8 x 4,096 x 128; one head, d_k 16, d_v the width, as the layers' defaults).

    PYTHONPATH=src python bench/bench_gated.py [--fla DIR] [--reps 7] [--shapes 64x256x64,8x4096x128]
        [--mixers gated,gla,kda] [--layers]

``--fla DIR``: a folder holding an unpacked fla-core 0.6.0 wheel and einops (``pip download --no-deps
fla-core==0.6.0 einops`` and unzip both there); its naive files are loaded from their paths (``import
fla`` needs triton). Without it only our forms are timed. One torch thread; the forms run interleaved,
each repeat in a rotated order, and each row gives the median over the repeats (after one warm-up each),
with the allocator settings of statetrack's entry points (``training.memory.configure``).
The loss is mean(o^2); fla's forms get scale 1 (ours does not scale q; fla's naive GLA scales q by
d_k^-1/2 and takes no scale, which changes no cost). ``--mixers``: which recurrences (the gated delta
rule, GLA, KDA; the gates one number per head for the first, one per key channel for the others). ``--layers``: also the
Gated DeltaNet and Gated DeltaProduct layers, forward + backward, with the recurrence as now and as before.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
import time
from types import ModuleType

import torch
import torch.nn.functional as F

from statetrack.ops.dplr.chunk import dplr_chunked
from statetrack.ops.gated_delta.chunk import gated_delta_chunked
from statetrack.ops.gated_delta.reference import gated_delta_terms
from statetrack.ops.gla.chunk import gla_chunked
from statetrack.ops.kda.chunk import kda_chunked
from statetrack.ops.kda.reference import kda_terms
from statetrack.training import memory


def _load(root: str, rel: str, name: str):
    s = importlib.util.spec_from_file_location(name, os.path.join(root, rel))
    mod = importlib.util.module_from_spec(s)
    s.loader.exec_module(mod)
    return mod


def inputs(B: int, T: int, H: int, dk: int, dv: int, seed: int = 0, per_channel: bool = False):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, T, H, dk, generator=g)
    k = F.normalize(torch.randn(B, T, H, dk, generator=g), dim=-1)
    v = torch.randn(B, T, H, dv, generator=g)
    beta = torch.rand(B, T, H, generator=g) * 2
    gate = -torch.rand(B, T, H, *((dk,) if per_channel else ()), generator=g) * 0.5
    return [x.requires_grad_() for x in (q, k, v, beta, gate)]


def gla_forms(fla_root: str | None) -> dict:
    """GLA's forms on (q, k, v, beta, log_w) (beta unused)."""
    out = {
        "ours: gla_chunked (C=16, c=8)": lambda q, k, v, beta, g: gla_chunked(q, k, v, g)[0],
        "ours before: dplr_chunked (C=8)": lambda q, k, v, beta, g: dplr_chunked(
            q, k, v, None, None, g, chunk=8
        )[0],
    }
    if fla_root:
        sys.path.insert(0, fla_root)
        naive = _load(fla_root, "fla/ops/gla/naive.py", "fla_gla_naive")
        out["fla naive recurrent (peer)"] = lambda q, k, v, beta, g: naive.naive_recurrent_gla(q, k, v, g)[0]
    return out


def kda_forms(fla_root: str | None) -> dict:
    """KDA's forms on (q, k, v, beta, log_w)."""

    def before(q, k, v, beta, g):
        bk, a, b = kda_terms(k, beta, g)
        return dplr_chunked(q, bk, v, a, b, g, chunk=8)[0]

    out = {
        "ours: kda_chunked (C=16, c=8)": lambda q, k, v, beta, g: kda_chunked(q, k, v, beta, g)[0],
        "ours before: dplr_chunked (C=8)": before,
    }
    if fla_root:
        sys.path.insert(0, fla_root)  # einops
        naive = _load(fla_root, "fla/ops/kda/naive.py", "fla_kda_naive")
        out["fla naive chunk (C=64, peer)"] = lambda q, k, v, beta, g: naive.naive_chunk_kda(
            q, k, v, g, beta, scale=1.0
        )[0]
        out["fla naive recurrent (peer)"] = lambda q, k, v, beta, g: naive.naive_recurrent_kda(
            q, k, v, g, beta, scale=1.0
        )[0]
    return out


#: the recurrences ``--mixers`` picks: (their forms, is the gate per key channel?)
MIXERS = {"gated": (lambda root: forms(root), False), "gla": (gla_forms, True), "kda": (kda_forms, True)}


def forms(fla_root: str | None) -> dict:
    out = {
        "ours: gated_delta_chunked (C=16)": lambda q, k, v, beta, g: gated_delta_chunked(q, k, v, beta, g)[0],
        "ours before: dplr_chunked (C=16)": lambda q, k, v, beta, g: _old_gated(q, k, v, beta, g)[0],
    }
    if fla_root:
        sys.path.insert(0, fla_root)  # einops
        naive = _load(fla_root, "fla/ops/gated_delta_rule/naive.py", "fla_gdn_naive")
        out["fla naive chunk (C=64, peer)"] = lambda q, k, v, beta, g: naive.naive_chunk_gated_delta_rule(
            q, k, v, g, beta, scale=1.0
        )[0]
        out["fla naive recurrent (peer)"] = lambda q, k, v, beta, g: naive.naive_recurrent_gated_delta_rule(
            q, k, v, beta, g, scale=1.0
        )[0]
    return out


def _median_times(fs: dict, step, reps: int) -> dict[str, float]:
    """Each form once to warm up, then ``reps`` rounds in a rotated order; the median seconds of each."""
    names = list(fs)
    times: dict[str, list[float]] = {k: [] for k in names}
    for k in names:
        step(fs[k])
    for rep in range(reps):
        for k in names[rep % len(names) :] + names[: rep % len(names)]:
            t = time.perf_counter()
            step(fs[k])
            times[k].append(time.perf_counter() - t)
    return {k: statistics.median(v) for k, v in times.items()}


def _old_gated(q, k, v, beta, g, S0=None, chunk=16):
    """The gated delta rule as it ran before ops.gated_delta.chunk: the general DPLR chunked form."""
    bk, a, b, lw = gated_delta_terms(k, beta, g)
    return dplr_chunked(q, bk, v, a, b, lw, S0, chunk)


def layer_forms(fla_root: str | None) -> dict[str, tuple[ModuleType, str, dict]]:
    """Per layer: the rule module of ``ops`` its recurrence runs through, the function of it that the rule calls,
    and the forms to patch in for it (ours, before, and with ``--fla`` fla's naive forms; each with that
    function's signature)."""
    from statetrack.ops.gated_delta import rule as gated_rule
    from statetrack.ops.gla import rule as gla_rule
    from statetrack.ops.kda import rule as kda_rule

    def gla_before(q, k, v, g, S0=None, chunk=16):  # noqa: ARG001 - the signature it stands in for
        return dplr_chunked(q, k, v, None, None, g, S0, chunk=8)

    def kda_before(q, k, v, beta, g, S0=None, chunk=16):  # noqa: ARG001
        bk, a, b = kda_terms(k, beta, g)
        return dplr_chunked(q, bk, v, a, b, g, S0, chunk=8)

    gated = {"ours": gated_rule.gated_delta_chunked, "before (dplr_chunked)": _old_gated}
    gla = {"ours": gla_rule.gla_chunked, "before (dplr_chunked)": gla_before}
    kda = {"ours": kda_rule.kda_chunked, "before (dplr_chunked)": kda_before}
    if fla_root:
        sys.path.insert(0, fla_root)  # einops
        gdn_naive = _load(fla_root, "fla/ops/gated_delta_rule/naive.py", "fla_gdn_naive")
        gla_naive = _load(fla_root, "fla/ops/gla/naive.py", "fla_gla_naive")
        kda_naive = _load(fla_root, "fla/ops/kda/naive.py", "fla_kda_naive")
        gated["fla naive chunk (peer)"] = lambda q, k, v, beta, g, S0=None, chunk=16: (
            gdn_naive.naive_chunk_gated_delta_rule(
                q, k, v, g, beta, scale=1.0, initial_state=S0, output_final_state=True
            )
        )
        gla["fla naive recurrent (peer)"] = lambda q, k, v, g, S0=None, chunk=16: (
            gla_naive.naive_recurrent_gla(q, k, v, g, initial_state=S0, output_final_state=True)
        )
        kda["fla naive chunk (peer)"] = lambda q, k, v, beta, g, S0=None, chunk=16: kda_naive.naive_chunk_kda(
            q, k, v, g, beta, scale=1.0, initial_state=S0, output_final_state=True
        )
        kda["fla naive recurrent (peer)"] = lambda q, k, v, beta, g, S0=None, chunk=16: (
            kda_naive.naive_recurrent_kda(
                q, k, v, g, beta, scale=1.0, initial_state=S0, output_final_state=True
            )
        )
    return {
        "gateddeltanet": (gated_rule, "gated_delta_chunked", gated),
        "gateddeltaproduct": (gated_rule, "gated_delta_chunked", gated),
        "gla": (gla_rule, "gla_chunked", gla),
        "kda": (kda_rule, "kda_chunked", kda),
    }


#: the layers of each ``--mixers`` entry
MIXER_LAYERS = {"gated": ("gateddeltanet", "gateddeltaproduct"), "gla": ("gla",), "kda": ("kda",)}


def layers_section(
    shapes: list[str], reps: int, fla_root: str | None, mixers: list[str], skip: list[str]
) -> None:
    """The whole layers (projections, conv, norms around the recurrence; default options, d_state 16),
    forward + backward, with the recurrence as now, as before, and (with ``--fla``) fla's naive forms in its
    place (over Gated DeltaProduct's sub-steps too), each patched into its rule module for its rows."""
    from statetrack.layers import build_mixer
    from statetrack.spec import parse_layers

    def with_form(m, rule, attr, form):
        def run(x):
            now = getattr(rule, attr)
            setattr(rule, attr, form)
            try:
                y = m(x)
                (y[0] if isinstance(y, tuple) else y).square().mean().backward()
            finally:
                setattr(rule, attr, now)

        return run

    table = layer_forms(fla_root)
    for shape in shapes:
        B, T, W = (int(x) for x in shape.split("x"))
        x = torch.randn(B, T, W, generator=torch.Generator().manual_seed(0))
        fs = {}
        for name in (n for mixer in mixers for n in MIXER_LAYERS[mixer]):
            torch.manual_seed(0)
            m = build_mixer(parse_layers(name)[0], W, 16)
            rule, attr, forms_ = table[name]
            for label, form in forms_.items():
                if label == "ours" or not any(s and s in label for s in skip):
                    fs[f"{name}: {label}"] = with_form(m, rule, attr, form)
        med = _median_times(fs, lambda f: f(x), reps)
        print(
            f"\nlayers {shape} (batch x length x width, d_state 16), forward + backward, median of {reps}, "
            f"load average {os.getloadavg()[0]:.2f}:"
        )
        for k, m in med.items():
            base = med[k.split(":")[0] + ": ours"]
            print(f"  {k:42s} {1000 * m:9.1f} ms   {m / base:5.2f}x ours")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--fla", default=None)
    p.add_argument("--reps", type=int, default=7)
    p.add_argument("--shapes", default="64x256x64,8x4096x128")
    p.add_argument("--skip", default="", help="comma-separated form names (substrings) to leave out")
    p.add_argument(
        "--mixers", default="gated", help="comma-separated: gated (the gated delta rule), gla, kda"
    )
    p.add_argument("--layers", action="store_true", help="also the whole layers, now and before")
    p.add_argument("--only-layers", action="store_true", help="the whole layers alone")
    a = p.parse_args(argv)
    torch.set_num_threads(1)
    memory.configure()  # the allocator settings statetrack's entry points use (statetrack.training.memory)
    print(f"torch {torch.__version__}, 1 thread, load average {os.getloadavg()[0]:.2f} at the start")
    for mixer in [] if a.only_layers else a.mixers.split(","):
        make, per_channel = MIXERS[mixer]
        fs = {k: f for k, f in make(a.fla).items() if not any(s and s in k for s in a.skip.split(","))}
        for shape in a.shapes.split(","):
            B, T, W = (int(x) for x in shape.split("x"))
            ins = inputs(B, T, 1, 16, W, per_channel=per_channel)

            def step(f, ins=ins):
                for x in ins:
                    x.grad = None
                f(*ins).square().mean().backward()

            med = _median_times(fs, step, a.reps)
            ours = next(iter(med.values()))
            print(
                f"\n{mixer}: batch x length x width {shape} (one head, d_k 16), forward + backward, median of "
                f"{a.reps}, load average {os.getloadavg()[0]:.2f}:"
            )
            for k, m in med.items():
                print(f"  {k:36s} {1000 * m:9.1f} ms   {m / ours:5.2f}x ours")
    if a.layers or a.only_layers:
        layers_section(a.shapes.split(","), a.reps, a.fla, a.mixers.split(","), a.skip.split(","))
    print(f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
