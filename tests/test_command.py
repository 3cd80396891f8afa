"""The ``tracebridge`` command's entry point (tracebridge_command.py): it loads numpy without
OpenBLAS's thread pool and ends its process with ``os._exit`` once the command's output is
flushed. What it must keep: the output and exit status of ``python -m tracebridge``, the
one-line errors, a quiet end when the reader of its output goes away, and the environment
of what it starts."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TPU = "xspace/xprof_tpu_inference_2.xplane.pb"


@pytest.fixture(scope="module")
def command() -> str:
    script = Path(sys.executable).with_name("tracebridge")
    if not os.access(script, os.X_OK):
        pytest.skip("no tracebridge console script beside this interpreter (not installed)")
    return str(script)


def test_the_command_prints_what_python_m_prints(command, corpus):
    for args in (["summary", str(corpus / TPU), "--json"], ["info", str(corpus / TPU)]):
        ours = subprocess.run([command, *args], capture_output=True, text=True, timeout=300)
        module = subprocess.run([sys.executable, "-m", "tracebridge", *args], capture_output=True, text=True,
                                timeout=300)
        assert (ours.returncode, ours.stdout) == (module.returncode, module.stdout) == (0, module.stdout), args
        assert ours.stdout.strip()


def test_the_command_writes_its_files_whole(command, corpus, tmp_path):
    """os._exit skips Python's teardown, not the command's own closing of its outputs."""
    out = tmp_path / "tpu.pftrace"
    done = subprocess.run([command, "convert", str(corpus / TPU), str(out)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    expected = tmp_path / "expected.pftrace"
    subprocess.run([sys.executable, "-m", "tracebridge", "convert", str(corpus / TPU), str(expected)], check=True,
                   capture_output=True, timeout=300)
    assert out.read_bytes() == expected.read_bytes()


def test_bad_input_is_one_line_and_status_2(command, tmp_path):
    done = subprocess.run([command, "summary", str(tmp_path / "missing.xplane.pb")], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 2
    assert done.stderr.startswith("error: ") and len(done.stderr.strip().splitlines()) == 1
    assert "Traceback" not in done.stderr


def test_a_reader_that_goes_away_ends_the_command_quietly(command, corpus):
    """``tracebridge summary T | head -1``: status 141, as a shell reports SIGPIPE, and no
    traceback from the last flush."""
    process = subprocess.Popen([command, "summary", str(corpus / TPU), "--json"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    process.stdout.readline()
    process.stdout.close()
    _, err = process.communicate(timeout=300)
    assert process.returncode in (0, 141)  # 0: all of it fitted the pipe before it closed
    assert b"Traceback" not in err and b"Exception ignored" not in err


@pytest.mark.parametrize("given", [None, "3"])
def test_openblas_pool_size_is_left_as_it_was(given):
    """The command sets OPENBLAS_NUM_THREADS only while numpy loads: what it starts (a
    script under ``tracebridge run``) sizes its own pool; a value the user set stays."""
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    if given is not None:
        env["OPENBLAS_NUM_THREADS"] = given
    code = ("import os, sys, tracebridge_command\n"
            "sys.argv = ['tracebridge', '--version']\n"
            "try:\n    tracebridge_command.main()\nexcept SystemExit:\n    pass\n"
            "print(os.environ.get('OPENBLAS_NUM_THREADS'))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == str(given)
