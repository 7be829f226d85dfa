"""torch's thread count for a CPU judge: the rule as a pure function of injected readings
(no timing), what set the count before the judge loaded, and the readings' parsers."""

from __future__ import annotations

import pytest

from evaluator.judges.backends import torch_threads
from evaluator.judges.backends.torch_threads import (
    MAX_THREADS,
    CpuReadings,
    busy_between,
    cgroup_quota,
    choose_threads,
    parse_cpu_max,
    parse_proc_stat,
    parse_threads,
    physical_cores,
    preset_threads,
    settle_torch_threads,
)


@pytest.mark.parametrize(("readings", "expected"), [
    (CpuReadings(allowed=2, busy=0.0, cores=2), 2),   # 2 CPUs idle: both
    (CpuReadings(allowed=2, busy=1.0, cores=2), 1),   # issue 45: one busy process on 2 CPUs
    (CpuReadings(allowed=2, busy=0.97, cores=2), 1),  # ... as a sample reads it
    (CpuReadings(allowed=1, busy=0.0, cores=2), 1),   # taskset / cpuset: 1 CPU allowed
    (CpuReadings(allowed=2, quota=1.5, busy=0.0, cores=2), 1),  # cgroup quota 1.5 CPUs
    (CpuReadings(allowed=2, quota=0.5, busy=0.0, cores=2), 1),  # under one CPU: still 1
    (CpuReadings(allowed=2, busy=2.0, cores=2), 1),   # every CPU busy: never none
    (CpuReadings(allowed=4, busy=9.0, cores=4), 1),   # more busy work than CPUs
    (CpuReadings(allowed=2, busy=0.2, cores=2), 2),   # a fifth of a CPU is not busy ...
    (CpuReadings(allowed=2, busy=0.3, cores=2), 1),   # ... from a quarter it is
    (CpuReadings(allowed=16, busy=0.0, cores=8), 8),  # SMT: torch's default, a core each
    (CpuReadings(allowed=16, busy=10.0, cores=8), 6),
    (CpuReadings(allowed=64, quota=4.0, busy=60.0, cores=64), 4),  # a container on a busy host
    (CpuReadings(allowed=64, quota=4.0, busy=62.0, cores=64), 2),
    (CpuReadings(allowed=2), 2),                      # busy not measured (not Linux)
])
def test_the_automatic_choice_is_the_free_cpus_the_process_may_use(readings, expected):
    choice = choose_threads(readings)
    assert (choice.threads, choice.source) == (expected, "auto")
    assert choice.spare == max(0, readings.free - expected)


def test_one_busy_process_on_two_cpus_leaves_no_cpu_for_the_mask_fill():
    """torch takes the free CPU; the other is the busy process's, not the fill's."""
    choice = choose_threads(CpuReadings(allowed=2, busy=1.0, cores=2))
    assert choice.threads == 1 and choice.readings.free == 1 and choice.spare == 0
    setting = choose_threads(CpuReadings(allowed=2, busy=0.0, cores=2), 1)
    assert setting.spare == 1  # OMP_NUM_THREADS=1 on an idle host: one left for the fill


def test_a_setting_wins_over_the_automatic_choice_and_auto_asks_for_it():
    readings = CpuReadings(allowed=2, busy=1.0, cores=2)
    assert (choose_threads(readings, 2).threads, choose_threads(readings, 2).source) == (
        2, "models.yaml")
    assert choose_threads(readings, "auto") == choose_threads(readings)
    assert choose_threads(readings, None).source == "auto"


@pytest.mark.parametrize("requested", [None, "auto", 2])
def test_the_users_omp_num_threads_wins_over_models_yaml(requested):
    """An ``OMP_NUM_THREADS`` torch started with is kept over models.yaml's ``threads``:
    the count is torch's own (it read the variable when it started)."""
    preset = preset_threads({"OMP_NUM_THREADS": "1"}, current=1, default=2, applied=None)
    assert preset == ("OMP_NUM_THREADS", "OMP_NUM_THREADS=1")
    choice = choose_threads(CpuReadings(allowed=2, busy=0.0, cores=2), requested,
                            (1, *preset))
    assert (choice.threads, choice.source) == (1, "OMP_NUM_THREADS")
    assert choice.describe() == ("torch threads: 1 of 2 CPUs (OMP_NUM_THREADS=1 in the "
                                 "environment, which wins over models.yaml; --threads "
                                 "overrides it; 0 busy, auto would use 2)")


@pytest.mark.parametrize(("requested", "expected"), [(2, (2, "--threads")),
                                                     ("auto", (2, "--threads"))])
def test_the_runs_threads_option_wins_over_the_environment(requested, expected):
    """``--threads`` is the most specific setting: it wins over OMP_NUM_THREADS, and is
    named as the run's option, not as models.yaml's."""
    preset = (1, "OMP_NUM_THREADS", "OMP_NUM_THREADS=1")
    choice = choose_threads(CpuReadings(allowed=2, busy=0.0, cores=2), requested, preset,
                            from_run=True)
    assert (choice.threads, choice.source) == expected
    assert choice.describe() == f"torch threads: 2 of 2 CPUs (--threads {requested}; 0 busy)"


def test_mkl_num_threads_is_named_when_both_are_set_as_torch_reads_it():
    """torch reads OMP_NUM_THREADS, then MKL_NUM_THREADS over it: the header names the one
    torch took."""
    environ = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "2"}
    assert preset_threads(environ, current=2, default=2, applied=None) == (
        "MKL_NUM_THREADS", "MKL_NUM_THREADS=2")


def test_torchs_own_count_caps_the_automatic_one_where_the_backend_knows_it(fresh):
    """On a host whose topology the readings miss (no /sys: the logical CPUs stand in for
    the cores), torch's start-up count (here 4 of 8 logical CPUs: performance cores,
    or one per hyperthreaded pair) caps the automatic choice."""
    readings = CpuReadings(allowed=8, busy=0.0, cores=None)
    torch = FakeTorch(4)
    choice = settle_torch_threads(torch, readings=readings, environ={}, default=4)
    assert (choice.threads, choice.source, torch.set) == (4, "auto", [])
    # Set by the environment, torch's count says nothing of the hardware: no cap from it
    torch = FakeTorch(1)
    choice = settle_torch_threads(torch, "auto", readings=readings, default=1,
                                  environ={"OMP_NUM_THREADS": "1"}, from_run=True)
    assert (choice.threads, choice.source) == (8, "--threads")


@pytest.mark.parametrize(("environ", "current", "applied", "expected"), [
    ({"MKL_NUM_THREADS": "3"}, 3, None, ("MKL_NUM_THREADS", "MKL_NUM_THREADS=3")),
    ({"OMP_NUM_THREADS": "4,2"}, 4, None, ("OMP_NUM_THREADS", "OMP_NUM_THREADS=4,2")),
    ({"OMP_NUM_THREADS": ""}, 2, None, None),        # empty: torch ignores it too
    ({"OMP_NUM_THREADS": "many"}, 2, None, None),
    ({"OMP_NUM_THREADS": "0"}, 2, None, None),
    ({}, 2, None, None),                              # torch's default
    ({}, 3, None, ("torch.set_num_threads", None)),   # the program set another count
    ({}, 1, 1, None),                                 # the evaluator set it (a jury's 2nd judge)
    ({}, 2, 1, ("torch.set_num_threads", None)),      # ... and the program changed it since
])
def test_what_set_torchs_count_before_the_judge_loaded(environ, current, applied, expected):
    assert preset_threads(environ, current, default=2, applied=applied) == expected


class FakeTorch:
    """torch's two thread calls, recorded."""

    def __init__(self, threads: int):
        self.threads = threads
        self.set: list[int] = []

    def get_num_threads(self) -> int:
        return self.threads

    def set_num_threads(self, threads: int) -> None:
        self.threads = threads
        self.set.append(threads)


@pytest.fixture
def fresh(monkeypatch):
    """No count set by the evaluator yet in this process."""
    monkeypatch.setattr(torch_threads, "_applied", None)


def test_settle_sets_the_choice_and_a_later_judge_chooses_again(fresh):
    torch = FakeTorch(2)
    busy = CpuReadings(allowed=2, busy=1.0, cores=2)
    choice = settle_torch_threads(torch, readings=busy, environ={})
    assert (choice.threads, choice.source, torch.set) == (1, "auto", [1])
    idle = CpuReadings(allowed=2, busy=0.0, cores=2)
    again = settle_torch_threads(torch, readings=idle, environ={})  # 1 is the evaluator's
    assert (again.threads, again.source, torch.set) == (2, "auto", [1, 2])


def test_settle_keeps_a_count_the_environment_or_the_program_set(fresh):
    torch = FakeTorch(1)
    readings = CpuReadings(allowed=2, busy=0.0, cores=2)
    choice = settle_torch_threads(torch, 2, readings=readings,
                                  environ={"OMP_NUM_THREADS": "1"})
    assert (choice.threads, choice.source, torch.set) == (1, "OMP_NUM_THREADS", [])
    torch = FakeTorch(3)  # torch.set_num_threads(3) before the run; torch's default is 2
    choice = settle_torch_threads(torch, "auto", readings=readings, environ={})
    assert (choice.threads, choice.source, torch.set) == (3, "torch.set_num_threads", [])
    assert "torch.set_num_threads before the run, which wins" in choice.describe()
    # torch's own default, when the backend knows it, is what "not set" means
    torch = FakeTorch(3)
    choice = settle_torch_threads(torch, readings=readings, environ={}, default=3)
    assert (choice.threads, choice.source, torch.set) == (2, "auto", [2])
    # The run's --threads wins over the environment (and sets torch's count)
    torch = FakeTorch(1)
    choice = settle_torch_threads(torch, 2, readings=readings,
                                  environ={"OMP_NUM_THREADS": "1"}, from_run=True)
    assert (choice.threads, choice.source, torch.set) == (2, "--threads", [2])


@pytest.mark.parametrize(("choice", "line"), [
    (choose_threads(CpuReadings(2, busy=1.0, cores=2)),
     "torch threads: 1 of 2 CPUs (1 busy; --threads to override)"),
    (choose_threads(CpuReadings(2, busy=0.0, cores=2)),
     "torch threads: 2 of 2 CPUs (0 busy; --threads to override)"),
    (choose_threads(CpuReadings(2, quota=1.5, busy=0.0, cores=2)),
     "torch threads: 1 of 1 CPU (cgroup quota 1.5 CPUs; 0 busy; --threads to override)"),
    (choose_threads(CpuReadings(2)),
     "torch threads: 2 of 2 CPUs (busy CPUs not measured; --threads to override)"),
    (choose_threads(CpuReadings(2, busy=1.0, cores=2), 2),
     "torch threads: 2 of 2 CPUs (threads: 2 in models.yaml; 1 busy, auto would use 1)"),
])
def test_the_header_line_says_the_count_of_how_many_and_why(choice, line):
    assert choice.describe() == line


@pytest.mark.parametrize(("value", "expected"), [
    (1, 1), (MAX_THREADS, MAX_THREADS), ("auto", "auto"), ("8", 8), (" auto ", "auto"),
])
def test_a_threads_setting_is_a_count_or_auto(value, expected):
    assert parse_threads(value) == expected


@pytest.mark.parametrize("value", [0, -1, MAX_THREADS + 1, True, 2.5, "", "x", "Auto",
                                   "\u00b2", "1e3", None, [2]])
def test_anything_else_is_refused_in_one_line_without_the_value(value):
    with pytest.raises(ValueError, match=f"^expected a whole number from 1 to {MAX_THREADS}, "
                                         "or auto$"):
        parse_threads(value)


STAT = """cpu  300 0 100 500 0 0 0 0 0 0
cpu0 100 0 50 250 0 0 0 0 0 0
cpu1 200 0 50 250 0 0 0 0 0 0
intr 1 2 3
"""
STAT_LATER = """cpu  500 0 100 600 0 0 0 0 0 0
cpu0 100 0 50 350 0 0 0 0 0 0
cpu1 300 0 50 250 10 0 0 0 0 0
"""


def test_busy_cpus_come_from_two_readings_of_proc_stat():
    before, after = parse_proc_stat(STAT), parse_proc_stat(STAT_LATER)
    assert before == {0: (150, 400), 1: (250, 500)}
    # cpu0 idled for 100 ticks; cpu1 was busy 100 of 110 (10 of iowait is not busy)
    assert busy_between(before, after) == pytest.approx(100 / 110)
    assert busy_between(before, after, {0}) == 0.0
    assert busy_between(before, after, {1}) == pytest.approx(100 / 110)


@pytest.mark.parametrize(("text", "expected"), [
    ("150000 100000\n", 1.5), ("max 100000\n", None), ("200000 100000", 2.0), ("", None),
])
def test_cgroup_v2_cpu_max(text, expected):
    assert parse_cpu_max(text) == expected


def test_the_tightest_quota_of_the_process_cgroups_counts(tmp_path):
    """cgroup v2: the process's group and those above it; v1: the cpu controller's mount."""
    root = tmp_path / "cgroup"
    (root / "outer" / "inner").mkdir(parents=True)
    (root / "outer" / "cpu.max").write_text("300000 100000\n")
    (root / "outer" / "inner" / "cpu.max").write_text("max 100000\n")
    membership = tmp_path / "self-cgroup"
    membership.write_text("0::/outer/inner\n")
    assert cgroup_quota(root, membership) == 3.0
    (root / "outer" / "inner" / "cpu.max").write_text("150000 100000\n")
    assert cgroup_quota(root, membership) == 1.5
    membership.write_text("0::/\n")
    assert cgroup_quota(root, membership) is None
    v1 = tmp_path / "v1"
    (v1 / "cpu,cpuacct" / "docker").mkdir(parents=True)
    (v1 / "cpu,cpuacct" / "cpu.cfs_quota_us").write_text("-1\n")
    (v1 / "cpu,cpuacct" / "cpu.cfs_period_us").write_text("100000\n")
    membership.write_text("4:cpu,cpuacct:/docker\n2:memory:/docker\n")
    assert cgroup_quota(v1, membership) is None
    (v1 / "cpu,cpuacct" / "docker" / "cpu.cfs_quota_us").write_text("50000\n")
    (v1 / "cpu,cpuacct" / "docker" / "cpu.cfs_period_us").write_text("100000\n")
    assert cgroup_quota(v1, membership) == 0.5
    assert cgroup_quota(tmp_path / "none", tmp_path / "no-such-file") is None


def test_physical_cores_count_each_core_once(tmp_path):
    for cpu, core in enumerate([0, 1, 0, 1]):  # two cores, two threads each
        topology = tmp_path / f"cpu{cpu}" / "topology"
        topology.mkdir(parents=True)
        (topology / "physical_package_id").write_text("0\n")
        (topology / "core_id").write_text(f"{core}\n")
    assert physical_cores(tmp_path) == 2
    assert physical_cores(tmp_path / "missing") is None
