"""The verified horizons of a study's runs beside the families' horizon and the test draws' 90% length:
writes a markdown table of every complete run of the databases given that measured horizons.

    python docs/results/verified-horizons.py runs/quick.db [more.db ...] > docs/results/verified-horizons.md
    python docs/results/verified-horizons.py --flagged --no-header big.db  # only the runs marked !

Reads the databases only (their run summaries); nothing is trained or written but stdout.
"""

from __future__ import annotations

import argparse

from statetrack.runs.store import RunStatus, Store


def _n(v) -> str:
    return "none" if v is None else f"{v:,}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("db", nargs="+")
    ap.add_argument("--flagged", action="store_true", help="only the runs whose draw holds beyond the horizon")
    ap.add_argument("--no-header", action="store_true", help="rows only (to append to a table)")
    a = ap.parse_args()
    if not a.no_header:
        print(
            "| database | run | study | model | task | test draw >= 90% to (test / long) | families' horizon "
            "| verified horizon | shortest wrong string (state, nearest) | what it rests on |"
        )
        print("|---|---|---|---|---|---|---|---|---|---|")
    for db in a.db:
        store = Store(db, create=False, readonly=True)
        for r in store.runs(status=RunStatus.COMPLETE):
            s = r["summary"] or {}
            h = s.get("horizons") or {}
            if "verified" not in h:
                continue
            w = h.get("shortest_wrong") or {}
            text = w.get("text", "")
            text = text if len(text) <= 30 else text[:27] + "..."
            where = f"`{text}` ({w['state']}, {w.get('confused_with') or '-'})" if w else "-"
            flag = " !" if h["horizon"] is not None and (s.get("longest_90") or 0) >= h["horizon"] else ""
            if a.flagged and not flag:
                continue
            print(
                f"| {db.rsplit('/', 1)[-1]} | {r['id']} | {r['study'] or '-'} | {r['label'] or r['model']} "
                f"| {r['task']} | {_n(s.get('longest_90'))} / {_n(s.get('longest_90_long'))} "
                f"| {_n(h.get('family_horizon'))} | {_n(h['horizon'])}{flag} | {where} | {h['rests_on']} |"
            )


if __name__ == "__main__":
    main()
