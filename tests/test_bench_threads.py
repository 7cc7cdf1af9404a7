"""benchmarks/bench_threads.py runs both thread settings, quiet and under a competing load (tiny sizes)."""

import importlib.util
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_threads.py"


def test_thread_benchmark_compares_both_settings_quiet_and_loaded(capsys):
    spec = importlib.util.spec_from_file_location("bench_threads", BENCH)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    results = bench.main(["--steps", "2", "--eval-n", "100", "--load", "1", "--repeats", "1"])
    assert list(results) == ["quiet", "loaded (1 busy processes)"]
    for times in results.values():
        assert set(times) == {bench.CHOSEN, bench.DEFAULT}
        assert all(len(t["train"]) == len(t["eval"]) == 1 and min(t["train"]) > 0 for t in times.values())
    out = capsys.readouterr().out
    assert "default/chosen" in out and out.count("train") >= 2
