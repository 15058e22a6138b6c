"""How a run reads: its head, one line per row as it finishes, notes where a peer skips an op or
gets it wrong, and the plot."""

from __future__ import annotations

from .cases import SIZELESS_OPS, bus_factor

# Short column names; the head says which peer each stands for.
CALL_LABELS = {"sync": "blocking calls", "async": "async_op=True then wait()",
               "functional": "functional op then wait_tensor"}
LABELS = {"occl": "occl", "gloo": "gloo", "deepspeed": "ds", "deepspeed_op": "ds_op",
          "occl_mpi": "mpi", "fake": "fake"}
RATIO_PEERS = ("gloo", "deepspeed", "deepspeed_op", "occl_mpi")  # speed-up of occl over each


def _columns(peers: list[str], rate_of: list[str]) -> list[tuple[str, int]]:
    columns = [("op", 24), ("size(B)", 10), ("count", 10), ("type", 8), ("redop", 7)]
    columns += [(f"{LABELS[name]}(us)", 10) for name in peers]
    columns += [("busbw", 7), ("#wrong", 6)]
    if "fake" in peers:
        columns.append(("own(us)", 8))
    columns += [(f"{LABELS[name]}/occl", max(9, len(LABELS[name]) + 6)) for name in RATIO_PEERS
                if name in peers]
    columns += [("floor(us)", 10), ("bound", 7)]
    columns += [(f"{dtype}-rate", max(len(dtype) + 5, 9)) for dtype in rate_of]
    return columns


def head_lines(head: dict) -> list[str]:
    tensors = ", occl's tensors from shared_empty" if head["shared_tensors"] else ""
    if head.get("fresh_inputs"):
        tensors += ", a new input tensor every call"
    hosts = f" on {head['hosts']} hosts (OCCL_HOST_ID)" if head.get("hosts", 1) > 1 else ""
    lines = [f"# world size {head['world_size']}{hosts} ({head['launcher']}), {head['dtype']}, occl "
             f"transport {head['transport']}{tensors}, single-core memcpy "
             f"{head['memcpy_gbps']:.2f} GB/s, CPUs per rank {head['cpus_per_rank']}, median of "
             f"{head['rounds']} alternating rounds, {CALL_LABELS[head['call']]}"]
    lines.append("# peers: " + ", ".join(f"{LABELS[name]} = {name}" for name in head["peers"]))
    for name, why in head["skipped"].items():
        lines.append(f"# skipped {name}: {why}")
    if "fake" in head["peers"]:
        lines.append("# fake: torch's no-op backend, what torch costs per call; own(us) = occl - fake")
    if head.get("rate_of"):
        lines.append(f"# <type>-rate: occl's {head['dtype']} time over its time in that type for "
                     "the same bytes, in rounds alternating with the peers'")
    lines.append(" ".join(f"{title:>{width}}"
                          for title, width in _columns(head["peers"], head.get("rate_of", []))))
    return lines


def _cell(value, width: int, form: str = ".1f", suffix: str = "") -> str:
    if value is None:
        return f"{'-':>{width}}"
    return f"{format(value, form) + suffix:>{width}}"


def row_line(row: dict, peers: list[str], rate_of: list[str]) -> str:
    us = row["us"]
    cells = [row["op"], row["bytes"], row["count"], row["dtype"], row["redop"]]
    cells += [_cell(us.get(name), 10) for name in peers]
    cells += [_cell(row["occl_busbw"], 7, ".2f"), _cell(row["wrong"].get("occl"), 6, "d")]
    if "fake" in peers:
        own = us["occl"] - us["fake"] if "fake" in us else None
        cells.append(_cell(own, 8))
    cells += [_cell(us[name] / us["occl"] if name in us and us["occl"] else None, 9, ".2f", "x")
              for name in RATIO_PEERS if name in peers]
    cells += [_cell(row["floor_us"], 10), _cell(row["bound"], 7, ".2f", "x")]
    cells += [_cell(row["rates"].get(dtype), 9, ".2f") for dtype in rate_of]
    widths = [width for _, width in _columns(peers, rate_of)]
    return " ".join(f"{cell:>{width}}" for cell, width in zip(cells, widths))


def notes(row: dict, noted: set) -> list[str]:
    """What a row's cells leave out: why a peer skipped it (each reason once) and who got it
    wrong."""
    lines = []
    for name, why in row["refused"].items():
        if (name, why) not in noted:
            noted.add((name, why))
            lines.append(f"# {name} skips {why}")
    for name, wrong in row["wrong"].items():
        if wrong:
            lines.append(f"# {name} got {wrong} elements wrong: {row['op']} {row['redop']} "
                         f"of {row['bytes']} B {row['dtype']} (summed over the ranks)")
    return lines


def check_plotting() -> None:
    """Raises ImportError before a run whose plot could not be drawn."""
    import matplotlib  # noqa: F401


def plot(report: dict, path: str) -> None:
    figure(report).savefig(path)


def figure(report: dict):
    """Per op, time per call and bus bandwidth against size, both on log axes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ops = list(dict.fromkeys(r["op"] for r in report["rows"] if r["op"] not in SIZELESS_OPS))
    fig, axes = plt.subplots(len(ops), 2, figsize=(11, 3.2 * len(ops)), squeeze=False)
    for (latency, bandwidth), op in zip(axes, ops):
        rows = [r for r in report["rows"] if r["op"] == op]
        factor = bus_factor(op, report["world_size"])
        for name in report["peers"]:
            timed = [(r["bytes"], r["us"][name]) for r in rows if name in r["us"]]
            if not timed:
                continue
            latency.plot(*zip(*timed), marker="o", label=name)
            if name != "fake":  # moves nothing: no bandwidth
                bandwidth.plot([size for size, _ in timed],
                               [size / t / 1e3 * factor for size, t in timed], marker="o",
                               label=name)
        floors = [(r["bytes"], r["floor_us"]) for r in rows if r["floor_us"]]
        if floors:
            latency.plot(*zip(*floors), linestyle="--", color="grey", label="copy floor")
        latency.set(title=f"{op}: time per call", xlabel="bytes", ylabel="µs", yscale="log")
        bandwidth.set(title=f"{op}: bus bandwidth", xlabel="bytes", ylabel="GB/s", yscale="log")
        for axis in (latency, bandwidth):
            axis.set_xscale("log", base=2)
            axis.legend(fontsize="small")
    fig.tight_layout()
    return fig
