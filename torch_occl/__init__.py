"""occl: a collective-communication backend for torch.distributed on CPUs.

`import torch_occl` registers the backend; then `dist.init_process_group("occl")`.
"""

import torch  # noqa: F401  first: the extension links to the libraries it loads

from ._C import dump_flight_recorder
from ._registration import BACKEND_NAME, create_backend, register
from ._shared import shared_empty

register()

__all__ = ["BACKEND_NAME", "create_backend", "dump_flight_recorder", "register", "shared_empty"]
