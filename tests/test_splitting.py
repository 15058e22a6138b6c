"""Splitting (spec capability supportsSplitting): torch's split_group forms occl subgroups on the
parent's links (transport/subgroup.hpp) rather than through the store; new_group on a
split-capable parent, for members and the ranks left out; a 2-D device mesh with DTensor over
both of its dimensions; and what a CPU-only occl can split.

Four ranks on occldev (two ranks per device index), as torch's MultiProcessTestCase spawns them;
every result is checked against values computed here.
"""

from __future__ import annotations

import datetime
import os

import pytest
import torch
import torch.distributed as dist
from torch.testing._internal.common_distributed import MultiProcessTestCase

TIMEOUT = datetime.timedelta(seconds=60)
WORLD = 4


def contribution(rank: int, n: int = 6) -> torch.Tensor:
    return torch.arange(n, dtype=torch.float32) + 10 * rank + 1


class SplittingTest(MultiProcessTestCase):
    @property
    def world_size(self) -> int:
        return WORLD

    def setUp(self):
        super().setUp()
        self._spawn_processes()

    def _init(self, on_device: bool = True) -> torch.device:
        """Joins the default group; on occldev:<rank % 2> (bound, so torch may split) or CPU."""
        import torch_occl  # noqa: F401

        store = dist.FileStore(self.file_name, self.world_size)
        if not on_device:
            dist.init_process_group("occl", store=store, rank=self.rank,
                                    world_size=self.world_size, timeout=TIMEOUT)
            return torch.device("cpu")
        os.environ["OCCL_DEVICE_COUNT"] = "2"
        import occl_device  # noqa: F401  the rank's accelerator from here on

        device = torch.device("occldev", self.rank % 2)
        dist.init_process_group("occl", device_id=device, store=store, rank=self.rank,
                                world_size=self.world_size, timeout=TIMEOUT)
        return device

    def _check_allreduce(self, group, members: list[int], device: torch.device) -> None:
        tensor = contribution(self.rank).to(device)
        dist.all_reduce(tensor, group=group)
        torch.testing.assert_close(tensor.cpu(), sum(contribution(r) for r in members))

    def test_split_group_forms_subgroups_without_the_store(self):
        device = self._init()
        world = dist.group.WORLD
        assert world._get_backend(device).supports_splitting
        store = dist.distributed_c10d._get_default_store()
        dist.barrier()
        keys_before = store.num_keys()
        dist.barrier()  # every rank has counted before any splits
        halves = [[0, 1], [2, 3]]
        sub = dist.split_group(split_ranks=halves)
        members = halves[self.rank // 2]
        assert dist.get_process_group_ranks(sub) == members
        assert sub.rank() == self.rank % 2 and sub.size() == 2
        occl = sub._get_backend(device)
        assert type(occl).__name__ == "ProcessGroupOCCL" and occl.supports_splitting
        assert sub.bound_device_id == device
        # The subgroup formed on the parent's links: nothing of it went through the store.
        assert store.num_keys() == keys_before
        self._check_allreduce(sub, members, device)
        self._check_allreduce(sub, members, torch.device("cpu"))
        gathered = torch.empty(12, device=device)
        dist.all_gather_into_tensor(gathered, contribution(self.rank).to(device), group=sub)
        torch.testing.assert_close(gathered.cpu(), torch.cat([contribution(r) for r in members]))
        # Point-to-point within the subgroup, on its own links.
        peer = members[1 - sub.rank()]
        if sub.rank() == 0:
            dist.send(contribution(self.rank).to(device), group_dst=1, group=sub)
        else:
            received = torch.empty(6, device=device)
            dist.recv(received, group_src=0, group=sub)
            torch.testing.assert_close(received.cpu(), contribution(peer))
        # The parent goes on working beside its subgroups, and splits again.
        self._check_allreduce(world, list(range(WORLD)), device)
        odd = dist.split_group(split_ranks=[[1, 3]])
        if self.rank % 2:
            self._check_allreduce(odd, [1, 3], device)
        else:
            assert odd is None  # left out of every subgroup
        nested = dist.split_group(sub, split_ranks=[[0], [1]])
        assert dist.get_process_group_ranks(nested) == [self.rank]
        self._check_allreduce(nested, [self.rank], device)
        dist.destroy_process_group()

    def test_a_rank_that_does_not_split_is_named_at_the_timeout(self):
        self._init(on_device=False)
        if self.rank != 3:
            with pytest.raises(RuntimeError, match=r"occl: cannot split group 0 \(rank \d of 4\) "
                               r"into group without-3 .*: timed out waiting for rank\(s\) 3 of the "
                               r"group to split too \(every rank of the group must call split_group"):
                dist.group.WORLD.split_group([0, 1, 2, 3], timeout=datetime.timedelta(seconds=3),
                                             group_name="without-3")
        tensor = torch.ones(2)
        dist.all_reduce(tensor)  # the group goes on
        torch.testing.assert_close(tensor, torch.full((2,), 4.0))
        dist.destroy_process_group()

    def test_new_group_on_a_split_capable_parent(self):
        # torch calls perform_nocolor_split on the ranks left out (an NCCL requirement) and the
        # factory on the members; without the binding, ranks 0 and 3 raise AttributeError.
        device = self._init()
        assert dist.group.WORLD._get_backend(device).supports_splitting
        members = [1, 2]
        group = dist.new_group(members)
        if self.rank in members:
            self._check_allreduce(group, members, device)
        else:
            assert group == dist.GroupMember.NON_GROUP_MEMBER
        self._check_allreduce(dist.group.WORLD, list(range(WORLD)), device)
        dist.destroy_process_group()

    def test_two_dimensional_device_mesh_redistributes_over_both_dimensions(self):
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor import Replicate, Shard, distribute_tensor

        device = self._init()
        store = dist.distributed_c10d._get_default_store()
        dist.barrier()
        keys_before = store.num_keys()
        dist.barrier()
        mesh = init_device_mesh("occldev", (2, 2), mesh_dim_names=("dp", "tp"))
        # torch split the default group for each dimension (new_group would use the store).
        assert store.num_keys() == keys_before
        rows, cols = mesh["dp"].get_group(), mesh["tp"].get_group()
        for group in (rows, cols):
            assert type(group._get_backend(device)).__name__ == "ProcessGroupOCCL"
        assert dist.get_process_group_ranks(rows) == [self.rank % 2, self.rank % 2 + 2]
        assert dist.get_process_group_ranks(cols) == [self.rank // 2 * 2, self.rank // 2 * 2 + 1]
        full = torch.arange(8 * 6, dtype=torch.float32).reshape(8, 6)  # the same on every rank
        sharded = distribute_tensor(full, mesh, [Shard(0), Shard(1)])
        coordinate = mesh.get_coordinate()
        expected_local = full.chunk(2, 0)[coordinate[0]].chunk(2, 1)[coordinate[1]]
        torch.testing.assert_close(sharded.to_local().cpu(), expected_local)
        # Each dimension in turn: gather along tp, then along dp; then shard the other way.
        along_tp = sharded.redistribute(mesh, [Shard(0), Replicate()])
        torch.testing.assert_close(along_tp.to_local().cpu(), full.chunk(2, 0)[coordinate[0]])
        replicated = along_tp.redistribute(mesh, [Replicate(), Replicate()])
        torch.testing.assert_close(replicated.to_local().cpu(), full)
        swapped = replicated.redistribute(mesh, [Shard(1), Shard(0)])
        torch.testing.assert_close(swapped.to_local().cpu(),
                                   full.chunk(2, 1)[coordinate[0]].chunk(2, 0)[coordinate[1]])
        # A partial sum over both dimensions, reduced to a replica: every rank's share counts.
        ones = torch.ones(4, 4, device=mesh.device_type)
        from torch.distributed.tensor import DTensor
        from torch.distributed.tensor.placement_types import Partial

        partial = DTensor.from_local(ones * (self.rank + 1), mesh, [Partial(), Partial()])
        total = partial.redistribute(mesh, [Replicate(), Replicate()]).to_local()
        torch.testing.assert_close(total.cpu(), torch.full((4, 4), float(sum(range(1, WORLD + 1)))))
        dist.destroy_process_group()

    def test_cpu_only_occl_splits_through_the_process_group(self):
        # torch's dist.split_group needs a bound accelerator; ProcessGroup.split_group reaches
        # the CPU backend without one.
        self._init(on_device=False)
        with pytest.raises(RuntimeError, match="No device associated with the default pg"):
            dist.split_group(split_ranks=[[0, 1], [2, 3]])
        members = [[0, 2], [1, 3]][self.rank % 2]
        sub = dist.group.WORLD.split_group(members, timeout=TIMEOUT,
                                           group_name=f"cpu-split-{self.rank % 2}")
        assert sub.rank() == members.index(self.rank) and sub.size() == 2
        tensor = contribution(self.rank)
        sub.allreduce([tensor]).wait()
        torch.testing.assert_close(tensor, sum(contribution(r) for r in members))
        with pytest.raises(RuntimeError, match=r"occl\.split: ranks must be ranks of the group, "
                                               r"in \[0, 4\), got 7"):
            dist.group.WORLD.split_group([0, 7], timeout=TIMEOUT, group_name="outside")
        tensor = torch.ones(2)
        dist.all_reduce(tensor)  # refused before anything was exchanged: the group still works
        torch.testing.assert_close(tensor, torch.full((2,), 4.0))
        dist.destroy_process_group()
