"""Markdown tables from a ``bench_mixers.py --json`` result file (the tables of docs/benchmarks.md).

    python bench/tables.py results.json

Training rows get their ratio to each peer of the same family measured in the same run: Mamba and
Negative Mamba against ``mambapy``; DeltaNet and DeltaProduct against our same layer running fla-core's
naive recurrent delta rule. "x faster" = peer ms / our ms.
"""

from __future__ import annotations

import json
import sys

PEERS = {
    "mamba": "mambapy (peer)",
    "negmamba": "mambapy (peer)",
    "deltanet": "deltanet + fla naive recurrence (peer)",
    "deltaproduct": "deltaproduct + fla naive recurrence (peer)",
}


def train_table(rows: list[dict], title: str) -> str:
    ms = {r["mixer"]: r["ms"] for r in rows}
    out = [
        f"**{title}**",
        "",
        "| mixer | ms | tokens/s | peer | x faster than the peer |",
        "|---|---:|---:|---|---:|",
    ]
    for r in rows:
        peer = PEERS.get(r["mixer"])
        ratio = f"{ms[peer] / r['ms']:.1f}x" if peer in ms else ""
        shown = peer if peer in ms else ""
        out.append(f"| {r['mixer']} | {r['ms']:.0f} | {r['tokens_per_s']:.3g} | {shown} | {ratio} |")
    return "\n".join(out)


def stream_table(rows: list[dict]) -> str:
    out = [
        "**Forward, no gradients, batch 64, streamed in chunks of 250 with the state carried**",
        "",
        "| mixer | length | total s | us / step |",
        "|---|---:|---:|---:|",
    ]
    out += [
        f"| {r['mixer']} | {r['length']:,} | {r['ms'] / 1e3:.2f} | {r['us_per_step']:.0f} |" for r in rows
    ]
    return "\n".join(out)


def floor_table(c: dict) -> str:
    threads = f"{c['threads']} thread(s), " if "threads" in c else ""
    out = [
        (
            f"**Evaluation against the bandwidth floor** ({c['shape']}; {threads}copy {c['copy_GBps']:.1f} GB/s, "
            f"floor {c['floor_s']:.3f} s)"
        ),
        "",
        "| form | s | floor s | x floor |",
        "|---|---:|---:|---:|",
    ]
    out += [f"| {f['form']} | {f['s']:.3f} | {f['floor_s']:.3f} | {f['x_floor']:.2f} |" for f in c["forms"]]
    return "\n".join(out)


def scan_tables(rows: list[dict]) -> str:
    groups: dict[tuple, dict] = {}
    for r in rows:
        groups.setdefault((r["scan"], r["shape"]), {}).setdefault(r["form"], {})[r["T"]] = r["ms"]
    out = []
    for (scan, shape), forms in groups.items():
        Ts = sorted({T for f in forms.values() for T in f})
        out += [
            f"**{scan}, shape {shape}, float32** (ms)",
            "",
            "| form | " + " | ".join(f"T={T:,}" for T in Ts) + " |",
            "|---|" + "---:|" * len(Ts),
        ]
        for form, by_t in forms.items():
            out.append(f"| {form} | " + " | ".join(f"{by_t[T]:.2f}" if T in by_t else "-" for T in Ts) + " |")
        out.append("")
    return "\n".join(out)


def delta_ops_table(rows: list[dict]) -> str:
    by = {}
    for r in rows:
        by.setdefault((r["op"], r["B"], r["T"]), {})[r["form"]] = r["ms"]
    out = [
        "**The delta rule alone, forward + backward (one head, d_k 16, d_v 64; DeltaProduct n_h = 2)**",
        "",
        "| recurrence | batch | length | ours ms | fla naive ms | x faster |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for (op, B, T), forms in by.items():
        o, p = forms["ours (chunked, custom backward)"], forms.get("fla naive recurrence (peer)")
        peer, ratio = (f"{p:.0f}", f"{p / o:.1f}x") if p else ("-", "")
        out.append(f"| {op} | {B} | {T:,} | {o:.0f} | {peer} | {ratio} |")
    return "\n".join(out)


def _ms(x) -> str:
    return "-" if x is None else f"{x:.2f}"


def gpu_mamba_table(rows: list[dict]) -> str:
    """Layer forward + backward per (batch, length, width): ours with the kernels against mambapy."""
    by: dict[tuple, dict] = {}
    for r in rows:
        by.setdefault((r["B"], r["T"], r["d"]), {})[(r["layer"], r["form"])] = r
    out = [
        (
            "**Mamba / Negative Mamba layer, forward + backward, float32, state 16** (ms; GPU busy = the sum of "
            "the step's kernel durations, from torch.profiler)"
        ),
        "",
        (
            "| batch x length x width | mamba | negmamba | scan op alone (mamba / neg) | PyTorch ops (mamba / neg) "
            "| mambapy | mamba_ssm | x faster than mambapy (mamba / neg) | GPU busy: ours / mambapy |"
        ),
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for (B, T, d), f in by.items():
        get = lambda layer, form: f.get((layer, form), {}).get("ms")  # noqa: E731
        both = lambda form: f"{_ms(get('mamba', form))} / {_ms(get('negmamba', form))}"  # noqa: E731
        mk, nk = get("mamba", "Triton kernels"), get("negmamba", "Triton kernels")
        op = both("mamba_scan op alone (Triton)")
        pt = both("PyTorch ops (STATETRACK_KERNELS=0)")
        mp, ms = get("mambapy (peer)", ""), get("mamba_ssm (peer)", "")
        ratio = f"{mp / mk:.1f}x / {mp / nk:.1f}x" if mp and mk and nk else ""
        busy = [
            f.get(k, {}).get("gpu_busy_ms") for k in (("mamba", "Triton kernels"), ("mambapy (peer)", ""))
        ]
        busy_s = f"{_ms(busy[0])} / {_ms(busy[1])}" if any(b is not None for b in busy) else ""
        out.append(
            f"| {B} x {T:,} x {d} | {_ms(mk)} | {_ms(nk)} | {op} | {pt} | {_ms(mp)} | {_ms(ms)} | {ratio} "
            f"| {busy_s} |"
        )
    return "\n".join(out)


def gpu_delta_table(rows: list[dict]) -> str:
    """The delta rule alone, forward + backward: ours as dispatched against fla's two kernels."""
    by: dict[tuple, dict] = {}
    for r in rows:
        by.setdefault((r["B"], r["T"], r["H"], r["K"], r["beta"]), {})[r["form"]] = r["ms"]
    out = [
        "**The delta rule alone, forward + backward (d_v = d_k)** (ms)",
        "",
        (
            "| batch x length x heads x d_k | beta | ours (kernel) | ours ms | PyTorch chunked | fla chunk (bf16) "
            "| fla fused recurrent (fp32) | ours / fla chunk |"
        ),
        "|---|---|---|---:|---:|---:|---:|---:|",
    ]
    for (B, T, H, K, beta), f in by.items():
        ours = next(((k, v) for k, v in f.items() if k.startswith("ours: delta_rule")), (None, None))
        kernel = ours[0].split("(")[-1].rstrip(")") if ours[0] else "-"
        chunk = f.get("fla chunk_delta_rule, bf16 (peer)")
        ratio = f"{ours[1] / chunk:.2f}x" if ours[1] and chunk else ""
        out.append(
            f"| {B} x {T:,} x {H} x {K} | {beta} | {kernel} | {_ms(ours[1])} | "
            f"{_ms(f.get('ours: PyTorch chunked (STATETRACK_KERNELS=0)'))} | {_ms(chunk)} | "
            f"{_ms(f.get('fla fused_recurrent_delta_rule, fp32 (peer)'))} | {ratio} |"
        )
    return "\n".join(out)


def reflections_table(rows: list[dict]) -> str:
    out = [
        (
            "**Products of reflections (beta in {0, 2}, v = 0; batch 2, 4 heads, 64 x 64 state)**: the state's "
            "norm should not move; error against the same recurrence in float64"
        ),
        "",
        "| length | form | \\|S_T\\| / \\|S_0\\| - 1 | relative error of S_T |",
        "|---:|---|---:|---:|",
    ]
    out += [f"| {r['T']:,} | {r['form']} | {r['norm_drift']:.1e} | {r['rel_err']:.1e} |" for r in rows]
    return "\n".join(out)


def tiles_table(rows: list[dict]) -> str:
    by: dict[tuple, dict] = {}
    for r in rows:
        by.setdefault((r["B"], r["T"], r["E"], r["scan"]), {})[(r["chunk"], r["block_e"])] = r["ms"]
    cfgs = sorted({c for f in by.values() for c in f})
    out = [
        "**Tile sizes of the Triton scans alone, forward + backward, state 16** (ms; chunk x block_e)",
        "",
        "| scan | batch x length x channels | " + " | ".join(f"{c} x {b}" for c, b in cfgs) + " |",
        "|---|---|" + "---:|" * len(cfgs),
    ]
    for (B, T, E, scan), f in by.items():
        out.append(f"| {scan} | {B} x {T:,} x {E} | " + " | ".join(_ms(f.get(c)) for c in cfgs) + " |")
    return "\n".join(out)


GPU_SECTIONS = {
    "gpu-mamba": gpu_mamba_table,
    "gpu-delta": gpu_delta_table,
    "reflections": reflections_table,
    "tiles": tiles_table,
}


def render(res: dict) -> str:
    if "runs" in res:  # several runs assembled in one file (docs/benchmarks_gpu.json)
        return "\n\n".join(f"### {run['label']}\n\n" + render(run) for run in res["runs"])
    m = res["machine"]
    gpu = f"GPU: {m['gpu']} (triton {m.get('triton')}); " if "gpu" in m else ""
    end = f", {m['loadavg_end'][0]:.2f} at the end" if "loadavg_end" in m else ""
    parts = [
        (
            f"{gpu}Machine: {m['cpu']}, nproc {m['nproc']}, torch {m['torch']}, {m['threads']} thread(s), "
            f"Python {m['python']}; load average {m['loadavg'][0]:.2f} at the start{end}."
        )
    ]
    if "train64" in res:
        parts.append(
            train_table(res["train64"], "Forward + backward, batch 256, length 64, width 64, state 16")
        )
    if "train1024" in res:
        B = res.get("batch1024", 32)
        parts.append(train_table(res["train1024"], f"Forward + backward, batch {B}, length 1,024"))
    if "deltaops" in res:
        parts.append(delta_ops_table(res["deltaops"]))
    if "stream" in res:
        parts.append(stream_table(res["stream"]))
    if "copy" in res:
        parts.append(floor_table(res["copy"]))
    if "scans" in res:
        parts.append(scan_tables(res["scans"]))
    parts += [table(res[name]) for name, table in GPU_SECTIONS.items() if res.get(name)]
    return "\n\n".join(parts) + "\n"


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        print(render(json.load(f)))
