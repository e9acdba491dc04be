"""Create the virtual environments the peer benchmarks run in (run once, before run.py).

Why separate venvs: arq pins ``redis<6`` while echomq ships with a newer
redis-py, and installing arq next to echomq would downgrade echomq's client
(BENCH-NOTES). So echomq is measured in the interpreter that runs run.py,
and each peer in a venv of its own group:

- ``benchmarks/.venv-peers``      bullmq, rq, saq, celery, dramatiq, taskiq-redis
  (``requirements-peers.txt``, on the same redis-py major version as echomq)
- ``benchmarks/.venv-peers-arq``  arq (``requirements-peers-arq.txt``, redis<6)

Usage: ``python benchmarks/setup_peers.py [--only peers|arq] [--recreate]``.
Nothing is installed by run.py itself; a peer whose venv is missing is reported
as skipped.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import venv
from pathlib import Path

HERE = Path(__file__).resolve().parent

#: venv directory name -> requirements file that fills it.
VENVS: dict[str, str] = {
    ".venv-peers": "requirements-peers.txt",
    ".venv-peers-arq": "requirements-peers-arq.txt",
}


def venv_python(directory: Path) -> Path:
    """The interpreter inside a venv directory."""
    return directory / "bin" / "python"


def create(name: str, requirements: str, *, recreate: bool) -> None:
    """Make one venv (if needed) and pip install its requirements file into it."""
    directory = HERE / name
    if recreate and directory.exists():
        shutil.rmtree(directory)
    if not venv_python(directory).exists():
        print(f"creating {directory}", flush=True)
        venv.EnvBuilder(with_pip=True, clear=False).create(directory)
    python = str(venv_python(directory))
    subprocess.run([python, "-m", "pip", "install", "-q", "--upgrade", "pip"], check=True)
    subprocess.run(
        [python, "-m", "pip", "install", "-q", "-r", str(HERE / requirements)], check=True
    )
    frozen = subprocess.run(
        [python, "-m", "pip", "freeze"], check=True, capture_output=True, text=True
    ).stdout
    print(f"{name}:\n  " + "\n  ".join(frozen.split()), flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=("peers", "arq"), help="create just one of the venvs")
    parser.add_argument("--recreate", action="store_true", help="delete and rebuild the venvs")
    args = parser.parse_args(argv)
    for name, requirements in VENVS.items():
        if args.only and not name.endswith(args.only):
            continue
        try:
            create(name, requirements, recreate=args.recreate)
        except subprocess.CalledProcessError as exc:
            print(f"{name}: pip failed ({exc}); its peers will be skipped", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
