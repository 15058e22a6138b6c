"""occl on the project's demo accelerator, occldev (device/: `import occl_device`), tested as
PyTorch's guide for out-of-tree backends tests a backend on its device (its "Testing" section),
with torch's MultiProcessTestCase: the backend is listed after import, init and destroy succeed,
collectives take device tensors and return completed Works with correct values; and what the
guide's three snippets promise: device tensors on occl, the backend resolved from `device_id`,
and `"cpu:gloo,occldev:occl"`.

Only the spawned ranks import occl_device: it makes occldev the accelerator of the process that
imports it, and this pytest process runs the CPU tests too. occl's spec declares occldev
host-addressable, so its runtime works on the device's memory in place (CPU views); occl_mpi's
declares it staged (tests/test_mpi_backend.py runs the same ops there).
"""

from __future__ import annotations

import datetime
import json
import os
import re
import subprocess
import sys

import pytest
import torch
import torch.distributed as dist
from torch.testing._internal.common_distributed import MultiProcessTestCase

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from device_ops import check_every_op  # noqa: E402
from test_examples import GLOO_ATTEMPTS, assert_trains_as, torchrun_example  # noqa: E402

TIMEOUT = datetime.timedelta(seconds=60)


class OcclOnDeviceTest(MultiProcessTestCase):
    @property
    def world_size(self) -> int:
        return 2

    def setUp(self):
        super().setUp()
        self._spawn_processes()

    def _init(self, **kwargs) -> torch.device:
        """Joins the default group as this rank, on its own device, occldev:<rank>."""
        import occl_device  # noqa: F401  the rank's accelerator from here on

        import torch_occl  # noqa: F401  registers occl (as `import torch` does when installed)

        device = torch.device("occldev", self.rank)
        store = dist.FileStore(self.file_name, self.world_size)
        dist.init_process_group(device_id=device, store=store, rank=self.rank,
                                world_size=self.world_size, timeout=TIMEOUT, **kwargs)
        return device

    def test_backend_is_listed_and_picked_from_the_device(self):
        import torch_occl  # noqa: F401

        assert "occl" in dist.Backend.backend_list
        device = self._init()  # no backend name: torch takes occl from occldev
        group = dist.group.WORLD
        assert dist.get_backend() == "occl"
        assert group.bound_device_id == device
        assert torch.accelerator.current_accelerator().type == "occldev"
        # occl declares cpu as well, so both devices' tensors go to occl's one backend.
        occl = group._get_backend(device)
        assert type(occl).__name__ == "ProcessGroupOCCL"
        assert group._get_backend(torch.device("cpu")) is occl
        occl.eager_connect_single_device(device)  # occl connected in its factory already
        cpu = torch.full((3,), float(self.rank + 1))
        dist.all_reduce(cpu)
        torch.testing.assert_close(cpu, torch.full((3,), 3.0))
        dist.destroy_process_group()
        assert not dist.is_initialized()

    def test_every_op_works_on_device_tensors(self):
        import torch_occl

        device = self._init()
        covered = check_every_op(device, torch_occl._C.OPS)
        assert sorted(covered) == sorted(set(torch_occl._C.OPS) - {"allreduce_sparse"})
        dist.destroy_process_group()

    def test_each_device_goes_to_its_own_backend(self):
        device = self._init(backend="cpu:gloo,occldev:occl")
        group = dist.group.WORLD
        occl, gloo = group._get_backend(device), group._get_backend(torch.device("cpu"))
        assert type(occl).__name__ == "ProcessGroupOCCL"
        assert type(gloo).__name__ == "ProcessGroupGloo"
        # Which backend ran each op: the one whose count of collectives grew.
        ran = lambda: (occl._get_sequence_number_for_group(),  # noqa: E731
                       gloo._get_sequence_number_for_group())
        before = ran()
        on_device = torch.full((4,), float(self.rank + 1), device=device)
        dist.all_reduce(on_device)
        after_device = ran()
        on_cpu = torch.full((4,), float(self.rank + 1))
        dist.all_reduce(on_cpu)
        after_cpu = ran()
        assert after_device == (before[0] + 1, before[1])
        assert after_cpu == (after_device[0], after_device[1] + 1)
        torch.testing.assert_close(on_device.cpu(), torch.full((4,), 3.0))
        torch.testing.assert_close(on_cpu, torch.full((4,), 3.0))
        dist.destroy_process_group()

    def test_allocate_tensor_gives_device_tensors_that_collectives_take(self):
        device = self._init()
        occl = dist.group.WORLD._get_backend(device)
        assert occl.supports_tensor_alloc(device)
        tensor = occl.allocate_tensor(5, dtype=torch.float32, device=device)
        assert (tensor.shape, tensor.device) == ((5,), device)
        tensor.fill_(self.rank + 1)
        dist.all_reduce(tensor)
        torch.testing.assert_close(tensor.cpu(), torch.full((5,), 3.0))
        dist.destroy_process_group()

    def test_mixed_and_foreign_devices_are_refused_by_name(self):
        device = self._init()
        with pytest.raises(RuntimeError, match=r"^occl\.allgather: output_tensors\[0\]\[1\] is on "
                           r"device cpu, expected occldev:\d \(the device of input_tensors\[0\]\)"):
            dist.all_gather([torch.empty(2, device=device), torch.empty(2)],
                            torch.ones(2, device=device))
        with pytest.raises(RuntimeError, match=r"^occl\._allgather_base: output_tensor is on device "
                           r"cpu, expected occldev:\d \(the device of input_tensor\)"):
            dist.all_gather_into_tensor(torch.empty(4), torch.ones(2, device=device))
        # torch.distributed handles meta tensors itself; the backend object sees them as given.
        occl = dist.group.WORLD._get_backend(device)
        with pytest.raises(RuntimeError, match=r"^occl\.allreduce: tensors\[0\] is on device meta, "
                           r"expected one of: cpu, occldev$"):
            occl.allreduce([torch.empty(2, device="meta")])
        # The group still works: refusals happen before anything is queued.
        tensor = torch.ones(2, device=device)
        dist.all_reduce(tensor)
        torch.testing.assert_close(tensor.cpu(), torch.full((2,), 2.0))
        dist.destroy_process_group()


def test_ddp_trains_on_the_device_as_on_cpu_with_gloo(tmp_path):
    """examples/ddp_train.py on occldev (the backend resolved from device_id: occl) ends with the
    parameters and losses of the same training on CPU over gloo."""
    stdout = torchrun_example("ddp_train.py", None, tmp_path / "device.json",
                              extra=("--device", "occldev"))
    assert "2 ranks on occldev, backend occl: final loss" in stdout, stdout
    torchrun_example("ddp_train.py", "gloo", tmp_path / "gloo.json", attempts=GLOO_ATTEMPTS)
    runs = {name: json.loads((tmp_path / f"{name}.json").read_text()) for name in ("device", "gloo")}
    assert_trains_as(runs["device"], runs["gloo"], "DDP on occldev")


def test_generated_suite_mixes_devices_where_the_ranks_know_occldev():
    """The generated suite's same_device bad inputs move one tensor to another device occl
    declares; with occl_device imported in its ranks (CONFORMANCE_PACKAGES) they run, and each
    call raises its exact message. Without it they skip, saying why."""
    from occl_codegen.loader import load_spec

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    suite = os.path.join(root, "generated", "tests", "test_occl_conformance.py")
    uses = sum(use.check in ("same_device", "supported_device")
               for op in load_spec(os.path.join(root, "spec", "collectives.yaml")).ops
               for use in op.checks)
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", suite,
               "-k", "same_device or supported_device"]
    env = dict(os.environ, CONFORMANCE_PACKAGES="torch_occl,occl_device")
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    counts = dict((name, int(count)) for count, name in
                  re.findall(r"(\d+) (passed|skipped|failed)", result.stdout.splitlines()[-1]))
    assert counts == {"passed": uses}, result.stdout[-3000:]
