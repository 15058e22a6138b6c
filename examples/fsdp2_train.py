"""Train a small model with FSDP2 (`fully_shard`) over occl on CPUs.

    torchrun --nproc-per-node 2 examples/fsdp2_train.py [--backend occl] [--steps 30] [--out result.json]

Every layer's parameters are sharded across the ranks: the forward and backward passes gather
them with occl's all_gather_into_tensor, and the gradients are averaged and re-sharded with its
reduce_scatter_tensor. Rank 0 prints the loss as it goes; `--out` writes the full final
parameters and rank 0's losses as JSON (tests/test_examples.py compares them with gloo's).
"""

from __future__ import annotations

import argparse
import json

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

import torch_occl  # noqa: F401  registers "occl" (installed, `import torch` already did)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backend", default="occl")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--out", help="write the final parameters and rank 0's losses (JSON)")
    args = parser.parse_args()

    dist.init_process_group(args.backend)  # torchrun's environment: env://
    rank, world_size = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(1)
    mesh = init_device_mesh("cpu", (world_size,))

    torch.manual_seed(0)  # fully_shard shards the parameters each rank starts with: the same
    model = torch.nn.Sequential(
        torch.nn.Linear(32, 128), torch.nn.ReLU(), torch.nn.Linear(128, 128), torch.nn.ReLU(),
        torch.nn.Linear(128, 8))
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)

    data = torch.Generator().manual_seed(1000 + rank)  # this rank's shard
    truth = torch.randn(32, 8, generator=torch.Generator().manual_seed(7))
    losses = []
    for step in range(args.steps):
        inputs = torch.randn(64, 32, generator=data)
        targets = torch.tanh(inputs @ truth / 4)
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(inputs), targets)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if rank == 0 and (step % 10 == 0 or step == args.steps - 1):
            print(f"step {step:3d}  loss {loss.item():.5f}", flush=True)

    # Every rank takes part in gathering the full parameters; rank 0 writes them.
    params = {name: t.full_tensor().detach().reshape(-1).tolist()
              for name, t in model.state_dict().items()}
    if rank == 0:
        print(f"{world_size} ranks, backend {dist.get_backend()}: final loss {losses[-1]:.5f}")
        if args.out:
            with open(args.out, "w") as out:
                json.dump({"losses": losses, "params": params}, out)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
