"""script mode: the thesis's Appendix U stage-in and stage-out scripts."""

import pytest
from test_stage_helpers import make_tree, rsync_diff, stage


def test_appendix_u_scripts_round_trip(tmp_path):
    src = make_tree(tmp_path / "results")
    ram = tmp_path / "ram"
    ram.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    stage_out = tmp_path / "stage-out.sh"
    stage_out.write_text('#!/bin/sh\ntar cf "$2/result.tar" -C "$1" .\n')
    stage_out.chmod(0o755)
    stage_in = tmp_path / "stage-in.sh"
    stage_in.write_text('#!/bin/sh\ntar xf "$2/result.tar" -C "$1"\n')
    stage_in.chmod(0o755)
    stage("script", stage_out, src, out, check=0)
    assert (out / "result.tar").stat().st_size > 0
    stage("script", stage_in, ram, out, check=0)
    assert rsync_diff(src, ram) == ""


def test_script_output_goes_to_stderr_not_the_json_stream(tmp_path):
    s = tmp_path / "chatty.sh"
    s.write_text("#!/bin/sh\necho hello from the script\n")
    s.chmod(0o755)
    proc = stage("script", s, tmp_path, tmp_path, "--progress-json", check=0)
    assert b"hello from the script" in proc.stderr
    for line in proc.stdout.splitlines():
        assert line.startswith(b"{")


def test_a_failing_script_s_last_message_is_in_the_error_line(tmp_path):
    """The stager's last stderr line becomes the RSA record's error: it
    must say what the script said, e.g. the path it could not write."""
    s = tmp_path / "fails.sh"
    s.write_text(
        '#!/bin/sh\necho copying\necho "cannot write /some/path" >&2\nexit 3\n'
    )
    s.chmod(0o755)
    proc = stage("script", s, tmp_path, tmp_path, check=7)
    lines = proc.stderr.decode().splitlines()
    assert lines[:2] == ["copying", "cannot write /some/path"]
    assert lines[-1] == (
        f"flux-rsa-stage: {s}: stage script exited with status 3 "
        "(its last message: cannot write /some/path)"
    )


def _gated_copy_script(path, gates):
    """A stage-in script that copies $2's part files one by one, each once
    its gate file exists (the test opens them as it sees progress)."""
    path.write_text(
        "#!/bin/sh\n"
        "for i in 1 2 3 4; do\n"
        f'    while ! test -e "{gates}/gate$i"; do sleep 0.05; done\n'
        '    cp "$2/part$i" "$1/"\n'
        "done\n"
    )
    path.chmod(0o755)
    return path


def test_a_stage_in_script_s_progress_is_measured_as_the_ramdisk_fills(tmp_path):
    from flux_rsa.stage import api

    data = tmp_path / "data"
    data.mkdir()
    for i in range(1, 5):
        (data / f"part{i}").write_bytes(b"x" * 100_000)
    ram = tmp_path / "ram"
    ram.mkdir()
    script = _gated_copy_script(tmp_path / "in.sh", tmp_path)
    seen = []

    def progress(snap):
        seen.append((snap.phase, snap.bytes_done, snap.bytes_total))
        if snap.phase == "copy":  # let one more part through per reading
            opened = len(list(tmp_path.glob("gate*")))
            if snap.bytes_done >= opened * 100_000 and opened < 4:
                (tmp_path / f"gate{opened + 1}").touch()

    api.run(
        api.StageRequest("script", str(script), str(ram), str(data), direction="in"),
        progress,
    )
    copying = [
        done for phase, done, total in seen if phase == "copy" and total == 400_000
    ]
    assert copying == sorted(copying)
    assert {100_000, 200_000, 300_000} <= set(copying)  # each part seen arriving
    assert max(copying) < 400_000  # below 100% until the script has ended
    assert seen[-1] == ("done", 400_000, 400_000)


def test_a_script_without_a_direction_reports_no_sizes(tmp_path):
    s = tmp_path / "quiet.sh"
    s.write_text("#!/bin/sh\nexit 0\n")
    s.chmod(0o755)
    seen = []
    from flux_rsa.stage import api

    api.run(
        api.StageRequest("script", str(s), str(tmp_path), str(tmp_path)),
        lambda snap: seen.append(snap.bytes_total),
    )
    assert set(seen) == {0}


def test_a_jobs_script_runs_in_the_jobs_environment_less_what_flux_sets_for_tasks(
    tmp_path,
):
    pytest.importorskip(
        "flux.job", reason="no Flux: FLUX_JOB_ID is written as Flux does"
    )
    from flux.job import JobID

    from flux_rsa.stage import api, script

    submitted = {
        "PATH": "/usr/bin:/bin",
        "WAIT_FOR": "/p/ready",
        "FLUX_URI": "local:///run/flux/local",
        "FLUX_JOB_ID": "fAAAA",
        "FLUX_KVS_NAMESPACE": "job-1",
        "PMI_RANK": "0",
        "RSA_DATA_OUT": "/rd/out",
        "FLUX_JOB_CC": "3",
    }
    ram = tmp_path / "12.1" / "out"
    ram.mkdir(parents=True)
    env = script.environment(submitted, 12345, str(ram.parent), "out")
    assert env == {
        "PATH": "/usr/bin:/bin",
        "WAIT_FOR": "/p/ready",
        "FLUX_JOB_CC": "3",
        "FLUX_JOB_ID": JobID(12345).f58,
        "RSA_RAMDISK": str(ram.parent),
        "RSA_DIRECTION": "out",
    }
    s = tmp_path / "env.sh"
    s.write_text('#!/bin/sh\nenv >"$2/env"\n')
    s.chmod(0o755)
    data = tmp_path / "data"
    data.mkdir()
    api.run(
        api.StageRequest(
            "script", str(s), str(ram), str(data), direction="out", script_env=env
        )
    )
    seen = dict(line.split("=", 1) for line in (data / "env").read_text().splitlines())
    seen.pop("PWD", None)  # the shell's own
    seen.pop("SHLVL", None)
    assert seen == env


def test_a_quiet_script_is_measured_quiet_and_output_ends_it(tmp_path):
    """A stage script that prints nothing and writes nothing: its progress
    readings say for how long (whole seconds), until it prints."""
    from flux_rsa.stage import api

    s = tmp_path / "quiet.sh"
    s.write_text(
        "#!/bin/sh\n"
        f'while ! test -e "{tmp_path}/speak"; do sleep 0.05; done\n'
        "echo now I say something\n"
        f'while ! test -e "{tmp_path}/end"; do sleep 0.05; done\n'
    )
    s.chmod(0o755)
    ram, data = tmp_path / "ram", tmp_path / "data"
    ram.mkdir()
    data.mkdir()
    quiet, before = [], []

    def progress(snap):
        quiet.append(snap.quiet)
        if not before and snap.quiet >= 2:
            before.append(snap.quiet)
            (tmp_path / "speak").touch()
        elif before and snap.quiet < before[0]:
            (tmp_path / "end").touch()  # it spoke: quiet counts from 0 again

    api.run(
        api.StageRequest("script", str(s), str(ram), str(data), direction="out"),
        progress,
    )
    assert before and quiet[: quiet.index(before[0])] == sorted(
        quiet[: quiet.index(before[0])]
    )
