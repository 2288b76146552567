"""The executor seam (kvproof/executor.py, docs/scale.md): results by unit index whatever the
completion order, on the local pool and on a Dask cluster; ``prove``, a ``fuzz`` campaign and a
conformance sample give byte-identical reports on the local pool and on a local cluster of 2
workers (processes, 1 thread each) that the tests start. The cluster tests need the cluster extra
(``distributed``, also in the test extra, so CI runs them); the conformance sample also needs vLLM's
venv and is a conformance test (``pytest -m conformance tests/test_executor.py``)."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kvproof import executor as seam
from kvproof.cli import main

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
HAS_DISTRIBUTED = importlib.util.find_spec("distributed") is not None
needs_cluster = pytest.mark.skipif(
    not HAS_DISTRIBUTED, reason="the cluster extra is missing: pip install 'kvproof[cluster]' (distributed)")

#: prove on both executors, kept short: the profile rules (24 PF, 3 CA; PF011 dead, the rest
#: reachable), not --all, whose worker and scheduler shapes take minutes on 2 cores
PROFILE_RULES = [f"PF{n:03d}" for n in range(1, 25)] + ["CA001", "CA002", "CA003"]


def _later_first(index: int, units: int) -> int:
    """A unit that ends sooner the later it comes (results by completion order would be reversed)."""
    time.sleep(0.05 * (units - index))
    return index * index


def _built() -> str:
    return "built"


# -- the seam on its own ----------------------------------------------------------------------------

def test_local_pool_results_come_by_unit_index_not_by_completion() -> None:
    units = [(i, 6) for i in range(6)]
    with seam.executor_for("local", 2) as pool:
        assert not isinstance(pool, seam.InProcess)
        assert list(seam.results_in_order(pool, _later_first, units, first=[5, 4, 3, 2, 1, 0])) == \
            [i * i for i in range(6)]
    with pytest.raises(ValueError, match="every unit exactly once"):
        with seam.executor_for("local", 2) as pool:
            list(seam.results_in_order(pool, _later_first, units, first=[0, 0, 1, 2, 3, 4]))


def test_one_local_job_runs_each_unit_here_when_its_result_is_asked_for() -> None:
    ran: list[int] = []

    def unit(i: int) -> int:
        ran.append(i)
        return i

    with seam.executor_for("local", 1) as pool:
        assert isinstance(pool, seam.InProcess)
        results = seam.results_in_order(pool, unit, [(0,), (1,), (2,)])
        assert next(results) == 0 and ran == [0]  # a report streams as the units finish
        assert list(results) == [1, 2]


def test_a_seeded_value_reaches_forked_workers_and_is_dropped_after() -> None:
    key = ("test_executor.seeded", 1)
    with seam.seeded(key, "from the parent"):
        with seam.executor_for("local", 2) as pool:
            got = list(seam.results_in_order(pool, seam.process_state, [(key, _built)] * 2))
    assert got == ["from the parent"] * 2
    assert key not in seam.PROCESS_STATE
    assert seam.process_state(key, _built) == "built"
    seam.PROCESS_STATE.drop(key)


def test_without_the_cluster_extra_an_address_is_refused_naming_it(monkeypatch, capsys) -> None:
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed raises ImportError
    with pytest.raises(seam.ExecutorError, match=r"pip install 'kvproof\[cluster\]'"):
        with seam.executor_for("tcp://127.0.0.1:8786", 2):
            pass
    assert main(["prove", "PF001", "--executor", "tcp://127.0.0.1:8786"]) == 2
    assert "kvproof prove: --executor tcp://127.0.0.1:8786: the cluster engine is not installed" in capsys.readouterr().err
    assert main(["fuzz", "--campaign", "mutation", "-n", "0", "--executor", "tcp://127.0.0.1:8786",
                 str(EXAMPLES / "minimax-m27-tp4" / "profile.json")]) == 2
    assert "kvproof fuzz: --executor tcp://127.0.0.1:8786: the cluster engine is not installed" in capsys.readouterr().err


@needs_cluster
def test_no_scheduler_at_the_address_is_a_usage_error(monkeypatch, capsys) -> None:
    monkeypatch.setattr(seam, "CONNECT_TIMEOUT_S", 1)
    assert main(["prove", "PF001", "--executor", "tcp://127.0.0.1:9"]) == 2
    err = capsys.readouterr().err
    assert "kvproof prove: --executor tcp://127.0.0.1:9: no Dask scheduler answered there" in err
    assert "Traceback" not in err
    assert main(["fuzz", "--campaign", "mutation", "--executor", "host-without-port",
                 str(EXAMPLES / "minimax-m27-tp4" / "profile.json")]) == 2
    assert capsys.readouterr().err == ("kvproof fuzz: --executor host-without-port: not a scheduler address (missing "
                                       "port number in address 'host-without-port'); expected local or "
                                       "SCHEME://HOST:PORT, e.g. tcp://host:8786\n")


def test_a_worker_with_other_code_refuses_its_units() -> None:
    with pytest.raises(seam.ExecutorError, match="runs other code"):
        seam.run_checked("0" * 64, "tcp://scheduler:8786", _later_first, (0, 0))
    assert seam.run_checked(seam.fingerprint(), "tcp://scheduler:8786", _later_first, (3, 3)) == 9


def test_the_fingerprint_covers_kvproofs_code(tmp_path, monkeypatch) -> None:
    copy = tmp_path / "kvproof"
    shutil.copytree(Path(seam.__file__).parent, copy, ignore=shutil.ignore_patterns("__pycache__"))
    assert seam.folder_digest(copy, "*.py") == seam.folder_digest(Path(seam.__file__).parent, "*.py")
    (copy / "rules" / "core.py").write_text((copy / "rules" / "core.py").read_text() + "\n# changed\n")
    assert seam.folder_digest(copy, "*.py") != seam.folder_digest(Path(seam.__file__).parent, "*.py")


def test_fuzz_reports_no_clock_unless_timings_is_given(tmp_path, capsys) -> None:
    profile = tmp_path / "set" / "profile.json"
    profile.parent.mkdir()
    shutil.copy(EXAMPLES / "minimax-m27-tp4" / "profile.json", profile)
    args = ["fuzz", "--campaign", "mutation", "-n", "2", "--geometries", "0", "-o", str(tmp_path / "o"), str(profile.parent)]
    reports = []
    for extra in ([], [], ["--timings"], ["--format", "json"], ["--format", "json", "--timings"]):
        assert main([*args, *extra]) == 0
        reports.append(capsys.readouterr().out)
    assert reports[0] == reports[1]  # the same bytes on every run
    new = [line for line in reports[2].splitlines() if line not in reports[0].splitlines()]
    assert len(new) == 1 and re.fullmatch(r"  \d+(\.\d+)? s", new[0]), new  # the clock line, and only it
    assert "seconds" not in json.loads(reports[3])["mutation"] and "seconds" in json.loads(reports[4])["mutation"]


# -- on a local cluster of 2 workers ----------------------------------------------------------------

@pytest.fixture(scope="module")
def cluster():
    """A Dask cluster on this machine: a scheduler in this process, 2 worker processes of 1 thread
    each (kvproof's units are single-threaded), no dashboard."""
    if not HAS_DISTRIBUTED:
        pytest.skip("the cluster extra is missing: pip install 'kvproof[cluster]' (distributed)")
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                      host="127.0.0.1") as local:
        with Client(local.scheduler_address, set_as_default=False) as client:
            yield local.scheduler_address, client


def _worker_state(client) -> dict[str, list[str]]:
    return client.run(lambda: sorted(str(k[0] if isinstance(k, tuple) else k)
                                     for k in __import__("kvproof.executor", fromlist=["PROCESS_STATE"]).PROCESS_STATE.keys()))


@needs_cluster
def test_cluster_results_come_by_unit_index_not_by_completion(cluster) -> None:
    import cloudpickle

    address, _ = cluster
    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the workers cannot import this test file
    try:
        with seam.executor_for(address) as pool:
            assert getattr(pool, "kvproof_address", None) == address
            units = [(i, 6) for i in range(6)]
            assert list(seam.results_in_order(pool, _later_first, units)) == [i * i for i in range(6)]
    finally:
        cloudpickle.unregister_pickle_by_value(sys.modules[__name__])


@needs_cluster
def test_prove_is_the_same_bytes_on_the_local_pool_and_on_the_cluster(cluster, capsys, tmp_path) -> None:
    address, client = cluster
    reports, witnesses = [], []
    folder = tmp_path / "witnesses"  # one folder: the report names the witnesses' paths
    for where in (["--jobs", "1"], ["--jobs", "2"], ["--executor", address]):
        shutil.rmtree(folder, ignore_errors=True)
        code = main(["prove", *PROFILE_RULES, "--format", "json", "-o", str(folder), *where])
        reports.append(capsys.readouterr().out)
        witnesses.append({p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()})
        assert code == 0, reports[-1]
    assert reports[1] == reports[0] and reports[2] == reports[0]
    assert witnesses[1] == witnesses[0] and witnesses[2] == witnesses[0]
    verdicts = {r["rule"]: r["verdict"] for r in json.loads(reports[0])["rules"]}
    assert list(verdicts) == PROFILE_RULES and verdicts["PF011"] == "dead"
    assert sum(v == "reachable" for v in verdicts.values()) == len(PROFILE_RULES) - 1
    assert len(witnesses[0]) >= len(PROFILE_RULES) - 1
    state = _worker_state(client)  # both workers proved rules, each with a prover of its own
    assert len(state) == 2 and all("kvproof.prove.prover" in keys for keys in state.values()), state


@needs_cluster
def test_fuzz_is_the_same_bytes_on_the_local_pool_and_on_the_cluster(cluster, capsys, tmp_path) -> None:
    address, client = cluster
    for name, source in (("minimax", "minimax-m27-tp4"), ("mamba", "hybrid-mamba-align")):
        (tmp_path / name).mkdir()
        shutil.copy(EXAMPLES / source / "profile.json", tmp_path / name / "profile.json")
    args = ["fuzz", "--campaign", "mutation", "-n", "10", "--geometries", "2", "--seed", "19",
            "-o", str(tmp_path / "out"), str(tmp_path / "minimax"), str(tmp_path / "mamba")]
    reports = []
    for where in (["--jobs", "1"], ["--jobs", "2"], ["--executor", address]):
        code = main([*args, *where])
        reports.append(capsys.readouterr().out)
        assert code == 0, reports[-1]
    assert reports[1] == reports[0] and reports[2] == reports[0]
    edits = int(reports[0].split("single-field edits tried")[1].split()[0].replace(",", ""))
    assert edits > 2 * 64  # several batches: both workers took some
    state = _worker_state(client)
    assert all(keys.count("kvproof.fuzz.set") >= 1 for keys in state.values()), state


# -- a conformance sample (vLLM's oracle on every process that runs units) ------------------------

ORACLE_PYTHON = Path(os.environ.get("KVPROOF_ORACLE_PYTHON", ROOT / ".venv-vllm" / "bin" / "python"))


@pytest.mark.conformance
@needs_cluster
def test_a_conformance_sample_is_the_same_bytes_on_the_local_pool_and_on_the_cluster(cluster) -> None:
    if not ORACLE_PYTHON.exists():
        if os.environ.get("KVPROOF_CONFORMANCE_REQUIRED"):
            pytest.fail(f"{ORACLE_PYTHON} is absent: the conformance oracle needs vLLM 0.33.0's venv")
        pytest.skip(f"{ORACLE_PYTHON} is absent: run `bash scripts/conformance-setup.sh`")
    address, _ = cluster
    command = [sys.executable, str(ROOT / "scripts" / "conformance-campaign.py"), "--count", "16", "--seed", "11",
               "--oracle-python", str(ORACLE_PYTHON)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    runs = [subprocess.run([*command, *where], capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
            for where in (["--jobs", "2"], ["--executor", address])]
    for run in runs:
        assert run.returncode == 0, run.stdout + run.stderr
    assert runs[1].stdout == runs[0].stdout
    assert "agreements: " in runs[0].stdout and runs[0].stdout.rstrip().endswith("ok: no disagreement")
    assert f"on {address}" in runs[1].stderr
