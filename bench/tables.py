"""Markdown tables from a ``bench_mixers.py --json`` result file (the tables of docs/benchmarks.md).

    python bench/tables.py results.json

Training rows get their ratio to each peer of the same family measured in the same run: Mamba and
Negative Mamba against ``mambapy``; DeltaNet and DeltaProduct against our same layer running fla-core's
naive recurrent delta rule. "x faster" = peer ms / our ms.
"""
from __future__ import annotations

import json
import sys

PEERS = {"mamba": "mambapy (peer)", "negmamba": "mambapy (peer)",
         "deltanet": "deltanet + fla naive recurrence (peer)",
         "deltaproduct": "deltaproduct + fla naive recurrence (peer)"}


def train_table(rows: list[dict], title: str) -> str:
    ms = {r["mixer"]: r["ms"] for r in rows}
    out = [f"**{title}**", "", "| mixer | ms | tokens/s | peer | x faster than the peer |", "|---|---:|---:|---|---:|"]
    for r in rows:
        peer = PEERS.get(r["mixer"])
        ratio = f"{ms[peer] / r['ms']:.1f}x" if peer in ms else ""
        out.append(f"| {r['mixer']} | {r['ms']:.0f} | {r['tokens_per_s']:.3g} | {peer if peer in ms else ''} | {ratio} |")
    return "\n".join(out)


def stream_table(rows: list[dict]) -> str:
    out = ["**Forward, no gradients, batch 64, streamed in chunks of 250 with the state carried**", "",
           "| mixer | length | total s | us / step |", "|---|---:|---:|---:|"]
    out += [f"| {r['mixer']} | {r['length']:,} | {r['ms'] / 1e3:.2f} | {r['us_per_step']:.0f} |" for r in rows]
    return "\n".join(out)


def floor_table(c: dict) -> str:
    threads = f"{c['threads']} thread(s), " if "threads" in c else ""
    out = [f"**Evaluation against the bandwidth floor** ({c['shape']}; {threads}copy {c['copy_GBps']:.1f} GB/s, "
           f"floor {c['floor_s']:.3f} s)", "", "| form | s | floor s | x floor |", "|---|---:|---:|---:|"]
    out += [f"| {f['form']} | {f['s']:.3f} | {f['floor_s']:.3f} | {f['x_floor']:.2f} |" for f in c["forms"]]
    return "\n".join(out)


def scan_tables(rows: list[dict]) -> str:
    groups: dict[tuple, dict] = {}
    for r in rows:
        groups.setdefault((r["scan"], r["shape"]), {}).setdefault(r["form"], {})[r["T"]] = r["ms"]
    out = []
    for (scan, shape), forms in groups.items():
        Ts = sorted({T for f in forms.values() for T in f})
        out += [f"**{scan}, shape {shape}, float32** (ms)", "",
                "| form | " + " | ".join(f"T={T:,}" for T in Ts) + " |", "|---|" + "---:|" * len(Ts)]
        for form, by_t in forms.items():
            out.append(f"| {form} | " + " | ".join(f"{by_t[T]:.2f}" if T in by_t else "-" for T in Ts) + " |")
        out.append("")
    return "\n".join(out)


def delta_ops_table(rows: list[dict]) -> str:
    by = {}
    for r in rows:
        by.setdefault((r["op"], r["B"], r["T"]), {})[r["form"]] = r["ms"]
    out = ["**The delta rule alone, forward + backward (one head, d_k 16, d_v 64; DeltaProduct n_h = 2)**", "",
           "| recurrence | batch | length | ours ms | fla naive ms | x faster |", "|---|---:|---:|---:|---:|---:|"]
    for (op, B, T), forms in by.items():
        o, p = forms["ours (chunked, custom backward)"], forms.get("fla naive recurrence (peer)")
        peer, ratio = (f"{p:.0f}", f"{p / o:.1f}x") if p else ("-", "")
        out.append(f"| {op} | {B} | {T:,} | {o:.0f} | {peer} | {ratio} |")
    return "\n".join(out)


def render(res: dict) -> str:
    m = res["machine"]
    parts = [f"Machine: {m['cpu']}, nproc {m['nproc']}, torch {m['torch']}, {m['threads']} thread(s), "
             f"Python {m['python']}; load average {m['loadavg'][0]:.2f} at the start, "
             f"{m.get('loadavg_end', [float('nan')])[0]:.2f} at the end."]
    if "train64" in res:
        parts.append(train_table(res["train64"], "Forward + backward, batch 256, length 64, width 64, state 16"))
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
    return "\n\n".join(parts) + "\n"


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        print(render(json.load(f)))
