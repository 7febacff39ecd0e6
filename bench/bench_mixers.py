"""Benchmarks: every mixer side by side, the raw scans, peers, and copy bandwidth.

    PYTHONPATH=src python bench/bench_mixers.py [--quick] [--only SECTION ...] [--device cpu|cuda]

Sections: train64 (forward+backward, batch 256, length 64, width 64, state 16), train1024 (the same at
length 1,024; batch 32 by default, see --batch1024), stream (forward, no grad, batch 64, length
10,000 streamed in chunks with the state carried), deltaops (the delta rule alone, forward+backward,
at the two training shapes, against fla-core's naive recurrence), scans (raw diagonal and delta-rule scans at
lengths 64, 1,024, 10,000, with peers), copy (memory bandwidth, the 12 bytes/element/step floor for
evaluation at batch 64, 64 channels x state 16, length 10,000, and the streaming forms against it).
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

from statetrack import memory
from statetrack.layers import MIXERS, build_mixer
from statetrack.ops import delta_rule_chunked, delta_rule_recurrent, diag_scan, mamba_scan
from statetrack.ops.diag import _chunked, _loop
from statetrack.spec import parse_layers

memory.configure()  # the allocator settings statetrack's entry points use (statetrack.memory)

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

def mambapy_block(dev):
    try:
        from mambapy.mamba import MambaBlock, MambaConfig
    except ImportError:
        return None
    return MambaBlock(MambaConfig(d_model=D_MODEL, n_layers=1, d_state=D_STATE)).to(dev)


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

    def op(q, k, v, beta, S0=None, chunk=0):
        dk = q.shape[-1]  # fla scales q by dk^-1/2; ours is only L2-normalised: undo the scaling
        tq, tk, tv, tb = (t.transpose(1, 2) for t in (q * dk ** 0.5, k, v, beta))
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


def build(name, dev):
    torch.manual_seed(0)
    (layer,) = parse_layers(name)
    return build_mixer(layer, D_MODEL, D_STATE).to(dev)


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
        def fb():
            xx = x.detach().requires_grad_()
            y = m(xx)
            y = y[0] if isinstance(y, tuple) else y
            y.square().mean().backward()
        try:
            ms = timeit(fb, dev, reps=reps, budget=20)
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
        print(f"  stream B={B} T={length} {name:16s} {ms:10.1f} ms  {ms * 1e3 / length:8.1f} us/step", flush=True)
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
    for at, bt in zip(a.unbind(1), b.unbind(1)):
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
    rows = []
    pscan = mamba_pscan()
    fla = fla_naive()
    for shape_name, (B, S) in {"wide (8, T, 256)": (8, (256,)), "thin (1, T, 16)": (1, (16,))}.items():
        for T in lengths:
            a = (torch.rand((B, T) + S, device=dev) * 2 - 1)
            b = torch.randn((B, T) + S, device=dev)
            h0 = torch.zeros((B,) + S, device=dev)
            forms = {"diag_scan": lambda: diag_scan(a, b, h0), "in-place loop": lambda: _loop(a, b, h0),
                     "chunked": lambda: _chunked(a, b, h0), "list+stack loop (old)": lambda: _old_list_loop(a, b, h0)}
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
                fb["mambapy pscan (peer)"] = lambda a, b, h0: pscan(a.unsqueeze(-1), b.unsqueeze(-1))
            for fname, f in fb.items():
                def run():
                    aa, bb = a.detach().requires_grad_(), b.detach().requires_grad_()
                    f(aa, bb, h0).sum().backward()
                ms = timeit(run, dev, reps=reps, budget=10)
                rows.append({"scan": "diag fwd+bwd", "shape": shape_name, "T": T, "form": fname, "ms": ms})
                print(f"  diag f+b {shape_name} T={T} {fname:24s} {ms:9.2f} ms", flush=True)
    # delta rule: (B, T, H, dk, dv) = (8, T, 2, 16, 32)
    B, H, dk, dv = 8, 2, 16, 32
    for T in lengths:
        q = F.normalize(torch.randn(B, T, H, dk, device=dev), dim=-1)
        k = F.normalize(torch.randn(B, T, H, dk, device=dev), dim=-1)
        v = torch.randn(B, T, H, dv, device=dev)
        beta = torch.rand(B, T, H, device=dev)
        forms = {"recurrent": lambda: delta_rule_recurrent(q, k, v, beta),
                 "chunked UT (C=64)": lambda: delta_rule_chunked(q, k, v, beta, chunk=64),
                 "chunked UT (C=32)": lambda: delta_rule_chunked(q, k, v, beta, chunk=32),
                 "chunked UT (C=16)": lambda: delta_rule_chunked(q, k, v, beta, chunk=16)}
        if fla is not None:
            tq, tk, tv, tb = (t.transpose(1, 2).contiguous() for t in (q, k, v, beta))
            forms["fla naive recurrence (peer)"] = lambda: fla.delta_rule_recurrence(tq, tk, tv, tb)
            if T % 16 == 0:
                forms["fla naive chunkwise C=16 (peer)"] = lambda: fla.delta_rule_chunkwise(tq, tk, tv, tb, 16)
        for fname, f in forms.items():
            ms = timeit(f, dev, reps=reps, budget=15)
            rows.append({"scan": "delta fwd", "shape": "(8, T, 2, 16, 32)", "T": T, "form": fname, "ms": ms})
            print(f"  delta fwd T={T} {fname:30s} {ms:9.2f} ms", flush=True)
        if T <= 1024:
            for fname, f in {"recurrent": delta_rule_recurrent,
                             "chunked UT (C=64)": lambda *z: delta_rule_chunked(*z, chunk=64),
                             "chunked UT (C=16)": lambda *z: delta_rule_chunked(*z, chunk=16)}.items():
                def run():
                    ins = [t.detach().requires_grad_() for t in (q, k, v, beta)]
                    f(*ins)[0].sum().backward()
                ms = timeit(run, dev, reps=reps, budget=15)
                rows.append({"scan": "delta fwd+bwd", "shape": "(8, T, 2, 16, 32)", "T": T, "form": fname, "ms": ms})
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
    out = {"threads": threads, "copy_GBps": bw, "floor_s": floor_s,
           "shape": f"batch {B}, {E} channels x state {N}, length {T}", "chunk": chunk, "forms": []}
    print(f"  copy {bw:.1f} GB/s; floor for batch {B}, {E} x {N} state, {T} steps: {floor_s:.3f} s", flush=True)
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
    Bm, Cm = torch.randn(B, chunk, N, device=dev, generator=g), torch.randn(B, chunk, N, device=dev, generator=g)

    def mamba_op_stream():
        h = None
        for _ in range(T // chunk):
            _, h = mamba_scan(dt, A, u, Bm, Cm, h, neg=True)

    xin = torch.randn(B, chunk, D_MODEL, device=dev, generator=g)

    def mixer_stream(spec):
        return streamer(build(spec, dev).eval(), xin, T, dev)

    forms = [("diag_scan, a_t and b_t given (streaming form, out= buffer)", 1, scan_stream),
             ("mamba_scan (Negative Mamba), a_t = 2 exp(Delta_t A) - 1 formed inside", 1, mamba_op_stream),
             ("negmamba(expand=1) mixer: 64 channels, with projections and conv", 1, mixer_stream("negmamba(expand=1)")),
             ("negmamba mixer, default expand 2: 128 channels (floor x 2)", 2, mixer_stream("negmamba"))]
    with torch.no_grad():
        for name, scale, fn in forms:
            ms_f = timeit(fn, dev, reps=max(1, reps - 1), warmup=1)
            ratio = ms_f / 1e3 / (scale * floor_s)
            out["forms"].append({"form": name, "s": ms_f / 1e3, "floor_s": scale * floor_s, "x_floor": ratio})
            print(f"  stream {name:70s} {ms_f / 1e3:7.3f} s  {ratio:5.2f}x floor", flush=True)
    return out


def machine():
    from statetrack.device import cpu_model

    return {"nproc": os.cpu_count(), "cpu": cpu_model(), "torch": torch.__version__, "threads": torch.get_num_threads(),
            "python": platform.python_version(), "loadavg": os.getloadavg()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--only", nargs="*", default=["train64", "train1024", "deltaops", "stream", "scans", "copy"])
    ap.add_argument("--batch1024", type=int, default=32)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1,
                    help="torch threads (default 1: on a shared 2-core machine, 2 OpenMP threads stall on each other)")
    ap.add_argument("--copy-threads", type=int, default=os.cpu_count(),
                    help="torch threads for the copy section, the floor and the forms alike (default: every "
                         "core, as a single `statetrack evaluate` runs)")
    ap.add_argument("--quick", action="store_true", help="smaller shapes (smoke run)")
    ap.add_argument("--json", default=None, help="write the results here")
    ap.add_argument("--mixers", nargs="*", default=None,
                    help="only these mixers (and the peers 'mambapy', 'deltanet-fla', 'deltaproduct-fla')")
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
