"""Issue 23: remove each guard in turn and run the tests that cover it; every one must fail
(CAUGHT). A KeyboardInterrupt that escapes a test stops pytest (status 2): that counts as caught.
Usage: .venv/bin/python benchmarks/guard_mutations.py [guard name ...]"""

import os
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
M = [
    (
        "journal name rule",
        "attnkit/core/journal.py",
        'if len(rel.parts) > 2 or not all(_NAME.match(part) for part in rel.parts) or rel.suffix not in (".pt", ".json"):',  # noqa: E501
        "if False:",
        "tests/test_guards_files.py -k 'absolute or out_of_its_folder or may_name_only'",
    ),
    (
        "journal kind rule",
        "attnkit/core/journal.py",
        'if kind not in ("missing", "checkpoint" if final.suffix == ".pt" else "report"):',
        "if False:",
        "tests/test_guards_files.py -k 'another_programs_json or another_programs_pt'",
    ),
    (
        "journal own checkpoint",
        "attnkit/core/journal.py",
        "if names[-1] != primary.name:",
        "if False:",
        "tests/test_guards_files.py -k must_end_with",
    ),
    (
        "journal format",
        "attnkit/core/journal.py",
        "    if not (\n        isinstance(token, str)\n        and _TOKEN.match(token)",
        "    if False and (\n        isinstance(token, str)\n        and _TOKEN.match(token)",
        "tests/test_guards_files.py -k malformed_journal",
    ),
    (
        "journal regular file",
        "attnkit/core/journal.py",
        "if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_JOURNAL_BYTES:",
        "if False:",
        "tests/test_guards_files.py -k symlink_or_a_fifo",
    ),
    (
        "tmp regular",
        "attnkit/core/journal.py",
        "if os.path.lexists(tmp) and not stat.S_ISREG(os.lstat(tmp).st_mode):",
        "if False:",
        "tests/test_guards_files.py -k temporary_that_is_a_symlink",
    ),
    (
        "orphans ours only",
        "attnkit/core/journal.py",
        "if _TOKEN.match(token) and stat.S_ISREG(os.lstat(orphan).st_mode):",
        "if True:",
        "tests/test_guards_files.py -k only_its_own_orphaned",
    ),
    (
        "folder lock",
        "attnkit/core/journal.py",
        "        fcntl.flock(fd, fcntl.LOCK_EX)\n",
        "",
        "tests/test_guards_files.py -k take_turns",
    ),
    (
        "umask",
        "attnkit/core/journal.py",
        'os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)',
        'os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o600)',
        "tests/test_guards_files.py -k umask",
    ),
    (
        "write_together dir check",
        "attnkit/core/journal.py",
        "if os.path.lexists(path) and not (path.is_symlink() or stat.S_ISREG(os.lstat(path).st_mode)):",
        "if False:",
        "tests/test_guards_files.py -k folder_in_the_way",
    ),
    (
        "sibling kind",
        "attnkit/adder/train.py",
        '        check_replaceable(sibling, kind, f"{sibling.name} beside the checkpoint:")\n',
        "",
        "tests/test_guards_files.py -k beside_its_output",
    ),
    (
        "free space",
        "attnkit/core/outputs.py",
        "    if free < needed:",
        "    if False:",
        "tests/test_guards_files.py -k free_space",
    ),
    (
        "ablation --out kind",
        "attnkit/__main__.py",
        '".json", "--out", kind="report"',
        '".json", "--out"',
        "tests/test_guards_files.py -k study_ablation",
    ),
    (
        "experiment outputs",
        "attnkit/experiments/sortedness_runs.py",
        "    data_dir = check_outputs(data_dir, encodings, seeds, variants)",
        "    data_dir = check_output_dir(data_dir)",
        "tests/test_guards_files.py -k before_training",
    ),
    (
        "checksum verify",
        "attnkit/core/checkpoint.py",
        "    verify_checksum(payload, path)\n    return payload",
        "    return payload",
        "tests/test_guards_files.py -k 'exponent or edited_config or edited_metrics or weight_added or missing_or_malformed'",  # noqa: E501
    ),
    (
        "special files",
        "attnkit/core/checkpoint.py",
        "    if not stat.S_ISREG(mode):",
        "    if False:",
        "tests/test_guards_files.py -k 'device_as'",
    ),
    (
        "adder metric type",
        "attnkit/adder/pretrained.py",
        "    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:",
        "    if False:",
        "tests/test_guards_files.py -k whatever_type",
    ),
    (
        "adder flag named",
        "attnkit/adder/pretrained.py",
        "            if self_check(model.eval()) >= stored - SELF_CHECK_SLACK:",
        "            if False:",
        "tests/test_robustness.py -k flipped_config_flag",
    ),
    (
        "classifier behaviour",
        "attnkit/sortedness/pretrained.py",
        "        check_behaviour(model.eval(), path)\n",
        "",
        "tests/test_guards_files.py -k 'disagrees or edited_metrics'",
    ),
    (
        "classifier metric type",
        "attnkit/sortedness/pretrained.py",
        "        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:",
        "        if False:",
        "tests/test_guards_files.py -k classifier_with_edited_metrics",
    ),
    (
        "hook return type",
        "attnkit/core/hooks.py",
        "    if not isinstance(out, Tensor):",
        "    if False:",
        "tests/test_guards_hooks.py -k 'shape_and_dtype'",
    ),
    (
        "hook return shape",
        "attnkit/core/hooks.py",
        "    if out.shape != x.shape or out.dtype != x.dtype or out.device != x.device:",
        "    if False:",
        "tests/test_guards_hooks.py -k 'shape_and_dtype'",
    ),
    (
        "hook nan",
        "attnkit/core/hooks.py",
        "        if bool(new_bad.any()):",
        "        if False:",
        "tests/test_guards_hooks.py -k fills_nan",
    ),
    (
        "hook nan only new",
        "attnkit/core/hooks.py",
        "new_bad = ~torch.isfinite(out) & torch.isfinite(x)",
        "new_bad = ~torch.isfinite(out)",
        "tests/test_guards_hooks.py -k already_there",
    ),
    (
        "hook thread wait",
        "attnkit/core/hooks.py",
        "        with lock:\n            return self._run(tuple(self.fns), x)",
        "        return self._run(fns, x)",
        "tests/test_guards_hooks.py -k another_thread",
    ),
    (
        "mean z hash",
        "attnkit/adder/evaluate.py",
        "    fingerprint = digest.hexdigest()",
        "    fingerprint = tuple((p.data_ptr(), p._version) for p in model.parameters())",
        "tests/test_guards_hooks.py -k mean_z",
    ),
    (
        "patch source",
        "attnkit/interp/patching.py",
        '    if source not in ("clean", "corrupted"):',
        "    if False:",
        "tests/test_guards_hooks.py -k 'every_patch_argument and clen'",
    ),
    (
        "patch index",
        "attnkit/interp/patching.py",
        "    if not 0 <= value < size:",
        "    if False:",
        "tests/test_guards_hooks.py -k 'every_patch_argument or output_and_names'",
    ),
    (
        "patch index type",
        "attnkit/interp/patching.py",
        "    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):",
        "    if False:",
        "tests/test_guards_hooks.py -k 'every_patch_argument'",
    ),
    (
        "patch empty positions",
        "attnkit/interp/patching.py",
        "        if not listed:",
        "        if False:",
        "tests/test_guards_hooks.py -k 'every_patch_argument'",
    ),
    (
        "patch hook_name type",
        "attnkit/interp/patching.py",
        "    if not isinstance(hook_name, str):",
        "    if False:",
        "tests/test_guards_hooks.py -k 'hook_name_must'",
    ),
    (
        "patch tokens",
        "attnkit/interp/patching.py",
        '    clean, corrupted = validate([clean, corrupted], model.length_cap, "the classifier\'s length cap")',
        "    pass",
        "tests/test_guards_hooks.py -k checks_its_tokens",
    ),
    (
        "patch identical",
        "attnkit/interp/patching.py",
        "    if all(torch.equal(a, b) for a, b in zip(s.clean, s.corrupted)):",
        "    if False:",
        "tests/test_guards_hooks.py -k identical_inputs",
    ),
    (
        "patch gap",
        "attnkit/interp/patching.py",
        "    if float((m_clean - m_corrupted).sum()) == 0:",
        "    if False:",
        "tests/test_guards_hooks.py -k cannot_tell_apart",
    ),
    (
        "patch modules",
        "attnkit/interp/patching.py",
        "    if unknown or not modules:",
        "    if False:",
        "tests/test_guards_hooks.py -k patch_heads_checks",
    ),
    (
        "patch min_gap",
        "attnkit/interp/patching.py",
        "    if isinstance(min_gap, bool) or not isinstance(min_gap, (int, float)) or not min_gap >= 0:",
        "    if False:",
        "tests/test_guards_hooks.py -k patch_heads_checks",
    ),
    (
        "residual dims",
        "attnkit/interp/patching.py",
        "        if value.dim() != 3:",
        "        if False:",
        "tests/test_guards_hooks.py -k output_and_names",
    ),
    (
        "strongest nan",
        "attnkit/interp/patching.py",
        "            for p in range(e.shape[1])\n            if np.isfinite(e[h, p])\n",
        "            for p in range(e.shape[1])\n",
        "tests/test_guards_hooks.py -k strongest",
    ),
    (
        "patch memory",
        "attnkit/interp/patching.py",
        "    return max(1, MEMORY_BUDGET // (PATTERN_COPIES * heads * 4 * n_pos**2) - 1)",
        "    return 1 << 30",
        "tests/test_guards_hooks.py -k memory_budget",
    ),
    (
        "length cap",
        "attnkit/sortedness/model.py",
        "        if n_pos > self.length_cap:",
        "        if False:",
        "tests/test_guards_hooks.py -k 'length_cap or too_long'",
    ),
    (
        "final eval interrupt",
        "attnkit/adder/train.py",
        "        except KeyboardInterrupt:  # a finished (or interrupted) model is kept",
        "        except ZeroDivisionError:  # a finished (or interrupted) model is kept",
        "tests/test_guards_runs.py -k final_evaluation",
    ),
    (
        "rescue",
        "attnkit/adder/train.py",
        "    except OSError as e:\n        rescue = rescue_path(path)",
        "    except ZeroDivisionError as e:\n        rescue = rescue_path(path)",
        "tests/test_guards_runs.py -k 'failed_final_save or no_save_works'",
    ),
    (
        "cli OSError",
        "attnkit/__main__.py",
        "    except OSError as e:  # e.g. the disk filled up",
        "    except ZeroDivisionError as e:  # e.g. the disk filled up",
        "tests/test_guards_runs.py -k cli_reports",
    ),
    (
        "signals",
        "attnkit/__main__.py",
        "            signal.signal(getattr(signal, name), _as_ctrl_c)",
        "            pass",
        "tests/test_guards_runs.py -k 'sigterm_and_sighup'",
    ),
    (
        "worker watchdog",
        "attnkit/experiments/sortedness_runs.py",
        '    threading.Thread(target=watch, daemon=True, name="attnkit-parent-watch").start()',
        "    pass",
        "tests/test_guards_runs.py -k parent_is_killed",
    ),
    (
        "edition signals held",
        "attnkit/course/editions.py",
        "        with signals_held():\n            for tmp, target in renames:",
        "        if True:\n            for tmp, target in renames:",
        "tests/test_guards_runs.py -k held_until",
    ),
    (
        "edition temporaries first",
        "attnkit/course/editions.py",
        '            with open(tmp, "x", encoding="utf-8") as f:  # "x": created new, mode 0o666 less the umask\n                f.write(text)',  # noqa: E501
        '            with open(tmp, "x", encoding="utf-8") as f:  # "x": created new, mode 0o666 less the umask\n                f.write(text)\n            os.replace(tmp, target)',  # noqa: E501
        "tests/test_guards_runs.py -k temporaries_are_written",
    ),
    (
        "student ctrl-c",
        "attnkit/__main__.py",
        "    except KeyboardInterrupt as e:\n        _edition_interrupted(e, args.dir)\n    kind = ",
        "    except ZeroDivisionError as e:\n        _edition_interrupted(e, args.dir)\n    kind = ",
        "tests/test_guards_runs.py -k student_command",
    ),
    (
        "ascii messages",
        "attnkit/__main__.py",
        'print(message.encode(encoding, "replace").decode(encoding), file=sys.stderr, flush=True)',
        "print(message, file=sys.stderr, flush=True)",
        "tests/test_guards_runs.py -k ascii",
    ),
]


def main(only: list[str]) -> None:
    """Each guard is removed in the working tree itself and put back after its tests (also on
    Ctrl-C, SIGTERM or SIGHUP): run it on a clean checkout, never while something else uses it."""

    def stop(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGHUP, stop)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    for name, path, old, new, tests in M:
        if only and name not in only:
            continue
        f = ROOT / path
        text = f.read_text()
        if text.count(old) != 1:
            print(f"?? {name}: guard text found {text.count(old)} times")
            continue
        f.write_text(text.replace(old, new))
        try:
            r = subprocess.run(
                f"{ROOT}/.venv/bin/python -m pytest -q -p no:cacheprovider {tests}",
                shell=True,
                cwd=ROOT,
                env=env,
                capture_output=True,
                text=True,
                timeout=600,
            )
        finally:
            f.write_text(text)
        last = r.stdout.strip().splitlines()[-1] if r.stdout.strip() else r.stderr[-200:]
        print(
            ("CAUGHT " if r.returncode in (1, 2) and "passed" not in last.split(",")[0] else "MISSED ")
            + f"(rc {r.returncode}) "
            + f"{name}: {last}",
            flush=True,
        )


if __name__ == "__main__":  # importing this file (tests/test_benchmark_mutations.py does) runs nothing
    main(sys.argv[1:])
