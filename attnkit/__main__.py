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
    study = sub.add_parser("study", help="run a study and save its results JSON")
    study.add_argument("what", choices=["ablation"])
    args = parser.parse_args(argv)

    if args.command == "train" and args.what == "adder":
        from .adder import train_pretrained
        train_pretrained()
    elif args.command == "train" and args.what == "sortedness":
        from .sortedness import run_experiment
        run_experiment()
    elif args.command == "study" and args.what == "ablation":
        from .ablation import run_studies
        run_studies()


if __name__ == "__main__":
    main()
