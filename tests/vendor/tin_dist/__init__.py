"""tin: a c10d backend generated from spec/tin.yaml. `import tin_dist` registers it."""

from ._registration import BACKEND_NAME, create_backend, register

register()

__all__ = ["BACKEND_NAME", "create_backend", "register"]
