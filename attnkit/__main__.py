"""Command line: regenerate every committed checkpoint and result file in data/.

    python -m attnkit train adder          # data/adder.pt + data/adder.json
    python -m attnkit train sortedness     # data/sortedness-*.pt + data/sortedness_results.json
    python -m attnkit study ablation       # data/ablation_results.json
"""
import argparse


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m attnkit", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    train = sub.add_parser("train", help="train a committed model from its seed")
    train.add_argument("what", choices=["adder", "sortedness"])
    train.add_argument("--out", help="adder only: write the checkpoint here instead of data/adder.pt")
    study = sub.add_parser("study", help="run a study and save its results JSON")
    study.add_argument("what", choices=["ablation"])
    args = parser.parse_args(argv)
    # One CPU thread: float sums split across threads round differently, and the committed
    # files in data/ must come out bit for bit the same on every run of these commands.
    import torch
    torch.set_num_threads(1)
    from .core.allocator import keep_freed_memory
    keep_freed_memory()  # evaluation was half page faults: see core/allocator.py

    if args.command == "train" and args.what == "adder":
        from .adder import CHECKPOINT, train_pretrained
        train_pretrained(args.out or CHECKPOINT)
    elif args.command == "train" and args.what == "sortedness":
        from .experiments.sortedness_runs import run_experiment
        run_experiment()
    elif args.command == "study" and args.what == "ablation":
        from .experiments.ablation_studies import run_studies
        run_studies()


if __name__ == "__main__":
    main()
