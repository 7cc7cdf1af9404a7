"""The positional-encoding experiment: every encoding × seed trained and tested, a checkpoint per
run and data/sortedness_results.json written (`python -m attnkit train sortedness`)."""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from ..core.checkpoint import DATA_DIR, checkpoint_bytes, json_bytes, write_together
from ..core.outputs import check_free_space, check_output_dir, check_replaceable
from ..core.positional import ENCODINGS, as_encoding
from ..core.runtime import default_device
from ..sortedness.data import NEGATIVES, TRAIN_LENGTHS, DataConfig, make_test_sets, make_train_set, make_val_set
from ..sortedness.model import SortednessConfig
from ..sortedness.pretrained import KIND, RESULTS_PATH, RUNS_FOLDER, SEEDS, VARIANTS, run_path
from ..sortedness.train import SortednessTrainConfig, evaluate_classifier, train_classifier, train_config


def spread(values: list[float]) -> dict:
    v = np.array(values)
    return {
        "mean": float(v.mean()),
        "std": float(v.std()),
        "min": float(v.min()),
        "max": float(v.max()),
        "seeds": [float(x) for x in v],
    }


def _train_and_evaluate(
    cfg: SortednessConfig, seed: int, train_set, val_set, test_sets, device: str, steps: int | None = None
) -> tuple[dict, dict, dict]:
    """One run of the experiment: (metrics, train config, CPU state dict). Module-level so
    that a worker process can run it; on CPU it uses one thread (see run_experiment)."""
    if device == "cpu":
        torch.set_num_threads(1)
    train_cfg = train_config(cfg, seed)
    if steps is not None:
        train_cfg = replace(train_cfg, steps=steps)
    result = train_classifier(cfg, train_cfg, train_set, device, progress=False)
    state = {k: v.cpu() for k, v in result.model.state_dict().items()}
    return (
        evaluate_classifier(result.model, val_set, test_sets),
        asdict(train_cfg),
        {"state": state, "history": result.history},
    )


# Ctrl-C and a closed terminal reach the whole process group; the parent handles them for all.
GROUP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGHUP") if hasattr(signal, name))


def _start_worker(parent: int) -> None:
    """A worker ignores the group's signals and ends itself within half a second when its parent
    is gone (killed with -9, say): no run goes on training under PID 1."""
    for sig in GROUP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, daemon=True, name="attnkit-parent-watch").start()


@contextmanager
def _sigint_ignored() -> Iterator[None]:
    """SIGINT and SIGHUP ignored in this process inside the block (where signals can be set: the
    main thread). A process started meanwhile inherits the ignoring, and Python keeps it (it
    installs its KeyboardInterrupt handler only where SIGINT has its default action)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = {sig: signal.signal(sig, signal.SIG_IGN) for sig in GROUP_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


def _stop_now(pool, data_dir: Path, grace: float = 5.0) -> None:
    """On Ctrl-C: pool.terminate() (in run_experiment) usually stops the workers in under a second,
    but it can wait forever on a pipe a terminated worker held (seen under load). So this process
    ends within `grace` seconds whatever it waits on: the workers killed, the message said, exit
    130. Nothing has been written yet, so ending hard loses nothing."""

    def hard_exit() -> None:
        for process in list(getattr(pool, "_pool", [])):
            process.kill()
        print(
            f"\ninterrupted: nothing new was written to {data_dir}; its checkpoints and results stayed as they were",
            file=sys.stderr,
            flush=True,
        )
        os._exit(130)

    timer = threading.Timer(grace, hard_exit)
    timer.daemon = True
    timer.start()


SAVE_SPACE = 64 << 20  # bytes free needed to save: 21 checkpoints of ~0.35 MB, the results, temporaries


def check_outputs(data_dir: Path, encodings: Sequence[str], seeds: Sequence[int], variants: bool) -> Path:
    """ValueError naming the first output run_experiment could not write, before any training."""
    data_dir = check_output_dir(data_dir)
    check_free_space(data_dir, SAVE_SPACE, data_dir)
    runs_folder = data_dir / RUNS_FOLDER
    if os.path.lexists(runs_folder) and (runs_folder.is_symlink() or not runs_folder.is_dir()):
        raise ValueError(f"{runs_folder} exists and is not a folder: the runs' checkpoints go there")
    check_replaceable(data_dir / RESULTS_PATH.name, "report", "results file")
    names = [(enc, seed) for enc in encodings for seed in seeds] + [(v, seeds[0]) for v in VARIANTS if variants]
    for name, seed in names:
        check_replaceable(run_path(name, seed, data_dir), "checkpoint", "checkpoint")
    return data_dir


def _run_job(job) -> tuple[int, tuple]:
    i, cfg, seed, shared = job
    return i, _train_and_evaluate(cfg, seed, *shared)


def run_experiment(
    encodings: Sequence[str] = ENCODINGS,
    seeds: Sequence[int] = SEEDS,
    variants: bool = True,
    data_dir: Path = DATA_DIR,
    device: str | None = None,
    workers: int | None = None,
    steps: int | None = None,
    data: DataConfig = DataConfig(),
    progress: bool = True,
) -> dict:
    """Train every encoding × seed (max-pool readout); save data/sortedness_results.json and every
    run's checkpoint (`run_path`: the first seed of each encoding in data/, the rest in
    data/sortedness-runs/), so that every cell of the results can be recomputed from a model.
    `variants` adds, with the first seed: the relative encoding with mean-pool and first-token
    readouts, and a randomly initialised learned table.

    Deterministic: on CPU every run uses one thread, because summation order — and so the last
    bits of every weight — depends on the thread count. One thread is also the fastest way to
    train matrices this small, so the runs go to `workers` processes (default: one per CPU core);
    each run seeds itself, so the results do not depend on the number of workers.
    `steps` and `data` shrink it for a quick trial run (the committed files use the defaults).

    Nothing is written until every run is done; then the checkpoints and the results file are
    written as one unit. Ctrl-C (SIGTERM, SIGHUP: python -m attnkit) stops the workers at once and
    writes nothing: the files in `data_dir` stay as they were. Every output is checked before any
    work: `data_dir` a writable folder with space, the results file and each checkpoint missing or
    the kit's own of that kind, the runs folder a folder."""
    data_dir = check_outputs(data_dir, encodings, seeds, variants)
    device = device or default_device()
    if workers is None:
        workers = 1 if device != "cpu" else max(1, min(os.cpu_count() or 1, 4))
    train_set, val_set, test_sets = make_train_set(data), make_val_set(data), make_test_sets(data)
    runs = [(enc, SortednessConfig(encoding=as_encoding(enc)), seed) for enc in encodings for seed in seeds]
    if variants:
        runs += [(name, cfg, seeds[0]) for name, cfg in VARIANTS.items()]
    per_run: dict = {}
    files: list = []  # (path, bytes) of the checkpoints, written with the results at the end
    start, done_after = time.perf_counter(), {}  # (name, seed) -> seconds from the start
    bar = tqdm(
        total=len(runs), desc=f"sortedness experiment ({workers} worker{'s' * (workers > 1)})", disable=not progress
    )

    def record(name: str, cfg: SortednessConfig, seed: int, outcome) -> None:
        metrics, train_cfg, trained = outcome
        per_run[name, seed], done_after[name, seed] = metrics, time.perf_counter() - start
        bar.update()
        bar.set_postfix_str(
            f"{name} seed {seed}: val hard {metrics['val']['hard']:.3f}, hard@256 {metrics['hard'][max(test_sets)]:.3f}"
        )
        files.append(
            (
                run_path(name, seed, data_dir),
                checkpoint_bytes(  # in memory (~0.3 MB) until the end
                    KIND,
                    asdict(cfg),
                    trained["state"],
                    {"seed": seed, "train": train_cfg, "history": trained["history"], **metrics},
                ),
            )
        )

    shared = (train_set, val_set, test_sets, device, steps)  # every run's arguments after (cfg, seed)
    threads = torch.get_num_threads()
    try:
        if workers == 1:
            for name, cfg, seed in runs:
                record(name, cfg, seed, _train_and_evaluate(cfg, seed, *shared))
        else:
            # "spawn": a fresh interpreter per worker, the same on Linux, macOS and Windows.
            # Workers ignore SIGINT (a terminal sends it to the whole process group): this process
            # catches it and terminates them, instead of each worker dying with a traceback and a
            # pool that waits for every queued run before it lets go.
            with _sigint_ignored():  # inherited: a worker ignores Ctrl-C from its first instruction
                pool = multiprocessing.get_context("spawn").Pool(
                    workers, initializer=_start_worker, initargs=(os.getpid(),)
                )
            try:
                jobs = [(i, cfg, seed, shared) for i, (_, cfg, seed) in enumerate(runs)]
                for i, outcome in pool.imap_unordered(_run_job, jobs):
                    record(*runs[i], outcome)
                pool.close()
            except KeyboardInterrupt:
                _stop_now(pool, data_dir)
                raise
            finally:
                pool.terminate()  # at once, also on Ctrl-C or an error in a run
                pool.join()
    finally:
        torch.set_num_threads(threads)
        bar.close()

    def collect(name: str, its_seeds: Sequence[int]) -> dict:
        runs_of = [per_run[name, s] for s in its_seeds]
        out = {"val": {neg: spread([r["val"][neg] for r in runs_of]) for neg in NEGATIVES}}
        for neg in NEGATIVES:
            out[neg] = {length: spread([r[neg][length] for r in runs_of]) for length in test_sets}
        return out

    results = {
        "setup": {
            "data": asdict(data),
            "model": asdict(SortednessConfig()),
            "train": asdict(SortednessTrainConfig()),
            "train_learned": asdict(train_config(SortednessConfig(encoding="learned"), seeds[0])),
            "seeds": list(seeds),
            "test_lengths": list(test_sets),
            "train_lengths": list(TRAIN_LENGTHS),
        },
        "encodings": {enc: collect(enc, seeds) for enc in encodings},
        "variants": {name: collect(name, [seed]) for name, _, seed in runs if name not in encodings},
    }
    (Path(data_dir) / RUNS_FOLDER).mkdir(exist_ok=True)
    write_together(files + [(Path(data_dir) / RESULTS_PATH.name, json_bytes(results))])
    if progress:
        main_runs = max(t for (name, _), t in done_after.items() if name in encodings)
        print(
            f"sortedness experiment: {len(runs)} models in {time.perf_counter() - start:.0f} s "
            f"(its {len(encodings) * len(seeds)} encoding × seed runs done after {main_runs:.0f} s)"
        )
    return results
