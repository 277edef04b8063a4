"""Medians of the out-of-place time per size from perf binaries' JSON files (test/perf, -J), as
test/device-run.sh's sweeps read them."""
import glob
import json
import os
import statistics


def medians(d, pattern):
    """{size: median out-of-place time} over the files in d that match pattern (unreadable
    files skipped)."""
    cells = {}
    for path in sorted(glob.glob(os.path.join(d, pattern))):
        try:
            with open(path) as f:
                doc = json.load(f)
        except (OSError, ValueError):
            continue
        for row in doc.get("results", []):
            cells.setdefault(row["size"], []).append(row["out_of_place"]["time"])
    return {s: statistics.median(v) for s, v in cells.items()}
