"""torch's autoload hook for occl: the entry point `occl` in the group `torch.backends`.

At the end of `import torch`, torch calls `autoload()` of every installed package that declares
such an entry point (unless TORCH_DEVICE_BACKEND_AUTOLOAD=0), and turns any exception raised
there into a failed `import torch`. This module therefore lives outside the torch_occl package,
whose import loads the extension: whatever goes wrong there becomes one warning, never an error.
"""

from __future__ import annotations

import sys
import warnings

_warned = False


def autoload() -> None:
    """Imports torch_occl, which registers the "occl" backend with torch.distributed."""
    global _warned
    try:
        import torch_occl  # noqa: F401
    except Exception as error:  # noqa: BLE001 - any failure here would break `import torch`
        if _warned:
            return
        _warned = True
        import torch

        message = (
            f"torch_occl: the 'occl' backend is not registered, importing torch_occl failed: "
            f"{type(error).__name__}: {error}. Rebuild or reinstall torch_occl against the torch "
            f"installed here ({torch.__version__}): `pip install --no-build-isolation "
            f"--force-reinstall --no-deps <torch_occl checkout>` (or `bash scripts/build.sh` in "
            f"the checkout). TORCH_DEVICE_BACKEND_AUTOLOAD=0 skips loading it.")
        try:
            warnings.warn(message, RuntimeWarning, stacklevel=2)
        except Exception:  # noqa: BLE001 - warnings turned into errors (-W error) would fail too
            print(f"RuntimeWarning: {message}", file=sys.stderr)
