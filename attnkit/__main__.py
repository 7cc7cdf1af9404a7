"""Command line: regenerate every committed checkpoint and result file in data/.

    python -m attnkit train adder          # data/adder.pt + data/adder.json
    python -m attnkit train sortedness     # data/sortedness-*.pt + data/sortedness_results.json
    python -m attnkit study ablation       # data/ablation_results.json

--out writes elsewhere (checked before any work starts). Ctrl-C stops a command within a second
or two, says what was kept and exits with status 130; it never replaces a file with an
unfinished result (an interrupted adder goes to adder.interrupted.pt beside --out).
"""
import argparse
import sys

INTERRUPTED = 130  # the shell's status for a process stopped by SIGINT


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m attnkit", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    train = sub.add_parser("train", help="train a committed model from its seed")
    train.add_argument("what", choices=["adder", "sortedness"])
    train.add_argument("--out", help="adder: the checkpoint file (.pt; its report goes beside it as .json); "
                                     "sortedness: the folder for the checkpoints and results")
    study = sub.add_parser("study", help="run a study and save its results JSON")
    study.add_argument("what", choices=["ablation"])
    study.add_argument("--out", help="the results file (.json) instead of data/ablation_results.json")
    args = parser.parse_args(argv)
    # One CPU thread: float sums split across threads round differently, and the committed
    # files in data/ must come out bit for bit the same on every run of these commands.
    import torch
    torch.set_num_threads(1)
    from .core.allocator import keep_freed_memory
    keep_freed_memory()  # evaluation was half page faults: see core/allocator.py
    from .core.checkpoint import DATA_DIR
    from .core.outputs import check_output_dir, check_output_file

    command = f"{args.command} {args.what}"
    try:  # every output checked before any work starts
        if command == "train adder":
            from .adder import CHECKPOINT
            from .adder.train import check_out_path
            out = check_out_path(CHECKPOINT if args.out is None else args.out)
        elif command == "train sortedness":
            out = check_output_dir(DATA_DIR if args.out is None else args.out, "--out folder")
        else:
            from .experiments.ablation_studies import ABLATION_RESULTS_PATH
            out = check_output_file(ABLATION_RESULTS_PATH if args.out is None else args.out, ".json", "--out")
    except (ValueError, TypeError) as e:
        parser.error(str(e))

    try:
        if command == "train adder":
            _train_adder(out)
        elif command == "train sortedness":
            from .experiments.sortedness_runs import run_experiment
            run_experiment(data_dir=out)
        else:
            from .experiments.ablation_studies import run_studies
            run_studies(path=out)
    except KeyboardInterrupt:
        kept = "its checkpoints and results" if command == "train sortedness" else "it"
        print(f"\ninterrupted: nothing new was written to {out}; {kept} stayed as they were",
              file=sys.stderr)
        sys.exit(INTERRUPTED)


def _train_adder(out) -> None:
    from .adder import train_pretrained
    from .adder.train import interrupted_path
    adder = train_pretrained(out)
    if adder.metrics.get("interrupted"):
        print(f"\ninterrupted at step {adder.metrics['steps']}: {out} stayed as it was; the best model so "
              f"far ({adder.metrics['exact_match']:.2%} exact match on the held-out set) is in "
              f"{interrupted_path(out)}", file=sys.stderr)
        sys.exit(INTERRUPTED)


if __name__ == "__main__":
    main()
