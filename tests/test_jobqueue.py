"""--dask slurm[:JOBS] / pbs[:JOBS]: Dask workers as batch jobs through dask-jobqueue. The generated job scripts
are checked without a cluster (nothing is submitted); a missing configuration is one line, exit status 2."""

import pytest
from clitools import run

from dotattn.core.runner import check_dask_address, job_script, jobqueue_spec
from dotattn.core.validation import ParameterError

pytest.importorskip("dask_jobqueue")


def test_jobqueue_spec_and_address_check():
    assert jobqueue_spec("slurm") == ("slurm", 1) and jobqueue_spec("PBS:12") == ("pbs", 12)
    assert jobqueue_spec("tcp://host:8786") is None and check_dask_address("slurm:4") == "slurm:4"
    with pytest.raises(ParameterError, match=r"jobs must be in \[1, 10000\]"):
        jobqueue_spec("slurm:0")


@pytest.mark.parametrize(
    "kind, lines",
    [
        ("slurm", ["#SBATCH -p short", "#SBATCH --cpus-per-task=2", "#SBATCH --mem=4G", "#SBATCH -t 00:30:00"]),
        ("pbs", ["#PBS -q short", "#PBS -l walltime=00:30:00", "ncpus=2"]),
    ],
)
def test_generated_job_script(kind, lines):
    script = job_script(kind, cores=2, memory="4GB", walltime="00:30:00", queue="short")
    for line in lines:
        assert line in script, script
    assert "distributed.cli.dask_worker" in script  # each job runs a Dask worker that connects back here


def test_unconfigured_job_size_is_one_line_exit_2(tmp_path):
    import dask.config

    if dask.config.get("jobqueue.slurm.cores", None) is not None:
        pytest.skip("this machine configures SLURM jobs (jobqueue.yaml): the refusal cannot be shown here")
    out = tmp_path / "pd"
    r = run("phase-diagram", "--omega", "0.3", "--alpha", "1", "--dask", "slurm:2", "--out", str(out))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "jobqueue.slurm in ~/.config/dask/jobqueue.yaml" in r.stderr and not out.exists()
