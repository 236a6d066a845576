"""script mode: the thesis's Appendix U stage-in and stage-out scripts."""

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
    s.write_text('#!/bin/sh\necho copying\necho "cannot write /some/path" >&2\nexit 3\n')
    s.chmod(0o755)
    proc = stage("script", s, tmp_path, tmp_path, check=7)
    lines = proc.stderr.decode().splitlines()
    assert lines[:2] == ["copying", "cannot write /some/path"]
    assert lines[-1] == (f"flux-rsa-stage: {s}: stage script exited with status 3 "
                         "(its last message: cannot write /some/path)")
