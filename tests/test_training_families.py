"""What the agent trains on: the paper's family under any placer, and windows of real traces
(:class:`~pacopt.learned.env.TraceFamily`) kept clear of the windows the trace tables measure.

Hand-made traces of the built-in graphs (BERT, GPT-2): no download, seconds."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from pacopt.infra.errors import InputError
from pacopt.learned.agent import CHECKPOINT_DIR, default_checkpoint
from pacopt.learned.env import PartitionEnv, TraceFamily
from pacopt.learned.teacher import TeacherSpec, make_teacher
from pacopt.learned.train_config import TrainConfig
from pacopt.model.placers import DEFAULT_PLACER
from pacopt.model.trace import evaluation_rows, read_trace

HEADER = "job_id,submission_time,num_iteration,model_name,deadline,batch_size,num_gpu,duration"


def trace_csv(path, rows: int, busy_from: int | None = None):
    """``rows`` jobs a minute apart (ten a second from row ``busy_from`` on: the busiest
    window), alternating BERT and GPT-2, 1-4 GPUs, deadlines of three durations."""
    lines, t = [HEADER], 0.0
    for i in range(rows):
        t += 0.1 if busy_from is not None and busy_from <= i < busy_from + 200 else 60.0
        model = "bert" if i % 2 else "gpt2"
        duration = 600 + 37 * (i % 11)
        lines.append(f"j{i},{t:.1f},10,{model},{t + 3 * duration:.1f},64,{1 + i % 4},{duration}")
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def family(tmp_path_factory):
    folder = tmp_path_factory.mktemp("traces")
    files = [trace_csv(folder / "east.csv", 1500, busy_from=1200),
             trace_csv(folder / "west.csv", 1300)]
    return TraceFamily.from_files([str(f) for f in files], num_jobs=60)


def test_trace_windows_avoid_the_evaluation_windows(family):
    for label in family.distributions:
        rows = read_trace(family.files[label], "elasticflow")
        ids = {r.job_id: r.row - 1 for r in rows}
        held_out = set()
        for start, stop in evaluation_rows(rows):
            held_out.update(range(start, stop))
        assert set(range(1001)) <= held_out  # the first 1001 jobs, and the busiest 200
        for seed in range(40):
            jobs = family.instance(label, seed).jobs
            used = [ids[job.id] for job in jobs]
            assert len(jobs) == 60 and used == list(range(used[0], used[0] + 60))
            assert not held_out & set(used), (label, seed)


def test_trace_family_is_reproducible_and_passes_the_checker(family):
    first, again = family.instance("west", 3), family.instance("west", 3)
    assert first.jobs == again.jobs and first.source == "trace-west-seed3"
    assert family.instance("west", 4).jobs != first.jobs
    env = PartitionEnv(family)
    check_env(env, skip_render_check=True)
    _, info = env.reset(options={"distribution": "east", "seed": 11})
    assert info == {"distribution": "east", "seed": 11}
    assert env.episode.instance.jobs == family.instance("east", 11).jobs


def test_a_trace_without_room_outside_the_evaluation_windows_is_refused(tmp_path):
    short = trace_csv(tmp_path / "short.csv", 1001)
    with pytest.raises(InputError, match="short.csv' has no window of 60 jobs outside"):
        TraceFamily.from_files([str(short)], num_jobs=60)
    with pytest.raises(InputError, match="distinct names"):
        TraceFamily.from_files([str(short), str(short)], num_jobs=60)


def test_training_config_on_traces(family):
    files = ",".join(str(family.files[label]) for label in family.distributions)
    config = TrainConfig(trace=files, num_jobs=60, teacher="rollout:min-feasible")
    assert config.labels == ("east", "west")
    assert config.family().distributions == ("east", "west")
    teacher = make_teacher(config.teacher_spec(), "west", family, seed=1)
    assert teacher.rollout.base.name == "min-feasible"
    assert len(teacher.rollout.futures) > 1
    # the hindsight teacher over a named rule: a trace has no distribution to tune for
    hindsight = replace(config, teacher="lookahead:min-feasible").teacher_spec()
    assert (hindsight.kind, str(hindsight)) == ("lookahead", "lookahead:min-feasible")
    teacher = make_teacher(hindsight, "west", family, seed=1)
    assert teacher.rollout.base.name == "min-feasible" and teacher.rollout.futures is None
    with pytest.raises(InputError, match="names nothing after 'lookahead:'"):
        TeacherSpec.parse("lookahead:")


def test_training_under_another_placer(pipedream_env):
    config = TrainConfig(placement="best-fit", num_jobs=30)
    assert config.family().base.model.placement == "best-fit"
    env = config.env()
    check_env(env, skip_render_check=True)
    env.reset(options={"distribution": "B", "seed": 5})
    while not env.episode.done:  # the placer places what the agent's degree asks for
        mask = env.action_masks()
        degree = int(np.flatnonzero(mask)[-1])
        decision = env.episode.decision
        assert decision.placer == "best-fit"
        cluster = decision.state.cluster
        expected = ([cluster.server_name(s) for s in decision.placement(degree).workers()]
                    if degree else [])
        env.step(degree)
        record = env.episode.records[decision.job_index]
        assert record.accepted == bool(degree) and record.workers == expected  # best fit's
    with pytest.raises(InputError, match="--placement: placer 'compact' does not fit"):
        TrainConfig(placement="compact")
    assert TrainConfig(placement="compact", preset="physical").placement == "compact"


def test_a_placer_plays_its_own_checkpoints_first_then_the_first_fit_ones():
    assert default_checkpoint("ddls", "C", DEFAULT_PLACER) == CHECKPOINT_DIR / "C-ddls.zip"
    for dist in ("C", "B", None):
        names = ([f"{dist}-ddls-best-fit.zip"] if dist else []) + ["general-ddls-best-fit.zip"]
        names += ([f"{dist}-ddls.zip"] if dist else []) + ["general-ddls.zip"]
        expected = next(CHECKPOINT_DIR / n for n in names if (CHECKPOINT_DIR / n).is_file())
        assert default_checkpoint("ddls", dist, "best-fit") == expected


def test_trace_settings_checked(family):
    files = ",".join(str(family.files[label]) for label in family.distributions)
    assert TrainConfig(trace=files).validation_seeds == (9000, 9001)
    with pytest.raises(InputError, match="--dist does not apply with --trace"):
        TrainConfig(trace=files, distributions=("A",))


def test_a_bad_trace_is_one_line_before_any_worker_starts(tmp_path, capsys):
    from pacopt.cli import pacopt_main

    out = tmp_path / "run"
    short = trace_csv(tmp_path / "short.csv", 1001)
    for files, message in ((str(tmp_path / "missing.csv"), "cannot read trace"),
                           (str(short), "has no window of 1001 jobs outside")):
        assert pacopt_main(["train", "--trace", files, "--out", str(out), "--minutes", "1"]) == 2
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
        assert not out.exists()


def test_a_larger_cluster_keeps_the_papers_load_per_server(pipedream_env):
    """``--cluster 8x8x4``: training and validation episodes on 256 servers, jobs arriving 8
    times as often; a malformed shape, or one given with --trace, is one line."""
    small = TrainConfig(distributions=("B",), num_jobs=30).family().instance("B", 3)
    large = TrainConfig(distributions=("B",), num_jobs=30, cluster="8x8x4").family().instance("B", 3)
    assert large.cluster.num_servers == 256 and small.cluster.num_servers == 32
    assert [j.arrival_ms * 8 for j in large.jobs] == pytest.approx([j.arrival_ms for j in small.jobs])
    assert [j.max_jct_fraction for j in large.jobs] == [j.max_jct_fraction for j in small.jobs]
    for bad in ("8x8", "8x0x4", "axbxc"):
        with pytest.raises(InputError, match="--cluster must be"):
            TrainConfig(cluster=bad)
    with pytest.raises(InputError, match="--cluster does not apply with --trace"):
        TrainConfig(cluster="8x8x4", trace="t.csv")
