"""The kernels of an `ncu --metrics gpu__time_duration.sum --csv` run, in launch order.

Used by bench/cuda_decode_profile.sh and bench/cuda_prefill_profile.sh.
"""
import csv

_UNITS = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}


def kernel_times(path):
    """[(short kernel name, microseconds, grid)] for every kernel launch in the CSV at path."""
    rows = csv.DictReader(line for line in open(path) if line.startswith('"'))
    seq = []
    for r in rows:
        if r.get("Metric Name") != "gpu__time_duration.sum":
            continue
        # An anonymous namespace, "(anonymous namespace)::" or "<unnamed>::" by the tool's
        # version, would end the name at its bracket.
        full = r["Kernel Name"]
        for anon in ("(anonymous namespace)::", "<unnamed>::"):
            full = full.replace(anon, "")
        name = full.split("(")[0].replace("void ", "").split("<")[0].split("::")[-1]
        name = name or full[:60]
        v = float(r["Metric Value"].replace(",", "")) * _UNITS.get(r["Metric Unit"], 1.0)
        seq.append((name, v, r.get("Grid Size", "")))
    return seq
