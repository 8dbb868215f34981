"""`tlaloc generate` without --prompt reads the prompt from stdin; on a terminal it first says so
on stderr (otherwise the wait looks like a hang), and with a pipe it says nothing.

Usage: python3 generate_stdin_tty.py TLALOC MODEL_DIR
"""

import os
import pty
import select
import subprocess
import sys
import time

NOTICE = b"reading the prompt from stdin"


def main():
    tlaloc, model = sys.argv[1], sys.argv[2]
    cmd = [tlaloc, "generate", "-m", model, "-n", "3", "--temp", "0"]
    # stdin a terminal (a pseudo-terminal's slave end): the notice comes before the prompt is read.
    master, slave = pty.openpty()
    proc = subprocess.Popen(cmd, stdin=slave, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    os.close(slave)
    err = b""
    deadline = time.time() + 120
    while NOTICE not in err and time.time() < deadline and proc.poll() is None:
        ready, _, _ = select.select([proc.stderr], [], [], 1.0)
        if ready:
            err += os.read(proc.stderr.fileno(), 4096)
    assert NOTICE in err, f"no notice on a terminal: {err!r}"
    os.write(master, b"The rain\n\x04")  # Ctrl-D at a line start: end of input
    out, rest = proc.communicate(timeout=120)
    os.close(master)
    assert proc.returncode == 0, (proc.returncode, err + rest)
    assert out.strip(), f"no reply on stdout: {err + rest!r}"
    print("ok: on a terminal, generate says it reads the prompt from stdin")
    # A pipe: no notice.
    piped = subprocess.run(cmd, input=b"The rain", capture_output=True, timeout=120)
    assert piped.returncode == 0, piped
    assert NOTICE not in piped.stderr, piped.stderr
    print("ok: with a pipe, no notice")


if __name__ == "__main__":
    main()
