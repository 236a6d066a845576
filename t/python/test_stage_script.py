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

    api.run("script", script, (ram, data), progress=progress, direction="in")
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
        "script",
        s,
        (tmp_path, tmp_path),
        progress=lambda snap: seen.append(snap.bytes_total),
    )
    assert set(seen) == {0}
