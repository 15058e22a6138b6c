"""occl_mpi: a torch.distributed backend over MPI, generated from spec/occl_mpi.yaml on occl's
backend kit. `import occl_mpi` registers it; start the ranks with mpirun:

    mpirun -n 2 -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=29500 python train.py
    # train.py: import occl_mpi; dist.init_process_group("occl_mpi")

Under mpirun, importing it sets torch's RANK, WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE from
mpirun's (where they are not set already), so env:// rendezvous uses MPI's ranks; the backend
refuses ranks that differ from them.
"""

import os

from ._registration import BACKEND_NAME, create_backend, register

_FROM_MPIRUN = {
    "RANK": "OMPI_COMM_WORLD_RANK",
    "WORLD_SIZE": "OMPI_COMM_WORLD_SIZE",
    "LOCAL_RANK": "OMPI_COMM_WORLD_LOCAL_RANK",
    "LOCAL_WORLD_SIZE": "OMPI_COMM_WORLD_LOCAL_SIZE",
}
for _torch_name, _mpi_name in _FROM_MPIRUN.items():
    if _mpi_name in os.environ:
        os.environ.setdefault(_torch_name, os.environ[_mpi_name])

register()

__all__ = ["BACKEND_NAME", "create_backend", "register"]
