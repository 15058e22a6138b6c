"""occl beside its peers, in the same processes, nccl-tests style: `python -m torch_occl.bench`.

Every rank joins a group of each peer over the same ranks: occl; gloo; DeepSpeed's shared-memory
all_reduce where DeepSpeed is installed, through its Python wrapper (`deepspeed`) and its kernel
called directly (`deepspeed_op`, the whole op occl's own share is held to); occl_mpi when mpirun
started the bench; and torch's no-op backend (`fake`), what torch itself costs per call. For each
op and size the peers' rounds alternate (`--iters` back-to-back calls each, fewer above 1 MiB but
at least 5), and each reports its median round, so all see the same machine noise. Results are
checked against values computed in Python (#wrong: occl's; a note names any peer that got a row
wrong). A peer that cannot run here, or skips an op or dtype, is named with the reason.

Layout: cases.py (what a row times and expects), peers.py (which peers, and where each really
does the op), worker.py (one rank's run), report.py (progress lines and plot), guard.py (a run
against a committed baseline), __main__.py (options and launching).
"""
