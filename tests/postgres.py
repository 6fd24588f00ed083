"""A real PostgreSQL server on loopback for the tests that run the records on it.

Debian's ``postgresql`` package (installed by .ci/run) gives ``initdb`` and ``pg_ctl``; a cluster
of the session's own is made in a temporary directory, on a free port, trusting local
connections, and each test gets a fresh database in it. PostgreSQL refuses to run as root, so
under root the cluster is the ``postgres`` user's. Without the package the tests that need it
are skipped, saying why.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from itertools import count
from pathlib import Path

from agent.caller.loopback import free_port

_BIN = sorted(glob.glob("/usr/lib/postgresql/*/bin"))
PG_BIN = Path(_BIN[-1]) if _BIN else None
_names = count(1)


def _as_owner(args: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *args] if os.geteuid() == 0 else args


class Cluster:
    def __init__(self):
        self.dir = Path(tempfile.mkdtemp(prefix="brisk-pg-"))
        self.port = free_port()
        if os.geteuid() == 0:
            user = pwd.getpwnam("postgres")
            os.chown(self.dir, user.pw_uid, user.pw_gid)
        data = self.dir / "data"
        subprocess.run(_as_owner([str(PG_BIN / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres"]),
                       check=True, capture_output=True)
        options = f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c fsync=off"
        subprocess.run(_as_owner([str(PG_BIN / "pg_ctl"), "-D", str(data), "-o", options, "-w", "-l",
                                  str(self.dir / "log"), "start"]), check=True, capture_output=True)

    async def new_database(self) -> str:
        """A fresh, empty database; its SQLAlchemy URL."""
        import asyncpg

        name = f"brisk_test_{next(_names)}"
        connection = await asyncpg.connect(host="127.0.0.1", port=self.port, user="postgres", database="postgres")
        try:
            await connection.execute(f'CREATE DATABASE "{name}"')
        finally:
            await connection.close()
        return f"postgresql+asyncpg://postgres@127.0.0.1:{self.port}/{name}"

    def stop(self) -> None:
        subprocess.run(_as_owner([str(PG_BIN / "pg_ctl"), "-D", str(self.dir / "data"), "-m", "immediate", "stop"]),
                       capture_output=True)
        shutil.rmtree(self.dir, ignore_errors=True)
