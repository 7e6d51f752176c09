"""``python -m web.agentctl.daemon READY_FD``: the detached agentctl itself
(web/agentctl/detached.py starts it).  Its arguments and token come as JSON
on stdin, so none of them is on its command line."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .cli import run_agentctl


def main() -> int:
    ready_fd = int(sys.argv[1])
    given = json.loads(sys.stdin.read())
    sys.stdin.close()
    args = argparse.Namespace(**{**given["args"], "token": given["token"],
                                 "ready_fd": ready_fd})
    return run_agentctl(args, Path(given["data_dir"]))


if __name__ == "__main__":
    sys.exit(main())
