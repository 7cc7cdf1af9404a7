"""What one learner costs a server: each course notebook run top to bottom in a fresh kernel of this
environment, one thread (OMP_NUM_THREADS=1, as `make test` and a JupyterHub kernel should run), on a
copy of the course in a temporary folder. For each kernel: peak resident memory (the kernel
process's high-water mark, VmHWM), CPU time and wall time; first a bare kernel that only imports
the kit, torch and matplotlib, the floor every notebook stands on (the ratios are against it).

    python benchmarks/bench_notebook_memory.py              # every notebook (~2-3 minutes on one core)
    python benchmarks/bench_notebook_memory.py 04 --cells   # one notebook, with each cell's growth

The goal is 450 MB peak for every notebook: exits 1 when one goes over.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
import psutil
from nbclient import NotebookClient

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from attnkit.course.editions import write_edition  # noqa: E402
from attnkit.resources import notebooks_dir  # noqa: E402

GOAL_MB = 450
MIB = 2**20
BARE = nbformat.v4.new_notebook(
    cells=[
        nbformat.v4.new_code_cell("import attnkit, torch, matplotlib.pyplot as plt\nattnkit.load_pretrained('adder');")
    ]
)


def _kernel_manager():
    """A kernel running this very Python (like nbval's --nbval-current-env), never some other
    'python3' kernel found on the machine."""
    import ipykernel.kernelspec
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import AsyncKernelManager

    class CurrentEnv(KernelSpecManager):
        def get_kernel_spec(self, kernel_name):
            return self.kernel_spec_class(
                resource_dir=ipykernel.kernelspec.RESOURCES, **ipykernel.kernelspec.get_kernel_dict()
            )

    # async: nbclient can then stop waiting on a cell that loops (a blocking client waits forever)
    return AsyncKernelManager(kernel_name="attnkit-current-env", kernel_spec_manager=CurrentEnv())


def proc_status(pid: int, field: str) -> int:
    """A size from /proc/PID/status, in bytes (Linux): VmHWM is the peak resident set, RssFile the
    part of today's that is file pages (torch's and numpy's libraries), which every kernel on a
    server shares."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/{pid}/status: this benchmark needs Linux")


def high_water(pid: int) -> int:
    return proc_status(pid, "VmHWM")


def run(nb, folder: Path, cells: bool = False) -> dict:
    """Run `nb` in a fresh one-thread kernel: peak RSS, CPU and wall seconds, threads at the end."""
    client = NotebookClient(nb, km=_kernel_manager(), timeout=900, resources={"metadata": {"path": str(folder)}})
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "MPLBACKEND": "module://matplotlib_inline.backend_inline",
    }
    start = time.perf_counter()
    with client.setup_kernel(env=env, stderr=subprocess.DEVNULL):  # the kernel's own log, not the cells'
        kernel = psutil.Process(client.km.provisioner.process.pid)
        before = kernel.memory_info().rss
        for index, cell in enumerate(nb.cells):
            if cell.cell_type != "code":
                continue
            client.execute_cell(cell, index)
            if cells:
                rss, peak = kernel.memory_info().rss, high_water(kernel.pid)
                print(
                    f"    cell {index + 1:3d}: rss {rss / MIB:6.0f} MiB ({(rss - before) / MIB:+5.0f})  "
                    f"peak {peak / MIB:6.0f} MiB   {cell.source.splitlines()[0][:60] if cell.source else ''}"
                )
                before = rss
        wall = time.perf_counter() - start
        cpu = kernel.cpu_times()
        return {
            "peak": high_water(kernel.pid),
            "shared": proc_status(kernel.pid, "RssFile"),
            "cpu": cpu.user + cpu.system + cpu.children_user + cpu.children_system,
            "wall": wall,
            "threads": kernel.num_threads(),
        }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("only", nargs="*", help="notebook numbers to run (default: all)")
    parser.add_argument("--cells", action="store_true", help="print each cell's memory growth")
    parser.add_argument("--smoke", action="store_true", help="notebook 01 only (make bench-smoke)")
    args = parser.parse_args(argv)
    if args.smoke:
        args.only = ["01"]
    with tempfile.TemporaryDirectory(prefix="attnkit-memory-") as tmp:
        folder = Path(tmp)
        paths = write_edition(notebooks_dir(), folder, "complete")[0]
        paths = [p for p in sorted(paths) if not args.only or p.name[:2] in args.only]
        floor = run(BARE, folder)
        print(
            f"{'notebook':42s} {'peak MB':>8s} {'x floor':>8s} {'shared':>7s} {'CPU s':>7s} {'wall s':>7s} "
            f"{'threads':>7s}"
        )
        print(
            f"{'(bare kernel: import attnkit, load adder)':42s} {floor['peak'] / 1e6:8.0f} {1:8.2f} "
            f"{floor['shared'] / 1e6:7.0f} {floor['cpu']:7.1f} {floor['wall']:7.1f} {floor['threads']:7d}"
        )
        over = []
        for path in paths:
            r = run(nbformat.read(path, as_version=4), folder, args.cells)
            print(
                f"{path.name[:42]:42s} {r['peak'] / 1e6:8.0f} {r['peak'] / floor['peak']:8.2f} "
                f"{r['shared'] / 1e6:7.0f} {r['cpu']:7.1f} {r['wall']:7.1f} {r['threads']:7d}",
                flush=True,
            )
            if r["peak"] > GOAL_MB * 1e6:
                over.append(path.name)
    print("shared: of the resident memory at the end, the file pages (libraries) that all kernels share")
    print(f"goal: at most {GOAL_MB} MB peak per notebook; " + (f"over: {', '.join(over)}" if over else "all within"))
    print("(measured while other processes may share the CPU: CPU seconds are the kernel's own, wall is not)")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
