"""Benchmarks: every mixer side by side, the raw scans, peers, and copy bandwidth.

    PYTHONPATH=src python bench/bench_mixers.py [--quick] [--only SECTION ...] [--device cpu|cuda]

Sections: train64 (forward+backward, batch 256, length 64, width 64, state 16), train1024 (the same at
length 1,024; batch 32 by default, see --batch1024), stream (forward, no grad, batch 64, length
10,000 streamed in chunks with the state carried), deltaops (the delta rule alone, forward+backward,
at the two training shapes, against fla-core's naive recurrence), scans (raw diagonal and delta-rule scans at
lengths 64, 1,024, 10,000, with peers), copy (memory bandwidth, the 12 bytes/element/step floor for
evaluation at batch 64, 64 channels x state 16, length 10,000, and the streaming forms against it).
CUDA only (``--device cuda``; skipped elsewhere): gpu-mamba (Mamba / Negative Mamba layers with the
Triton kernels against mambapy and mamba_ssm where installed, the scan op alone, the PyTorch forms up to
length 1,024, GPU busy time), gpu-delta (the delta rule as dispatched against fla's chunk and fused
recurrent kernels), gpu-complex (AUSSM, Simple AUSSM, DCD layers, kernels against the PyTorch forms),
reflections (how exactly each delta-rule kernel keeps a product of reflections), tiles (tile sizes of
the Triton scans); these are not in the default --only list.
Times are the minimum over a few repeats, in milliseconds. Peers: ``mambapy`` (pure PyTorch Mamba,
Blelloch pscan) and fla-core's naive delta-rule functions, loaded from their file because the fla
package itself imports triton.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import platform
import time

import torch
import torch.nn.functional as F

from statetrack.layers import MIXERS, build_mixer
from statetrack.ops import (
    delta_rule,
    delta_rule_chunked,
    delta_rule_recurrent,
    diag_scan,
    dispatch,
    mamba_scan,
)
from statetrack.ops.diag.scan import scan_chunked, scan_loop
from statetrack.spec import parse_layers
from statetrack.training import memory

memory.configure()  # the allocator settings statetrack's entry points use (statetrack.training.memory)

D_MODEL, D_STATE = 64, 16


def sync(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize()


def timeit(fn, dev, reps=3, warmup=1, budget=None):
    for _ in range(warmup):
        fn()
    sync(dev)
    best = math.inf
    t_start = time.perf_counter()
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        sync(dev)
        best = min(best, time.perf_counter() - t)
        if budget and time.perf_counter() - t_start > budget:
            break
    return best * 1e3


# ------------------------------------------------------------------ peers


def mambapy_block(dev, d_model=D_MODEL):
    try:
        from mambapy.mamba import MambaBlock, MambaConfig
    except ImportError:
        return None
    return MambaBlock(MambaConfig(d_model=d_model, n_layers=1, d_state=D_STATE)).to(dev)


def mamba_ssm_block(dev, d_model):
    """mamba_ssm's Mamba layer (CUDA selective scan), where that package is installed."""
    if not dispatch.installed("mamba_ssm"):
        return None
    from mamba_ssm.modules.mamba_simple import Mamba

    return Mamba(d_model=d_model, d_state=D_STATE).to(dev)


def fla_naive():
    spec = importlib.util.find_spec("fla")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = os.path.join(list(spec.submodule_search_locations)[0], "ops", "delta_rule", "naive.py")
    s = importlib.util.spec_from_file_location("fla_delta_naive", path)
    mod = importlib.util.module_from_spec(s)
    try:
        s.loader.exec_module(mod)
    except Exception:  # pragma: no cover
        return None
    return mod


def fla_delta_peer(name, dev):
    """Our ``name`` mixer (deltanet / deltaproduct) with fla-core's naive recurrent delta rule in place
    of ``ops.delta_rule``: the same layer, the peer's recurrence (a per-step loop under autograd)."""
    fla = fla_naive()
    if fla is None:
        return None
    import statetrack.layers.deltanet as dn

    def op(q, k, v, beta, S0=None, chunk=0):  # noqa: ARG001 - the signature of the op it stands in for
        dk = q.shape[-1]  # fla scales q by dk^-1/2; ours is only L2-normalised: undo the scaling
        tq, tk, tv, tb = (t.transpose(1, 2) for t in (q * dk**0.5, k, v, beta))
        o, S = fla.delta_rule_recurrence(tq, tk, tv, tb, initial_state=S0)
        return o.transpose(1, 2), S

    class Peer(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, x):
            orig, dn.delta_rule = dn.delta_rule, op
            try:
                return self.m(x)
            finally:
                dn.delta_rule = orig

    return Peer(build(name, dev))


def mamba_pscan():
    try:
        from mambapy.pscan import pscan
    except ImportError:
        return None
    return pscan


# ------------------------------------------------------------------ sections

SELECTED: list[str] | None = None


def mixer_names():
    return [n for n in MIXERS if SELECTED is None or n in SELECTED]


def build(name, dev, d_model=D_MODEL):
    torch.manual_seed(0)
    (layer,) = parse_layers(name)
    return build_mixer(layer, d_model, D_STATE).to(dev)


def train_step(m, x):
    """One forward + backward of layer m on x (loss: mean square of the output)."""

    def fb():
        xx = x.detach().requires_grad_()
        y = m(xx)
        y = y[0] if isinstance(y, tuple) else y
        y.float().square().mean().backward()

    return fb


def section_train(dev, B, T, reps):
    rows = []
    x = torch.randn(B, T, D_MODEL, device=dev)
    models = [(n, build(n, dev)) for n in mixer_names()]
    mp = mambapy_block(dev) if SELECTED is None or "mambapy" in SELECTED else None
    if mp is not None:
        models.append(("mambapy (peer)", mp))
    for name in ("deltanet", "deltaproduct"):
        peer = fla_delta_peer(name, dev) if SELECTED is None or f"{name}-fla" in SELECTED else None
        if peer is not None:
            models.append((f"{name} + fla naive recurrence (peer)", peer))
    for name, m in models:
        try:
            ms = timeit(train_step(m, x), dev, reps=reps, budget=20)
        except RuntimeError as e:  # out of memory etc.
            ms = float("nan")
            print(f"  {name}: {e}")
        rows.append({"mixer": name, "ms": ms, "tokens_per_s": B * T / ms * 1e3})
        print(f"  train B={B} T={T} {name:16s} {ms:10.1f} ms", flush=True)
    return rows


def streamer(m, x, length, dev):
    """A function that runs mixer m over ``length`` steps, the chunk x (B, chunk, d) at a time, with the
    state carried from chunk to chunk (call it under no_grad)."""

    def run():
        s = m.init_state(x.shape[0], dev, x.dtype)
        for _ in range(length // x.shape[1]):
            _, s = m(x, s)

    return run


@torch.no_grad()
def section_stream(dev, B, T, chunk, reps):
    rows = []
    x = torch.randn(B, chunk, D_MODEL, device=dev)
    for name in mixer_names():
        m = build(name, dev).eval()
        length = T
        if name == "transformer":  # quadratic in length: measured at a shorter length
            length = min(T, 2000)
        ms = timeit(streamer(m, x, length, dev), dev, reps=reps, warmup=0, budget=30)
        rows.append({"mixer": name, "length": length, "ms": ms, "us_per_step": ms * 1e3 / length})
        print(
            f"  stream B={B} T={length} {name:16s} {ms:10.1f} ms  {ms * 1e3 / length:8.1f} us/step",
            flush=True,
        )
    return rows


def section_delta_ops(dev, reps, shapes=((256, 64), (32, 1024))):
    """The delta-rule recurrence alone, forward + backward, at the training shapes of the mixers
    (batch 256 x length 64 and batch 32 x length 1,024; one head, d_k 16, d_v 64): ours (chunked, custom
    backward) against fla-core's naive recurrence. DeltaProduct (n_h = 2) runs 2 sub-steps per token."""
    fla = fla_naive()
    rows = []
    for B, T in shapes:
        for name, nh in (("deltanet", 1), ("deltaproduct", 2)):
            L = T * nh
            g = torch.Generator(device=dev).manual_seed(0)
            q = F.normalize(torch.randn(B, L, 1, D_STATE, device=dev, generator=g), dim=-1)
            k = F.normalize(torch.randn(B, L, 1, D_STATE, device=dev, generator=g), dim=-1)
            v = torch.randn(B, L, 1, D_MODEL, device=dev, generator=g)
            beta = 2 * torch.rand(B, L, 1, device=dev, generator=g)

            def ours():
                ins = [t.detach().requires_grad_() for t in (q, k, v, beta)]
                delta_rule_chunked(*ins)[0].square().mean().backward()  # the layers' default chunk

            def peer():
                ins = [t.detach().transpose(1, 2).requires_grad_() for t in (q, k, v, beta)]
                fla.delta_rule_recurrence(*ins)[0].square().mean().backward()

            forms = {"ours (chunked, custom backward)": ours}
            if fla is not None:
                forms["fla naive recurrence (peer)"] = peer
            for form, fn in forms.items():
                ms = timeit(fn, dev, reps=reps if T <= 64 else 1, budget=30)
                rows.append({"op": name, "B": B, "T": T, "form": form, "ms": ms})
                print(f"  delta op f+b {name:13s} B={B} T={T} {form:32s} {ms:9.1f} ms", flush=True)
    return rows


def _old_list_loop(a, b, h0):
    """The previous diag_scan: loop, list of steps, stack (autograd through every step)."""
    h, out = h0, []
    for at, bt in zip(a.unbind(1), b.unbind(1), strict=True):
        h = torch.addcmul(bt, at, h)
        out.append(h)
    return torch.stack(out, 1)


def _hillis(a, b, h0):
    b = torch.cat([(b[:, :1] + a[:, :1] * h0.unsqueeze(1)), b[:, 1:]], 1)
    T, d = a.shape[1], 1
    while d < T:
        b = torch.cat([b[:, :d], torch.addcmul(b[:, d:], a[:, d:], b[:, :-d])], 1)
        a = torch.cat([a[:, :d], a[:, d:] * a[:, :-d]], 1)
        d *= 2
    return b


def section_scans(dev, lengths, reps):
    return _diag_scans(dev, lengths, reps, mamba_pscan()) + _delta_scans(dev, lengths, reps, fla_naive())


def _diag_scans(dev, lengths, reps, pscan):
    """The diagonal scan's forms, forward and forward + backward, on a wide and a thin shape."""
    rows = []
    for shape_name, (B, S) in {"wide (8, T, 256)": (8, (256,)), "thin (1, T, 16)": (1, (16,))}.items():
        for T in lengths:
            a = torch.rand((B, T) + S, device=dev) * 2 - 1
            b = torch.randn((B, T) + S, device=dev)
            h0 = torch.zeros((B,) + S, device=dev)
            forms = {
                "diag_scan": lambda: diag_scan(a, b, h0),
                "in-place loop": lambda: scan_loop(a, b, h0),
                "chunked": lambda: scan_chunked(a, b, h0),
                "list+stack loop (old)": lambda: _old_list_loop(a, b, h0),
            }
            if T <= 1024:
                forms["Hillis-Steele"] = lambda: _hillis(a, b, h0)
            if pscan is not None and a.dim() == 3:
                forms["mambapy pscan (peer)"] = lambda: pscan(a.unsqueeze(-1), b.unsqueeze(-1))
            for fname, f in forms.items():
                ms = timeit(f, dev, reps=reps, budget=10)
                rows.append({"scan": "diag fwd", "shape": shape_name, "T": T, "form": fname, "ms": ms})
                print(f"  diag fwd {shape_name} T={T} {fname:24s} {ms:9.2f} ms", flush=True)
            # forward + backward
            fb = {"diag_scan (custom backward)": diag_scan, "list+stack loop (autograd)": _old_list_loop}
            if T <= 1024:
                fb["Hillis-Steele (autograd)"] = _hillis
            if pscan is not None:
                fb["mambapy pscan (peer)"] = lambda a, b, _h0: pscan(a.unsqueeze(-1), b.unsqueeze(-1))
            for fname, f in fb.items():

                def run():
                    aa, bb = a.detach().requires_grad_(), b.detach().requires_grad_()
                    f(aa, bb, h0).sum().backward()

                ms = timeit(run, dev, reps=reps, budget=10)
                rows.append({"scan": "diag fwd+bwd", "shape": shape_name, "T": T, "form": fname, "ms": ms})
                print(f"  diag f+b {shape_name} T={T} {fname:24s} {ms:9.2f} ms", flush=True)
    return rows


def _delta_scans(dev, lengths, reps, fla):
    """The delta rule's forms at (B, T, H, dk, dv) = (8, T, 2, 16, 32), forward and forward + backward."""
    rows = []
    B, H, dk, dv = 8, 2, 16, 32
    for T in lengths:
        q = F.normalize(torch.randn(B, T, H, dk, device=dev), dim=-1)
        k = F.normalize(torch.randn(B, T, H, dk, device=dev), dim=-1)
        v = torch.randn(B, T, H, dv, device=dev)
        beta = torch.rand(B, T, H, device=dev)
        forms = {
            "recurrent": lambda: delta_rule_recurrent(q, k, v, beta),
            "chunked UT (C=64)": lambda: delta_rule_chunked(q, k, v, beta, chunk=64),
            "chunked UT (C=32)": lambda: delta_rule_chunked(q, k, v, beta, chunk=32),
            "chunked UT (C=16)": lambda: delta_rule_chunked(q, k, v, beta, chunk=16),
        }
        if fla is not None:
            tq, tk, tv, tb = (t.transpose(1, 2).contiguous() for t in (q, k, v, beta))
            forms["fla naive recurrence (peer)"] = lambda: fla.delta_rule_recurrence(tq, tk, tv, tb)
            if T % 16 == 0:
                forms["fla naive chunkwise C=16 (peer)"] = lambda: fla.delta_rule_chunkwise(
                    tq, tk, tv, tb, 16
                )
        for fname, f in forms.items():
            ms = timeit(f, dev, reps=reps, budget=15)
            rows.append({"scan": "delta fwd", "shape": "(8, T, 2, 16, 32)", "T": T, "form": fname, "ms": ms})
            print(f"  delta fwd T={T} {fname:30s} {ms:9.2f} ms", flush=True)
        if T <= 1024:
            for fname, f in {
                "recurrent": delta_rule_recurrent,
                "chunked UT (C=64)": lambda *z: delta_rule_chunked(*z, chunk=64),
                "chunked UT (C=16)": lambda *z: delta_rule_chunked(*z, chunk=16),
            }.items():

                def run():
                    ins = [t.detach().requires_grad_() for t in (q, k, v, beta)]
                    f(*ins)[0].sum().backward()

                ms = timeit(run, dev, reps=reps, budget=15)
                rows.append(
                    {"scan": "delta fwd+bwd", "shape": "(8, T, 2, 16, 32)", "T": T, "form": fname, "ms": ms}
                )
                print(f"  delta f+b T={T} {fname:30s} {ms:9.2f} ms", flush=True)
    return rows


def copy_bandwidth(dev, reps) -> float:
    """GB/s of ``y.copy_(x)`` over 256 MiB, read + write counted."""
    n = 64 * 2**20  # 64 Mi floats
    x = torch.randn(n, device=dev)
    y = torch.empty_like(x)
    ms = timeit(lambda: y.copy_(x), dev, reps=reps)
    return 2 * 4 * n / (ms / 1e3) / 1e9


def section_copy(dev, reps, T=10_000, chunk=250):
    """Copy bandwidth, the evaluation floor, and how close the streaming forms come to it.

    The floor (issue shape: batch 64, 64 channels x state 16, length 10,000): a diagonal scan reads
    a_t and b_t and writes h_t, 12 bytes per state element per step in float32, so it needs at least
    T * 64 * 64 * 16 * 12 B / copy bandwidth. Every form runs the 10,000 steps chunk by chunk with
    the state carried (memory of one chunk, flat in length); inputs are made once per chunk shape and
    not timed."""
    bw = copy_bandwidth(dev, reps)
    B, E, N = 64, 64, D_STATE
    threads = torch.get_num_threads()
    print(f"  {threads} thread(s)", flush=True)
    floor_s = T * B * E * N * 12 / (bw * 1e9)
    out = {
        "threads": threads,
        "copy_GBps": bw,
        "floor_s": floor_s,
        "shape": f"batch {B}, {E} channels x state {N}, length {T}",
        "chunk": chunk,
        "forms": [],
    }
    print(
        f"  copy {bw:.1f} GB/s; floor for batch {B}, {E} x {N} state, {T} steps: {floor_s:.3f} s", flush=True
    )
    g = torch.Generator(device=dev).manual_seed(0)
    a = torch.rand(B, chunk, E * N, device=dev, generator=g) * 2 - 1
    b = torch.randn(B, chunk, E * N, device=dev, generator=g)
    buf = torch.empty_like(a)

    def scan_stream():
        h = torch.zeros(B, E * N, device=dev)
        for _ in range(T // chunk):
            diag_scan(a, b, h, out=buf)
            h = buf[:, -1].clone()

    dt = torch.rand(B, chunk, E, device=dev, generator=g) * 0.1
    A = -torch.arange(1, N + 1, device=dev, dtype=torch.float32).repeat(E, 1)
    u = torch.randn(B, chunk, E, device=dev, generator=g)
    Bm, Cm = (
        torch.randn(B, chunk, N, device=dev, generator=g),
        torch.randn(B, chunk, N, device=dev, generator=g),
    )

    def mamba_op_stream():
        h = None
        for _ in range(T // chunk):
            _, h = mamba_scan(dt, A, u, Bm, Cm, h, neg=True)

    xin = torch.randn(B, chunk, D_MODEL, device=dev, generator=g)

    def mixer_stream(spec):
        return streamer(build(spec, dev).eval(), xin, T, dev)

    forms = [
        ("diag_scan, a_t and b_t given (streaming form, out= buffer)", 1, scan_stream),
        ("mamba_scan (Negative Mamba), a_t = 2 exp(Delta_t A) - 1 formed inside", 1, mamba_op_stream),
        (
            "negmamba(expand=1) mixer: 64 channels, with projections and conv",
            1,
            mixer_stream("negmamba(expand=1)"),
        ),
        ("negmamba mixer, default expand 2: 128 channels (floor x 2)", 2, mixer_stream("negmamba")),
    ]
    with torch.no_grad():
        for name, scale, fn in forms:
            ms_f = timeit(fn, dev, reps=max(1, reps - 1), warmup=1)
            ratio = ms_f / 1e3 / (scale * floor_s)
            out["forms"].append({"form": name, "s": ms_f / 1e3, "floor_s": scale * floor_s, "x_floor": ratio})
            print(f"  stream {name:70s} {ms_f / 1e3:7.3f} s  {ratio:5.2f}x floor", flush=True)
    return out


# ------------------------------------------------------------------ GPU (CUDA only)

#: (batch, length, d_model) of the Mamba layer rows; (batch, length, heads, head dim) of the delta rule
GPU_MAMBA_SHAPES = ((256, 64, 64), (32, 1024, 64), (16, 4096, 256), (4, 16384, 256))
GPU_DELTA_SHAPES = ((8, 1024, 4, 64), (8, 4096, 4, 64), (2, 16384, 8, 128))
#: the PyTorch forms (STATETRACK_KERNELS=0) are timed only up to this length (seconds per step beyond)
GPU_PYTORCH_MAX_T = 1024


class kernels_off:
    """STATETRACK_KERNELS=0 inside the block: the ops run their PyTorch forms on CUDA too."""

    def __enter__(self):
        self.old = os.environ.get(dispatch.ENV)
        os.environ[dispatch.ENV] = "0"

    def __exit__(self, *exc):
        if self.old is None:
            del os.environ[dispatch.ENV]
        else:
            os.environ[dispatch.ENV] = self.old


def _timed(rows, row, fn, dev, reps, off=False):
    try:
        if off:
            with kernels_off():
                ms = timeit(fn, dev, reps=reps, budget=20)
        else:
            ms = timeit(fn, dev, reps=reps, budget=20)
    except RuntimeError as e:  # out of memory etc.
        print(f"  {row}: {e}")
        ms = float("nan")
    rows.append(dict(row, ms=ms))
    print("  " + " ".join(f"{k}={v}" for k, v in row.items()) + f"  {ms:9.2f} ms", flush=True)


def gpu_profile(fn):
    """(milliseconds the GPU spent in kernels, number of kernels) for one call of fn, from torch.profiler."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as p:
        fn()
        torch.cuda.synchronize()
    kernels = [e for e in p.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    return sum(e.time_range.elapsed_us() for e in kernels) / 1e3, len(kernels)


def section_gpu_mamba(dev, reps, shapes=GPU_MAMBA_SHAPES):
    """Mamba and Negative Mamba layers, forward + backward, against mambapy (and mamba_ssm where installed);
    the scan op alone at the layer's shapes (channels 2 d, state 16); for the kernel rows and the peers, the
    GPU's busy time in one step (torch.profiler: the sum of its kernels' durations) and the kernel count."""
    rows = []
    for B, T, d in shapes:
        E, N = 2 * d, D_STATE
        g = torch.Generator(device=dev).manual_seed(0)
        ins = [
            torch.rand(B, T, E, device=dev, generator=g) * 0.1,
            -torch.arange(1, N + 1, device=dev, dtype=torch.float32).repeat(E, 1),
        ]
        ins += [torch.randn(*s, device=dev, generator=g) for s in ((B, T, E), (B, T, N), (B, T, N))]
        for neg in (False, True):

            def scan_fb(neg=neg):
                xs = [t.detach().requires_grad_() for t in ins]
                y, h = mamba_scan(*xs, neg=neg)
                (y.square().mean() + h.square().mean()).backward()

            _timed(
                rows,
                {
                    "layer": "negmamba" if neg else "mamba",
                    "form": "mamba_scan op alone (Triton)",
                    "B": B,
                    "T": T,
                    "d": d,
                },
                scan_fb,
                dev,
                reps,
            )
        x = torch.randn(B, T, d, device=dev)
        forms = [
            ("mamba", "Triton kernels", build("mamba", dev, d), False),
            ("negmamba", "Triton kernels", build("negmamba", dev, d), False),
        ]
        if T <= GPU_PYTORCH_MAX_T:
            forms += [
                ("mamba", "PyTorch ops (STATETRACK_KERNELS=0)", build("mamba", dev, d), True),
                ("negmamba", "PyTorch ops (STATETRACK_KERNELS=0)", build("negmamba", dev, d), True),
            ]
        for peer, make in (("mambapy (peer)", mambapy_block), ("mamba_ssm (peer)", mamba_ssm_block)):
            m = make(dev, d)
            if m is not None:
                forms.append((peer, "", m, False))
        for name, form, m, off in forms:
            _timed(
                rows, {"layer": name, "form": form, "B": B, "T": T, "d": d}, train_step(m, x), dev, reps, off
            )
            if not off and dev.type == "cuda":
                rows[-1]["gpu_busy_ms"], rows[-1]["kernels"] = gpu_profile(train_step(m, x))
                print(
                    f"    GPU busy {rows[-1]['gpu_busy_ms']:.2f} ms in {rows[-1]['kernels']} kernels",
                    flush=True,
                )
    return rows


def _delta_inputs(dev, B, T, H, K, neg):
    g = torch.Generator(device=dev).manual_seed(0)
    q = F.normalize(torch.randn(B, T, H, K, device=dev, generator=g), dim=-1)
    k = F.normalize(torch.randn(B, T, H, K, device=dev, generator=g), dim=-1)
    v = torch.randn(B, T, H, K, device=dev, generator=g)
    beta = torch.rand(B, T, H, device=dev, generator=g) * (2 if neg else 1)
    return q, k, v, beta


def section_gpu_delta(dev, reps, shapes=GPU_DELTA_SHAPES):
    """The delta rule alone, forward + backward (d_v = d_k): ours as dispatched (fla's chunk kernel for beta
    in [0, 1], its float32 recurrent kernel for beta in [0, 2]) against fla's two kernels called directly."""
    rows = []
    fla_ok = dispatch.installed("fla")
    if fla_ok:
        from fla.ops.delta_rule import chunk_delta_rule, fused_recurrent_delta_rule
    for B, T, H, K in shapes:

        def step(fn, ins, dtype=None):
            def run():
                xs = [t.detach().to(dtype or t.dtype).requires_grad_() for t in ins]
                fn(*xs)[0].float().square().mean().backward()

            return run

        for neg in (False, True):
            ins = _delta_inputs(dev, B, T, H, K, neg)
            betas = "[0,2]" if neg else "[0,1]"
            shape = {"B": B, "T": T, "H": H, "K": K, "beta": betas}
            if fla_ok:
                from statetrack.ops.deltanet.fla import default_kernel

                form = f"ours: delta_rule (fla {default_kernel(neg)})"
                _timed(rows, dict(shape, form=form), step(lambda *z: delta_rule(*z, neg=neg), ins), dev, reps)
            if T <= GPU_PYTORCH_MAX_T:
                _timed(
                    rows,
                    dict(shape, form="ours: PyTorch chunked (STATETRACK_KERNELS=0)"),
                    step(lambda *z: delta_rule(*z, neg=neg), ins),
                    dev,
                    reps,
                    off=True,
                )
            if fla_ok:
                q, k, v, beta = ins
                _timed(
                    rows,
                    dict(shape, form="fla chunk_delta_rule, bf16 (peer)"),
                    step(
                        lambda q, k, v: chunk_delta_rule(q, k, v, beta, scale=1.0), (q, k, v), torch.bfloat16
                    ),
                    dev,
                    reps,
                )
                _timed(
                    rows,
                    dict(shape, form="fla fused_recurrent_delta_rule, fp32 (peer)"),
                    step(lambda q, k, v: fused_recurrent_delta_rule(q, k, v, beta, scale=1.0), (q, k, v)),
                    dev,
                    reps,
                )
    return rows


def section_gpu_complex(dev, reps, B=32, T=1024):
    """AUSSM, Simple AUSSM and DCD layers (complex selective scan), forward + backward, kernels against the
    PyTorch form."""
    rows = []
    x = torch.randn(B, T, D_MODEL, device=dev)
    for name in ("aussm", "saussm", "dcd"):
        m = build(name, dev)
        for form, off in (("Triton kernels", False), ("PyTorch ops (STATETRACK_KERNELS=0)", True)):
            _timed(
                rows,
                {"layer": name, "form": form, "B": B, "T": T, "d": D_MODEL},
                train_step(m, x),
                dev,
                reps,
                off,
            )
    return rows


def section_reflections(dev, lengths=(1024, 16384), B=2, H=4, K=64):
    """How exactly each delta-rule kernel keeps a product of reflections (beta in {0, 2}, v = 0): the state
    S_T = H_T ... H_1 S_0 has the norm of S_0 exactly; the drift of the norm and the error against the
    same recurrence in float64 measure what the kernel's precision does to a tracked state over length."""
    if not dispatch.installed("fla"):
        return []
    from statetrack.ops.deltanet.fla import delta_rule_fla

    rows = []
    for T in lengths:
        g = torch.Generator(device=dev).manual_seed(T)
        k = F.normalize(torch.randn(B, T, H, K, device=dev, generator=g), dim=-1)
        q = F.normalize(torch.randn(B, T, H, K, device=dev, generator=g), dim=-1)
        beta = 2.0 * (torch.rand(B, T, H, device=dev, generator=g) < 0.5)
        v = torch.zeros(B, T, H, K, device=dev)
        S0 = torch.randn(B, H, K, K, device=dev, generator=g)
        _, Sref = delta_rule_chunked(*(t.double() for t in (q, k, v, beta, S0)))
        n0 = S0.double().norm()
        forms = {
            f"fla {kern}": (lambda kern=kern: delta_rule_fla(q, k, v, beta, S0, kern))
            for kern in ("chunk", "recurrent")
        }
        forms["ours: PyTorch chunked, float32"] = lambda: delta_rule_chunked(q, k, v, beta, S0)
        for form, fn in forms.items():
            with torch.no_grad():
                S = fn()[1].double()
            row = {
                "T": T,
                "form": form,
                "norm_drift": float((S.norm() / n0 - 1).abs()),
                "rel_err": float((S - Sref).norm() / Sref.norm()),
            }
            rows.append(row)
            print(
                f"  reflections T={T} {form:32s} |S_T|/|S_0| - 1 = {row['norm_drift']:.2e}  "
                f"error vs float64 {row['rel_err']:.2e}",
                flush=True,
            )
    return rows


def section_tiles(
    dev,
    reps,
    shapes=((32, 1024, 128), (4, 16384, 512)),
    configs=((16, 8), (16, 16), (16, 32), (32, 8), (32, 16), (8, 16)),
):
    """Tile sizes of the Triton scans: (chunk, block_e) for the Mamba scan and the complex scan alone,
    forward + backward, at (batch, length, channels) with state 16."""
    from statetrack.ops.triton_scans import mamba_scan_triton, selective_scan_triton

    rows = []
    N = D_STATE
    for B, T, E in shapes:
        g = torch.Generator(device=dev).manual_seed(0)
        dt = torch.rand(B, T, E, device=dev, generator=g) * 0.1
        A = -torch.arange(1, N + 1, device=dev, dtype=torch.float32).repeat(E, 1)
        u, Bm, Cm = (torch.randn(*s, device=dev, generator=g) for s in ((B, T, E), (B, T, N), (B, T, N)))
        a = torch.polar(
            torch.ones(B, T, E, N, device=dev), torch.rand(B, T, E, N, device=dev, generator=g) * 6
        )
        for chunk, block_e in configs:

            def fb_mamba():
                ins = [t.detach().requires_grad_() for t in (dt, A, u, Bm, Cm)]
                y, h = mamba_scan_triton(*ins, neg=True, chunk=chunk, block_e=block_e)
                (y.sum() + h.sum()).backward()

            def fb_complex():
                ins = [t.detach().requires_grad_() for t in (a, u, Bm)]
                selective_scan_triton(*ins, chunk=chunk, block_e=block_e).real.sum().backward()

            shape = {"B": B, "T": T, "E": E, "chunk": chunk, "block_e": block_e}
            _timed(rows, dict(shape, scan="mamba f+b"), fb_mamba, dev, reps)
            if T * B <= 32 * 1024:
                _timed(rows, dict(shape, scan="complex f+b"), fb_complex, dev, reps)
    return rows


def machine():
    from statetrack.training.device import cpu_model

    m = {
        "nproc": os.cpu_count(),
        "cpu": cpu_model(),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "python": platform.python_version(),
        "loadavg": os.getloadavg(),
    }
    if torch.cuda.is_available():
        m["gpu"] = torch.cuda.get_device_name()
        m["triton"] = triton_version()
    return m


def triton_version():
    if not dispatch.installed("triton"):
        return None
    import triton

    return triton.__version__


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument(
        "--only", nargs="*", default=["train64", "train1024", "deltaops", "stream", "scans", "copy"]
    )
    ap.add_argument("--batch1024", type=int, default=32)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads (default 1: on a shared 2-core machine, 2 OpenMP threads stall on each other)",
    )
    ap.add_argument(
        "--copy-threads",
        type=int,
        default=os.cpu_count(),
        help="torch threads for the copy section, the floor and the forms alike (default: every "
        "core, as a single `statetrack evaluate` runs)",
    )
    ap.add_argument("--quick", action="store_true", help="smaller shapes (smoke run)")
    ap.add_argument("--json", default=None, help="write the results here")
    ap.add_argument(
        "--mixers",
        nargs="*",
        default=None,
        help="only these mixers (and the peers 'mambapy', 'deltanet-fla', 'deltaproduct-fla')",
    )
    args = ap.parse_args()
    global SELECTED
    SELECTED = args.mixers
    dev = torch.device(args.device)
    torch.set_num_threads(args.threads)
    res = {"machine": machine(), "device": str(dev)}
    print(res["machine"], flush=True)
    q = args.quick
    if "train64" in args.only:
        res["train64"] = section_train(dev, 16 if q else 256, 64, args.reps)
    if "train1024" in args.only:
        res["batch1024"] = 2 if q else args.batch1024
        res["train1024"] = section_train(dev, 2 if q else args.batch1024, 1024, 1)
    if "stream" in args.only:
        res["stream"] = section_stream(dev, 4 if q else 64, 1000 if q else 10_000, 250, 1)
    if "deltaops" in args.only:
        shapes = ((16, 64), (2, 1024)) if q else ((256, 64), (args.batch1024, 1024))
        res["deltaops"] = section_delta_ops(dev, args.reps, shapes)
    if "scans" in args.only:
        res["scans"] = section_scans(dev, [64, 1024] if q else [64, 1024, 10_000], args.reps)
    gpu = {
        "gpu-mamba": section_gpu_mamba,
        "gpu-delta": section_gpu_delta,
        "gpu-complex": section_gpu_complex,
        "tiles": section_tiles,
    }
    for name, fn in gpu.items():
        if name in args.only:
            if dev.type != "cuda":
                print(f"  section {name}: CUDA only (--device cuda), skipped", flush=True)
                continue
            res[name] = fn(dev, args.reps)
    if "reflections" in args.only and dev.type == "cuda":
        res["reflections"] = section_reflections(dev)
    if "copy" in args.only:
        torch.set_num_threads(args.copy_threads)
        res["copy"] = section_copy(dev, args.reps)
        torch.set_num_threads(args.threads)
    res["machine"]["loadavg_end"] = os.getloadavg()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
