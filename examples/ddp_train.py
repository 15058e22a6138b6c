"""Train a small regression model with DistributedDataParallel over occl.

    torchrun --nproc-per-node 2 examples/ddp_train.py [--backend occl] [--steps 50] [--out result.json]
    mpirun -n 2 -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=29500 python examples/ddp_train.py --backend occl_mpi
    torchrun --nproc-per-node 2 examples/ddp_train.py --device occldev    # on the demo accelerator

`--device occldev` trains on occl_device's accelerator, each rank on its own device
(occldev:<local rank>); without `--backend`, torch picks the backend from the device (occl).

Each rank trains on its own shard of a synthetic data set; DDP averages the gradients with
occl's allreduce (and broadcasts the initial parameters). Rank 0 prints the loss as it goes;
`--out` writes rank 0's final parameters and losses as JSON (tests/test_examples.py compares them
with the same run on gloo).
"""

from __future__ import annotations

import argparse
import json
import os

import torch
import torch.distributed as dist

import torch_occl  # noqa: F401  registers "occl" (installed, `import torch` already did)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backend", help="default: occl, or the device's backend with --device")
    parser.add_argument("--device", help="an accelerator's type (occldev), or the CPU if none")
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--out", help="write rank 0's final parameters and losses (JSON)")
    args = parser.parse_args()

    if args.backend == "occl_mpi":
        import occl_mpi  # noqa: F401  registers "occl_mpi"; torch's ranks become mpirun's
    device = torch.device("cpu")
    if args.device:
        import occl_device  # noqa: F401  the demo accelerator: occldev (opt-in, by import)

        device = torch.device(args.device, int(os.environ.get("LOCAL_RANK", "0")))
        # With a device_id and no backend, torch takes the device's backend (occl for occldev).
        dist.init_process_group(args.backend, device_id=device)
    else:
        dist.init_process_group(args.backend or "occl")  # torchrun's (or mpirun's) env://
    rank, world_size = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(1)

    torch.manual_seed(rank)  # different initial weights per rank: DDP broadcasts rank 0's
    model = torch.nn.Sequential(
        torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64), torch.nn.ReLU(),
        torch.nn.Linear(64, 1)).to(device)
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.02, momentum=0.9)

    data = torch.Generator().manual_seed(1000 + rank)  # this rank's shard
    truth = torch.randn(32, 1, generator=torch.Generator().manual_seed(7))
    losses = []
    for step in range(args.steps):
        inputs = torch.randn(128, 32, generator=data)
        targets = torch.tanh(inputs @ truth)
        inputs, targets = inputs.to(device), targets.to(device)
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(ddp(inputs), targets)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if rank == 0 and (step % 10 == 0 or step == args.steps - 1):
            print(f"step {step:3d}  loss {loss.item():.5f}", flush=True)

    if rank == 0:
        where = f" on {device.type}" if args.device else ""
        print(f"{world_size} ranks{where}, backend {dist.get_backend()}: final loss {losses[-1]:.5f}")
        if args.out:
            params = {name: p.detach().cpu().reshape(-1).tolist()
                      for name, p in model.named_parameters()}
            with open(args.out, "w") as out:
                json.dump({"losses": losses, "params": params}, out)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
