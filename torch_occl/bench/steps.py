"""Training and inference steps on occl and gloo, in the same processes, alternating rounds:

    python -m torch_occl.bench.steps [--world-size 2] [--steps 10] [--rounds 5] [--fsdp2-width 2048]

- ddp: DDP on an MLP of 8 Linear(256, 256) layers in 256 KB buckets (8 allreduces of 257 KB per
  backward, overlapped with it through DDP's comm hooks), batch 32;
- tp-decode: a tensor-parallel MLP (DTensor: fc1 512 -> 2048 column-wise, fc2 row-wise) on one
  token, forward only: one 2 KiB all_reduce per step, as LLM decoding does;
- tp-train: the same MLP, forward and backward on 64 tokens: 128 KiB all_reduces.
- pp: pipeline parallelism (torch.distributed.pipelining, 1F1B), one stage of two Linear(256, 256)
  layers per rank, 8 microbatches of 8: activations and gradients of 8 KiB go from stage to stage
  by send/recv (run it with --world-size 4 for four stages).
- fsdp2: FSDP2 (fully_shard per layer) on 12 Linear(W, W) layers (W = --fsdp2-width, 2048 by
  default: 201 MB of float32 weights), AdamW, batch 16 per rank: per step an all_gather of every
  layer in the forward and again in the backward, and a reduce_scatter of its gradients. Run
  three ways: on gloo, on occl, and on occl with its own buffers ("occl-buffers":
  set_allocate_memory_from_process_group_for_comm(True), so that FSDP2 takes its all-gather and
  reduce-scatter buffers from occl's allocate_tensor, pooled shared memory).

Every model starts from the same weights and sees the same inputs on every backend; after the
run each model's weights on occl must equal gloo's (allclose), or the run fails.
"""

from __future__ import annotations

import argparse
import datetime
import statistics
import sys
import tempfile
import time
import warnings

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn

WORKLOADS = ("ddp", "tp-decode", "tp-train", "pp", "fsdp2")
# How each workload runs, measured side by side: (label, backend, FSDP2 buffers from the backend).
VARIANTS = {name: (("occl", "occl", False), ("gloo", "gloo", False)) for name in WORKLOADS}
VARIANTS["fsdp2"] = (("occl", "occl", False), ("occl-buffers", "occl", True),
                     ("gloo", "gloo", False))


class _Mlp(nn.Module):
    def __init__(self, hidden: int, ffn: int):
        super().__init__()
        self.fc1 = nn.Linear(hidden, ffn)
        self.fc2 = nn.Linear(ffn, hidden)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


class _Workload:
    """One model on one backend's group: `step()` runs one step."""

    def __init__(self, name: str, group, rank: int, fsdp2_width: int, own_buffers: bool):
        torch.manual_seed(0)
        self.name = name
        if name == "fsdp2":
            from torch.distributed.device_mesh import DeviceMesh
            from torch.distributed.fsdp import fully_shard

            mesh = DeviceMesh.from_group(group, "cpu")
            self.model = nn.Sequential(*[nn.Linear(fsdp2_width, fsdp2_width) for _ in range(12)])
            for layer in self.model:
                fully_shard(layer, mesh=mesh)
            fully_shard(self.model, mesh=mesh)
            for module in (*self.model, self.model):  # each fully_shard has its own setting
                module.set_allocate_memory_from_process_group_for_comm(own_buffers)
            torch.manual_seed(1 + rank)  # each rank its own batch
            self.inputs = torch.randn(16, fsdp2_width)
            self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=1e-4)
            return
        if name == "ddp":
            from torch.nn.parallel import DistributedDataParallel

            layers = []
            for _ in range(8):
                layers += [nn.Linear(256, 256), nn.ReLU()]
            self.model = DistributedDataParallel(nn.Sequential(*layers), process_group=group,
                                                 bucket_cap_mb=0.25)
            torch.manual_seed(1 + rank)  # each rank its own batch
            self.inputs = torch.randn(32, 256)
        elif name == "pp":
            from torch.distributed.pipelining import PipelineStage, Schedule1F1B

            stages, stage = dist.get_world_size(group), dist.get_rank(group)
            layers = [nn.Linear(256, 256) for _ in range(2 * stages)]  # every rank the same
            self.model = nn.Sequential(layers[2 * stage], nn.ReLU(), layers[2 * stage + 1])
            self.schedule = Schedule1F1B(
                PipelineStage(self.model, stage, stages, torch.device("cpu"), group=group),
                n_microbatches=8, loss_fn=lambda out, target: (out - target).square().mean())
            torch.manual_seed(1)
            self.inputs, self.target = torch.randn(64, 256), torch.randn(64, 256)
            self.stage = {0: "first", stages - 1: "last"}.get(stage, "middle")
        else:
            from torch.distributed.device_mesh import DeviceMesh
            from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
                                                           parallelize_module)

            mesh = DeviceMesh.from_group(group, "cpu")
            self.model = parallelize_module(_Mlp(512, 2048), mesh,
                                            {"fc1": ColwiseParallel(), "fc2": RowwiseParallel()})
            torch.manual_seed(1)  # tensor parallelism: every rank the same tokens
            self.inputs = torch.randn(1 if name == "tp-decode" else 64, 512)
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=1e-3)

    def step(self) -> None:
        if self.name == "pp":
            self.optimizer.zero_grad()
            if self.stage == "first":
                self.schedule.step(self.inputs)
            elif self.stage == "last":
                self.schedule.step(target=self.target)
            else:
                self.schedule.step()
            self.optimizer.step()
            return
        if self.name == "tp-decode":
            with torch.no_grad():
                self.model(self.inputs).sum().item()  # uses the output: waits for its all_reduce
            return
        self.optimizer.zero_grad()
        self.model(self.inputs).square().mean().backward()
        self.optimizer.step()

    def weights(self) -> list[torch.Tensor]:
        return [getattr(p, "full_tensor", lambda p=p: p)().detach().clone()
                for p in self.model.parameters()]


def _run(rank: int, world_size: int, init: str, args, results: dict) -> None:
    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world_size,
                            timeout=datetime.timedelta(seconds=300))
    import torch_occl

    groups = {"occl": dist.new_group(backend=torch_occl.BACKEND_NAME),
              "gloo": dist.new_group(backend="gloo")}
    rows = []
    for name in args.workloads:
        models = {label: _Workload(name, groups[backend], rank, args.fsdp2_width, own_buffers)
                  for label, backend, own_buffers in VARIANTS[name]}
        for model in models.values():  # warm up
            model.step()
        times = {backend: [] for backend in models}
        for _ in range(args.rounds):
            for backend, model in models.items():
                dist.barrier(group=groups["gloo"])
                start = time.perf_counter()
                for _ in range(args.steps):
                    model.step()
                times[backend].append((time.perf_counter() - start) / args.steps)
        reference = models["gloo"].weights()
        same = all(torch.allclose(a, b, rtol=1e-4, atol=1e-6)
                   for label, model in models.items() if label != "gloo"
                   for a, b in zip(model.weights(), reference))
        agree = torch.tensor([int(same)])  # every rank's weights (a pipeline stage's are its own)
        dist.all_reduce(agree, op=dist.ReduceOp.MIN, group=groups["gloo"])
        same = bool(agree.item())
        ms = {backend: statistics.median(t) * 1e3 for backend, t in times.items()}
        rows.append({"workload": name, "ms": ms, "rounds_ms": {b: [x * 1e3 for x in t]
                                                               for b, t in times.items()},
                     "same_weights": same})
        if rank == 0:
            print(f"{name:>10} " + "  ".join(
                f"{label} {ms[label]:8.3f} ms" + (f" (gloo/{label} {ms['gloo'] / ms[label]:.2f}x)"
                                                 if label != "gloo" else "")
                for label in models) + f"  weights {'equal' if same else 'DIFFER'}", flush=True)
    if rank == 0:
        results["rows"] = rows
    dist.destroy_process_group()


def _spawned(rank, world_size, init, args, results_file) -> None:
    results: dict = {}
    _run(rank, world_size, init, args, results)
    if rank == 0:
        import json

        with open(results_file, "w") as f:
            json.dump(results, f)


def main(argv=None) -> list[dict]:
    parse = argparse.ArgumentParser(prog="python -m torch_occl.bench.steps",
                                    description=__doc__.split("\n")[0],
                                    formatter_class=argparse.RawDescriptionHelpFormatter,
                                    epilog=__doc__.split("\n", 4)[4])
    parse.add_argument("--world-size", type=int, default=2, help="ranks (default: %(default)s)")
    parse.add_argument("--workloads", default=",".join(WORKLOADS),
                       help="comma-separated (default: %(default)s)")
    parse.add_argument("--steps", type=int, default=10,
                       help="steps per round (default: %(default)s)")
    parse.add_argument("--rounds", type=int, default=5,
                       help="rounds per backend, alternating (default: %(default)s)")
    parse.add_argument("--fsdp2-width", type=int, default=2048,
                       help="the fsdp2 workload's layer width (default: %(default)s)")
    args = parse.parse_args(argv)
    args.workloads = [w.strip() for w in args.workloads.split(",") if w.strip()]
    unknown = [w for w in args.workloads if w not in WORKLOADS]
    if unknown:
        parse.error(f"--workloads: unknown {unknown}; choose from {WORKLOADS}")
    import json
    import os

    with tempfile.TemporaryDirectory() as folder:
        results = os.path.join(folder, "results.json")
        mp.start_processes(_spawned, args=(args.world_size, f"file://{folder}/init", args,
                                           results),
                           nprocs=args.world_size, start_method="spawn")
        with open(results) as f:
            rows = json.load(f)["rows"]
    if not all(row["same_weights"] for row in rows):
        sys.exit("occl's weights differ from gloo's: "
                 + ", ".join(row["workload"] for row in rows if not row["same_weights"]))
    return rows


if __name__ == "__main__":
    main()
