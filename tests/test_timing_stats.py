import json
import math
import statistics

import pytest

from pytest_kernelboard.results import records
from pytest_kernelboard.stats.stats import (
    Summary,
    geometric_mean,
    student_t_critical,
    summarize,
)

# Two-sided critical values of Student's t from standard tables.
T_TABLE_95 = {
    1: 12.7062047362,
    2: 4.30265272975,
    3: 3.18244630528,
    4: 2.77644510520,
    5: 2.57058183661,
    9: 2.26215716280,
    10: 2.22813885196,
    29: 2.04522964213,
    30: 2.04227245630,
    100: 1.98397151852,
    200: 1.97189622363,
    1000: 1.96233908082,
}


@pytest.mark.parametrize(("df", "expected"), sorted(T_TABLE_95.items()))
def test_t_critical_95_matches_tables(df, expected):
    assert student_t_critical(df) == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize(("df", "expected"), [(1, 63.656741), (5, 4.032143), (60, 2.660283)])
def test_t_critical_99_matches_tables(df, expected):
    assert student_t_critical(df, 0.99) == pytest.approx(expected, rel=1e-6)


def test_t_critical_tends_to_normal_and_is_monotone():
    z = statistics.NormalDist().inv_cdf(0.975)
    assert student_t_critical(math.inf) == pytest.approx(z)
    assert student_t_critical(10**7) == pytest.approx(z, rel=1e-6)
    values = [student_t_critical(df) for df in (1, 2, 5, 50, 199, 200, 201, 500, 10**4)]
    assert all(a > b for a, b in zip(values, values[1:], strict=False))


def test_t_critical_fractional_df_is_conservative():
    assert student_t_critical(4.7) == student_t_critical(4)
    with pytest.raises(ValueError):
        student_t_critical(0.5)
    with pytest.raises(ValueError):
        student_t_critical(5, 1.0)


def test_summarize_three_samples_by_hand():
    s = summarize([10.0, 11.0, 12.0])
    assert (s.n, s.mean_us, s.median_us, s.min_us, s.max_us) == (3, 11.0, 11.0, 10.0, 12.0)
    assert s.std_us == pytest.approx(1.0)
    half = 4.30265272975 * 1.0 / math.sqrt(3)
    assert s.ci95_us == pytest.approx((11.0 - half, 11.0 + half))
    assert s.rse == pytest.approx(1.0 / math.sqrt(3) / 11.0)
    assert s.sem_us == pytest.approx(1.0 / math.sqrt(3))


def test_summarize_matches_statistics_module():
    samples = [5.1, 4.9, 5.3, 5.0, 7.2, 5.05, 4.95, 5.2]
    s = summarize(samples)
    assert s.mean_us == pytest.approx(statistics.fmean(samples))
    assert s.median_us == pytest.approx(statistics.median(samples))
    assert s.std_us == pytest.approx(statistics.stdev(samples))


def test_summarize_single_sample_is_degenerate_not_nan():
    s = summarize([7.5])
    assert (s.n, s.std_us, s.ci95_us, s.rse) == (1, 0.0, (7.5, 7.5), 0.0)


def test_summarize_ci_is_clamped_at_zero():
    s = summarize([0.1, 10.0])
    assert s.ci95_us[0] == 0.0
    assert s.ci95_us[1] > 10.0


@pytest.mark.parametrize("bad", [[], [1.0, math.nan], [1.0, math.inf], [-1.0, 2.0]])
def test_summarize_rejects_bad_samples(bad):
    with pytest.raises(ValueError):
        summarize(bad)


def test_summary_is_frozen():
    s = summarize([1.0, 2.0])
    with pytest.raises(AttributeError):
        s.n = 5  # type: ignore[misc]
    assert isinstance(s, Summary)


def test_to_dict_fits_the_records_timing_schema():
    jsonschema = pytest.importorskip("jsonschema")
    d = summarize([10.0, 11.0, 12.0]).to_dict(clock="cuda_event")
    assert set(d) == {
        "clock",
        "n",
        "mean_us",
        "median_us",
        "std_us",
        "min_us",
        "max_us",
        "ci95_us",
        "rse",
        "statistic",
        "rank_us",
        "rank_ci95_us",
    }
    assert isinstance(d["ci95_us"], list) and len(d["ci95_us"]) == 2
    jsonschema.validate(json.loads(json.dumps(d)), records.TIMING_SCHEMA)
    assert "clock" not in summarize([1.0]).to_dict()


def test_geometric_mean():
    assert geometric_mean([1.0, 4.0]) == pytest.approx(2.0)
    assert geometric_mean([2.0, 8.0, 4.0]) == pytest.approx(4.0)
    for bad in ([], [1.0, 0.0], [-1.0], [math.inf]):
        with pytest.raises(ValueError):
            geometric_mean(bad)


def test_timing_package_does_not_import_torch():
    import subprocess
    import sys

    code = (
        "import sys, pytest_kernelboard.stats as t\n"
        "assert 'torch' not in sys.modules\n"
        "assert t.tensor_bytes([1, 'x']) == 0\n"
        "assert 'torch' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=str(_repo_root()))


def _repo_root():
    from pathlib import Path

    import pytest_kernelboard

    return Path(pytest_kernelboard.__file__).resolve().parent.parent
