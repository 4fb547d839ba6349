"""pytest-benchmark reports the device samples that kernelboard items hand it.

Each test runs an inner pytest session (pytester) whose conftest builds benchmark items the
way the kernelboard plugin does: pytest.Function items that request `benchmark`, carry
bench_bridge.mark(), and call bench_bridge.report_samples() with known fake samples.
"""

import json
import os
from pathlib import Path

import pytest

from pytest_kernelboard.plugin import bench_bridge

pytest_plugins = ["pytester"]

FAKE_ENV = {
    "device": "H100",
    "device_kind": "cuda",
    "gpu_name": "NVIDIA H100 80GB HBM3",
    "gpu_count": 1,
    "driver": "550.54.15",
    "cuda": "12.4",
    "torch": "2.5.0",
    "python": "3.11.9",
    "clocks": {"sm_mhz": 1980, "mem_mhz": 2619, "throttle_reasons": []},
}

CONFTEST = f"""
import json
import os
from pathlib import Path

import pytest

from pytest_kernelboard.plugin import bench_bridge

FAKE_ENV = {FAKE_ENV!r}


def pytest_configure(config):
    assert bench_bridge.install(config, lambda: FAKE_ENV)


class CasesFile(pytest.File):
    # {{case name: [samples in us]}}; one benchmark item per case.
    def collect(self):
        for name, samples in json.loads(self.path.read_text()).items():
            def run(benchmark, _name=name, _samples=samples):
                bench_bridge.report_samples(benchmark, _samples, extra_info={{"case": _name}})

            item = pytest.Function.from_parent(self, name=name, callobj=run)
            if not name.startswith("unmarked"):
                item.add_marker(bench_bridge.mark(group="fake"))
            yield item


def pytest_collect_file(file_path, parent):
    if file_path.suffix == ".cases":
        return CasesFile.from_parent(parent, path=file_path)
"""

# The kernelboard plugin itself stays out of the inner sessions: this test brings its own items.
BASE_ARGS = ("-p", "no:kernelboard", "-p", "no:cacheprovider", "--benchmark-quiet")


@pytest.fixture
def inner(pytester, monkeypatch):
    # Under `pytest -n`, this test runs in an xdist worker whose PYTEST_XDIST_WORKER the inner
    # session would inherit, and pytest-benchmark turns itself off in xdist workers.
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    pytester.makeconftest(CONFTEST)
    return pytester


def write_cases(pytester, cases):
    pytester.makefile(".cases", bench=json.dumps(cases))


def run(pytester, *args):
    return pytester.runpytest(*BASE_ARGS, *args)


def run_subprocess(pytester, monkeypatch, *args):
    # pytest-benchmark fails a regressed comparison by raising out of the terminal summary, which
    # an in-process run would propagate into this test; a real process turns it into an exit code.
    root = str(Path(bench_bridge.__file__).resolve().parents[2])
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))
    )
    return pytester.runpytest_subprocess(*BASE_ARGS, *args)


def test_json_stats_are_the_device_samples(inner):
    write_cases(inner, {"case_a": [10.0, 11.0, 12.0], "case_b": [5.0, 7.0, 6.0, 6.0]})
    result = run(inner, "--benchmark-json=out.json")
    result.assert_outcomes(passed=2)
    report = json.loads((inner.path / "out.json").read_text())
    benches = {b["name"]: b for b in report["benchmarks"]}
    assert set(benches) == {"case_a", "case_b"}

    a = benches["case_a"]["stats"]
    assert a["rounds"] == 3 and a["iterations"] == 1
    assert a["data"] == pytest.approx([10e-6, 11e-6, 12e-6], rel=1e-12)
    assert a["min"] == pytest.approx(10e-6, rel=1e-12)
    assert a["max"] == pytest.approx(12e-6, rel=1e-12)
    assert a["mean"] == pytest.approx(11e-6, rel=1e-12)
    assert a["median"] == pytest.approx(11e-6, rel=1e-12)
    assert a["stddev"] == pytest.approx(1e-6, rel=1e-9)

    b = benches["case_b"]["stats"]
    assert b["rounds"] == 4
    assert b["data"] == pytest.approx([5e-6, 7e-6, 6e-6, 6e-6], rel=1e-12)
    assert (b["min"], b["max"], b["mean"]) == pytest.approx((5e-6, 7e-6, 6e-6), rel=1e-12)

    extra = benches["case_a"]["extra_info"]
    assert extra == {"clock": "cuda_event", "case": "case_a"}
    assert benches["case_a"]["group"] == "fake"
    assert benches["case_a"]["options"]["timer"] == "replay_timer"


def test_machine_info_describes_the_gpu(inner):
    write_cases(inner, {"case_a": [10.0, 11.0, 12.0]})
    run(inner, "--benchmark-json=out.json").assert_outcomes(passed=1)
    info = json.loads((inner.path / "out.json").read_text())["machine_info"]
    assert info["gpu"]["gpu_name"] == "NVIDIA H100 80GB HBM3"
    assert info["gpu"]["device"] == "H100"
    assert info["gpu"]["driver"] == "550.54.15"
    assert info["gpu"]["cuda"] == "12.4"
    assert info["gpu_clocks"]["sm_mhz"] == 1980
    assert "python_version" in info  # pytest-benchmark's own fields stay


@pytest.mark.parametrize(("factor", "regressed"), [(1.0, False), (1.2, True), (1.03, False)])
def test_compare_fail_between_runs(inner, monkeypatch, factor, regressed):
    base = [10.0, 11.0, 12.0, 11.0]
    storage = f"--benchmark-storage=file://{inner.path / 'bench-store'}"
    write_cases(inner, {"case_a": base})
    run(inner, storage, "--benchmark-autosave").assert_outcomes(passed=1)
    saved = list((inner.path / "bench-store").rglob("0001_*.json"))
    assert len(saved) == 1

    write_cases(inner, {"case_a": [x * factor for x in base]})
    result = run_subprocess(
        inner, monkeypatch, storage, "--benchmark-compare=0001", "--benchmark-compare-fail=mean:5%"
    )
    if regressed:
        # pytest-benchmark fails the session (not the item) by raising from its terminal summary.
        assert result.ret != 0
        result.stdout.fnmatch_lines(["bench.cases .*"])
        result.stderr.fnmatch_lines(
            ["*Performance has regressed*", "*case_a*'mean' has failed*20.0*"]
        )
    else:
        result.assert_outcomes(passed=1)
        assert result.ret == 0


def test_item_without_the_mark_refuses_to_store_host_times(inner):
    write_cases(inner, {"unmarked_case": [10.0, 11.0, 12.0]})
    result = run(inner, "--benchmark-json=out.json")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*BridgeError*bench_bridge.mark()*"])


def test_ordinary_benchmarks_keep_the_wall_clock(inner):
    write_cases(inner, {"case_a": [1000.0, 1000.0]})
    inner.makepyfile(
        test_plain="""
        import time

        def test_plain(benchmark):
            benchmark.pedantic(time.sleep, args=(0.002,), rounds=2, iterations=1)
        """
    )
    run(inner, "--benchmark-json=out.json").assert_outcomes(passed=2)
    benches = {
        b["name"]: b for b in json.loads((inner.path / "out.json").read_text())["benchmarks"]
    }
    assert benches["test_plain"]["stats"]["min"] >= 0.002
    assert benches["case_a"]["stats"]["min"] == pytest.approx(1e-3)


def test_disabled_benchmarks_record_nothing(inner):
    write_cases(inner, {"case_a": [10.0]})
    result = run(inner, "--benchmark-disable", "--benchmark-json=out.json")
    result.assert_outcomes(passed=1, warnings=0)
    assert not (inner.path / "out.json").exists()


def test_report_samples_validates_before_touching_the_fixture():
    class Fixture:
        extra_info: dict = {}

        def pedantic(self, *args, **kwargs):
            raise AssertionError("must not be called")

    with pytest.raises(ValueError):
        bench_bridge.report_samples(Fixture(), [])
    with pytest.raises(ValueError):
        bench_bridge.report_samples(Fixture(), [1.0, float("nan")])


def test_replay_timer_is_the_wall_clock_outside_a_replay():
    a = bench_bridge.replay_timer()
    b = bench_bridge.replay_timer()
    assert 0 <= b - a < 1.0


def test_machine_info_fields():
    fields = bench_bridge.machine_info_fields(FAKE_ENV)
    assert fields["gpu"]["gpu_name"] == FAKE_ENV["gpu_name"]
    assert "clocks" not in fields["gpu"]
    assert bench_bridge.machine_info_fields({"device": "CPU", "clocks": None}) == {
        "gpu": {"device": "CPU"}
    }
