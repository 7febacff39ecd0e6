"""Runs and their records: the SQLite store and the claims on its runs, one run from config to stored
result (``runner``), grids of runs (``jobs``), where they execute (``executors``), sweeps, probe
traces, the JSON records, and the signals that end a run cleanly."""
