"""docs/VENDOR.md's path, run as it is written: its commands (the ```bash blocks of "The path"),
in a folder outside the checkout, make occl_mpi from its spec and runtime, build it on the
installed kit and the environment's MPI, and pass its generated suite in a group of one and
under mpirun at 2 and 3 ranks. A step that no longer works fails here, so the guide cannot go
stale."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from dist_harness import occl_only
from test_mpi_backend import AS_ROOT, free_port

pytestmark = occl_only("it builds a backend of its own")

REPO = Path(__file__).resolve().parents[1]
GUIDE = REPO / "docs" / "VENDOR.md"


def path_commands() -> list[str]:
    """The guide's commands, in order: every ```bash block between "## The path" and the next
    "## " heading."""
    text = GUIDE.read_text()
    section = text[text.index("\n## The path\n"):]
    section = section[:section.index("\n## ", 1)]
    return re.findall(r"^```bash\n(.*?)^```$", section, re.MULTILINE | re.DOTALL)


def test_the_guide_s_path_makes_a_backend_that_passes_its_suite(tmp_path):
    blocks = path_commands()
    assert len(blocks) == 6, blocks  # tree, generate, runtime, package, build, suite
    script = "set -euxo pipefail\n" + "\n".join(blocks)
    # Nothing from the checkout on the path: the generator and the kit come from the installed
    # torch_occl; `python -m` puts the tree's own folder first, so its occl_mpi is the one built.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(AS_ROOT, OCCL=str(REPO), MASTER_PORT=str(free_port()), OMP_NUM_THREADS="1",
               TORCH_DEVICE_BACKEND_AUTOLOAD="0", PY_COLORS="0",
               PATH=os.path.dirname(sys.executable) + os.pathsep + env["PATH"])
    result = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True,
                            text=True, timeout=1500)
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-5000:]
    tree = tmp_path / "my_backend"
    assert not tree.resolve().is_relative_to(REPO)
    # The group of one, then each rank of the 2- and 3-rank runs, reported with no failure.
    summaries = re.findall(r"^(\d+) passed(?:, (\d+) skipped)?", result.stdout, re.MULTILINE)
    assert len(summaries) == 1 + 2 + 3, result.stdout[-5000:]
    assert "failed" not in result.stdout, result.stdout[-5000:]
    loaded = subprocess.run([sys.executable, "-c", "import occl_mpi._C as c; print(c.__file__)"],
                            cwd=tree, env=env, capture_output=True, text=True, timeout=60)
    assert Path(loaded.stdout.strip()).resolve().is_relative_to(tree.resolve()), loaded
