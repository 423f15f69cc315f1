"""A throw-away PostgreSQL cluster for tests: start, create a database, stop.

``PostgresCluster`` runs Debian's PostgreSQL server (the ``postgresql``
package, which ``./run`` installs as root) on a fresh ``initdb`` in a
temporary directory: listening on 127.0.0.1 at a free port and on a unix
socket in that directory, nowhere else; trust authentication; durability
off (``fsync``, ``synchronous_commit``, ``full_page_writes``), which a
throw-away cluster does not need.  ``stop()`` shuts it down and removes
the directory; it also runs at interpreter exit, and the postmaster gets
SIGQUIT (immediate shutdown) if the process that started it dies, so no
server outlives its test session.

As root the server runs as the ``postgres`` system user (PostgreSQL
refuses to run as root); otherwise as the current user.

The session fixture ``postgres_cluster`` yields one started cluster; import
it into a ``conftest.py``::

    from tests.postgres_cluster import postgres_cluster  # noqa: F401

and make a database per test or module with
``postgres_cluster.create_database("placement")``, which returns its
SQLAlchemy URL.
"""

from __future__ import annotations

import ctypes
import os
import pathlib
import pwd
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import weakref

import pytest

#: The superuser ``initdb`` creates; clients connect as their own role.
SUPERUSER = "postgres"
#: Seconds to wait for the server to accept connections, and for each
#: stage of a shutdown (fast, then immediate, then SIGKILL).
START_TIMEOUT = 30.0
STOP_TIMEOUT = 10.0
#: Settings every cluster gets; ``PostgresCluster(settings=...)`` adds to
#: or overrides them.  4 agents and Placement's connection pool need well
#: over the default 100 connections.
DEFAULT_SETTINGS = {
    "listen_addresses": "'127.0.0.1'",
    "max_connections": "200",
    "shared_buffers": "16MB",
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "log_min_messages": "warning",
    "lc_messages": "'C'",
}
_PORT_ATTEMPTS = 5
_SOCKET_PATH_MAX = 107  # sun_path, less its terminating NUL
_PR_SET_PDEATHSIG = 1
# Loaded before any fork: the child only calls it (see _die_with_parent).
_LIBC = ctypes.CDLL(None, use_errno=True)


class PostgresError(RuntimeError):
    """The cluster could not be set up, started or used."""


def find_bindir() -> pathlib.Path | None:
    """The directory holding ``initdb`` and ``postgres``, or None.

    Debian's packages put each major version in
    ``/usr/lib/postgresql/<major>/bin``; the newest wins.  Elsewhere, the
    directory of ``initdb`` on ``PATH`` when ``postgres`` is beside it.
    """
    versions = []
    for binary in pathlib.Path("/usr/lib/postgresql").glob("*/bin/postgres"):
        major = binary.parent.parent.name
        if major.isdigit() and (binary.parent / "initdb").is_file():
            versions.append((int(major), binary.parent))
    if versions:
        return max(versions)[1]
    initdb = shutil.which("initdb")
    if initdb:
        bindir = pathlib.Path(initdb).resolve().parent
        if (bindir / "postgres").is_file():
            return bindir
    return None


def unavailable_reason(bindir: pathlib.Path | None, *, root: bool,
                       apt: bool) -> tuple[str, bool] | None:
    """Why a cluster cannot run here, and whether tests may skip for it.

    None when PostgreSQL is installed.  Otherwise a message and True when
    it cannot be installed by this user (not root, or no apt-get: a skip
    is honest), False when ``./run setup`` would have installed it (a skip
    would hide a broken bootstrap).
    """
    if bindir is not None:
        return None
    if root and apt:
        return ("PostgreSQL's server is not installed (no initdb under "
                "/usr/lib/postgresql/*/bin or on PATH); `./run setup` "
                "installs Debian's postgresql package", False)
    return ("PostgreSQL's server is not installed (no initdb under "
            "/usr/lib/postgresql/*/bin or on PATH) and cannot be installed "
            "by this user; as root, `./run setup` installs Debian's "
            "postgresql package", True)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def processes_in(directory: pathlib.Path) -> list[int]:
    """Pids of processes whose working directory is in ``directory``.

    The postmaster and every backend run with the data directory as
    their working directory, so this finds all of a cluster's processes,
    even after the directory has been deleted.
    """
    prefix = str(directory)
    found = []
    for entry in pathlib.Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cwd = os.readlink(entry / "cwd")
        except OSError:  # gone, or not ours to read
            continue
        if cwd == prefix or cwd.startswith(prefix + "/"):
            found.append(int(entry.name))
    return found


def _die_with_parent() -> None:
    # Runs in the child after the user switch (which would clear it):
    # immediate shutdown if the starting thread's process dies.
    _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGQUIT, 0, 0, 0)


def _quote_identifier(name: str) -> str:
    if not re.fullmatch(r"[a-z_][a-z0-9_]{0,62}", name):
        raise PostgresError(f"database or role name {name!r} is not a plain "
                            "lower-case SQL identifier; use letters, digits "
                            "and _")
    return f'"{name}"'


class PostgresCluster:
    """One throw-away PostgreSQL cluster in its own temporary directory.

    ``start()`` creates and starts it, ``stop()`` shuts it down and removes
    every file; use it as a context manager to pair the two.  After a
    start, ``start_seconds`` says how long it took (``initdb`` included),
    and after a stop, ``stop_seconds``.

    Start it from a thread that lives as long as the cluster should (the
    main thread, in a test session): the server is told to shut down when
    the thread that started it ends.  ``parent_dir`` (default: the system
    temporary directory) holds the cluster's directory; as root, the
    ``postgres`` user must be able to reach it.  ``settings`` are
    ``postgresql.conf`` lines (values quoted as that file wants them).
    """

    def __init__(self, *, settings: dict[str, str] | None = None,
                 bindir: pathlib.Path | None = None,
                 parent_dir: str | None = None) -> None:
        self.settings = {**DEFAULT_SETTINGS, **(settings or {})}
        self.bindir = bindir
        self.parent_dir = parent_dir
        self.base_dir: pathlib.Path | None = None
        self.port: int | None = None
        self.host = "127.0.0.1"
        self.start_seconds: float | None = None
        self.stop_seconds: float | None = None
        # Shared with the finalizer, which must not hold the cluster itself.
        self._box: list[subprocess.Popen | None] = [None]
        self._finalizer = None

    @property
    def _process(self) -> subprocess.Popen | None:
        return self._box[0]

    @_process.setter
    def _process(self, process: subprocess.Popen | None) -> None:
        self._box[0] = process

    # -- where things are --------------------------------------------------

    @property
    def data_dir(self) -> pathlib.Path:
        """The cluster's data directory (``initdb``'s ``-D``)."""
        return self._base() / "data"

    @property
    def socket_dir(self) -> pathlib.Path:
        """The directory holding the server's unix socket."""
        return self._base()

    @property
    def pid(self) -> int | None:
        """The postmaster's pid while it runs, else None."""
        if self._process is None or self._process.poll() is not None:
            return None
        return self._process.pid

    def _base(self) -> pathlib.Path:
        if self.base_dir is None:
            raise PostgresError("the PostgreSQL cluster is not started; "
                                "call start() first")
        return self.base_dir

    def url(self, database: str, user: str | None = None) -> str:
        """The SQLAlchemy URL of ``database`` as ``user`` (default: the
        database's name) over TCP on loopback."""
        if self.port is None:
            raise PostgresError("the PostgreSQL cluster is not started; "
                                "call start() first")
        return (f"postgresql+psycopg2://{user or database}@{self.host}:"
                f"{self.port}/{database}")

    def connect_kwargs(self, database: str = "postgres",
                       user: str = SUPERUSER) -> dict:
        """Keyword arguments for ``psycopg2.connect`` over TCP."""
        if self.port is None:
            raise PostgresError("the PostgreSQL cluster is not started; "
                                "call start() first")
        return {"host": self.host, "port": self.port, "dbname": database,
                "user": user}

    # -- life cycle --------------------------------------------------------

    def start(self) -> PostgresCluster:
        """Create the cluster and start its server; returns self.

        Everything is removed again if any step fails.
        """
        if self.base_dir is not None:
            raise PostgresError(f"the PostgreSQL cluster in {self.base_dir} "
                                "is already started; stop() it first")
        began = time.monotonic()
        bindir = self.bindir or find_bindir()
        reason = unavailable_reason(bindir, root=os.geteuid() == 0,
                                    apt=shutil.which("apt-get") is not None)
        if reason:
            raise PostgresError(reason[0])
        self.bindir = bindir
        self.base_dir = pathlib.Path(tempfile.mkdtemp(
            prefix="virtdriver-pg-", dir=self.parent_dir))
        if len(f"{self.socket_dir}/.s.PGSQL.65535") > _SOCKET_PATH_MAX:
            path, self.base_dir = self.base_dir, None
            path.rmdir()
            raise PostgresError(
                f"cluster directory {path} is too long for a unix socket "
                f"path ({_SOCKET_PATH_MAX} bytes at most); pass a shorter "
                "parent_dir or TMPDIR")
        # Made before anything runs, so even a half-made cluster goes; a
        # finalizer also runs at interpreter exit.
        self._finalizer = weakref.finalize(self, _cleanup, self.base_dir,
                                           self._box)
        try:
            self._as_owner_prepare()
            self._initdb()
            self._serve()
        except BaseException:
            self.stop()
            raise
        self.start_seconds = time.monotonic() - began
        return self

    def stop(self) -> None:
        """Shut the server down and remove the cluster's directory.

        Safe to call twice, or after a failed start.
        """
        if self.base_dir is None:
            return
        began = time.monotonic()
        self._finalizer()
        self._process = None
        self.base_dir = None
        self.port = None
        self.stop_seconds = time.monotonic() - began

    def __enter__(self) -> PostgresCluster:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- the steps ---------------------------------------------------------

    def _owner(self) -> pwd.struct_passwd | None:
        """The system user the server runs as, when we are root."""
        if os.geteuid() != 0:
            return None
        try:
            return pwd.getpwnam("postgres")
        except KeyError:
            raise PostgresError(
                "running as root, but there is no `postgres` system user to "
                "run PostgreSQL as (it refuses root); reinstall Debian's "
                "postgresql-common, or run the tests as another user"
            ) from None

    def _as_owner_prepare(self) -> None:
        owner = self._owner()
        if owner is not None:
            os.chown(self.base_dir, owner.pw_uid, owner.pw_gid)

    def _run_kwargs(self) -> dict:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        env.update(LC_ALL="C", LANG="C")
        kwargs = {"env": env, "cwd": self.base_dir,
                  "preexec_fn": _die_with_parent, "start_new_session": True}
        owner = self._owner()
        if owner is not None:
            env.update(HOME=owner.pw_dir, USER=owner.pw_name,
                       LOGNAME=owner.pw_name)
            kwargs.update(user=owner.pw_uid, group=owner.pw_gid,
                          extra_groups=[])
        return kwargs

    def _initdb(self) -> None:
        hba = self.base_dir / "pg_hba.conf"
        hba.write_text("local all all trust\n"
                       "host all all 127.0.0.1/32 trust\n")
        hba.chmod(0o644)
        result = subprocess.run(
            [str(self.bindir / "initdb"), "--pgdata", str(self.data_dir),
             "--username", SUPERUSER, "--auth", "trust", "--encoding", "UTF8",
             "--locale", "C", "--no-sync", "--no-instructions"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            **self._run_kwargs())
        if result.returncode != 0:
            hint = ""
            if "Permission denied" in result.stdout and self._owner():
                hint = (f"; the postgres user must be able to enter "
                        f"{self.base_dir.parent}: pass a parent_dir (or "
                        "TMPDIR) it can reach")
            raise PostgresError(f"initdb in {self.data_dir} failed (exit "
                                f"{result.returncode}): "
                                f"{_last_lines(result.stdout)}{hint}")
        settings = {**self.settings,
                    "unix_socket_directories": f"'{self.socket_dir}'",
                    "hba_file": f"'{hba}'"}
        with open(self.data_dir / "postgresql.conf", "a") as conf:
            conf.write("\n# virtdriver tests (tests/postgres_cluster.py)\n")
            conf.writelines(f"{k} = {v}\n" for k, v in settings.items())

    def _serve(self) -> None:
        log = self.base_dir / "server.log"
        for attempt in range(_PORT_ATTEMPTS):
            self.port = free_port()
            with open(log, "w") as out:
                self._process = subprocess.Popen(
                    [str(self.bindir / "postgres"), "-D", str(self.data_dir),
                     "-p", str(self.port)],
                    stdin=subprocess.DEVNULL, stdout=out,
                    stderr=subprocess.STDOUT, **self._run_kwargs())
            if self._wait_ready(log):
                return
            text = log.read_text(errors="replace")
            # Another process took the port between free_port() and bind.
            if "could not bind" in text and attempt + 1 < _PORT_ATTEMPTS:
                continue
            raise PostgresError(
                f"PostgreSQL in {self.data_dir} did not start (exit "
                f"{self._process.poll()}): {_last_lines(text)}")

    def _wait_ready(self, log: pathlib.Path) -> bool:
        """Whether the server came up; False once it has exited."""
        deadline = time.monotonic() + START_TIMEOUT
        pidfile = self.data_dir / "postmaster.pid"
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                return False
            try:
                # Line 8 of postmaster.pid is the status: "ready" once it
                # accepts connections.
                lines = pidfile.read_text().splitlines()
            except OSError:
                lines = []
            if len(lines) >= 8 and lines[7].strip() == "ready":
                return True
            time.sleep(0.02)
        _stop_process(self._process)
        raise PostgresError(
            f"PostgreSQL in {self.data_dir} was not ready after "
            f"{START_TIMEOUT:.0f} s: {_last_lines(log.read_text())}")

    # -- inside the cluster ------------------------------------------------

    def execute(self, *statements: str, database: str = "postgres") -> None:
        """Run SQL statements as the superuser, outside a transaction."""
        import psycopg2

        conn = psycopg2.connect(**self.connect_kwargs(database))
        try:
            conn.autocommit = True
            with conn.cursor() as cur:
                for statement in statements:
                    cur.execute(statement)
        finally:
            conn.close()

    def create_database(self, name: str, owner: str | None = None) -> str:
        """Create a login role ``owner`` (default: ``name``) and a database
        ``name`` it owns; returns the database's SQLAlchemy URL."""
        owner = owner or name
        role, database = _quote_identifier(owner), _quote_identifier(name)
        self.execute(
            f"DO $$ BEGIN CREATE ROLE {role} LOGIN; "
            "EXCEPTION WHEN duplicate_object THEN NULL; END $$",
            f"CREATE DATABASE {database} OWNER {role}")
        return self.url(name, owner)


def _stop_process(process: subprocess.Popen | None) -> None:
    """Fast shutdown (SIGINT), then immediate (SIGQUIT), then SIGKILL."""
    if process is None:
        return
    for sig in (signal.SIGINT, signal.SIGQUIT, signal.SIGKILL):
        if process.poll() is not None:
            return
        process.send_signal(sig)
        try:
            process.wait(timeout=STOP_TIMEOUT)
            return
        except subprocess.TimeoutExpired:
            continue


def _cleanup(base_dir: pathlib.Path, box: list) -> None:
    """Stop the server (``box[0]``) and every process left in ``base_dir``,
    then remove it.  A finalizer: holds no reference to the cluster."""
    _stop_process(box[0])
    # A postmaster that was killed leaves backends behind; they run in the
    # data directory.
    for pid in processes_in(base_dir):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    shutil.rmtree(base_dir, ignore_errors=True)


def _last_lines(text: str, count: int = 3) -> str:
    """The last error lines of a PostgreSQL tool's output, on one line."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    errors = [line for line in lines
              if re.search(r"\b(error|FATAL|PANIC|LOG)\b", line)]
    return " / ".join((errors or lines)[-count:]) or "(no output)"


def require_postgres(in_ci: bool, *, bindir: pathlib.Path | None = None,
                     root: bool | None = None,
                     apt: bool | None = None) -> pathlib.Path:
    """The server's bindir, else skip the test, or fail it under CI and
    wherever ``./run setup`` would have installed PostgreSQL.

    ``bindir``, ``root`` and ``apt`` default to this machine's.
    """
    bindir = bindir or find_bindir()
    reason = unavailable_reason(
        bindir, root=os.geteuid() == 0 if root is None else root,
        apt=shutil.which("apt-get") is not None if apt is None else apt)
    if reason:
        message, may_skip = reason
        if in_ci or not may_skip:
            pytest.fail(message)
        pytest.skip(message)
    return bindir


@pytest.fixture(scope="session")
def postgres_cluster(in_ci):
    """A started ``PostgresCluster`` for the session, removed afterwards.

    Skipped when PostgreSQL is not installed and this user cannot install
    it; fails instead under CI, or as root, where ``./run`` installs it.
    """
    with PostgresCluster(bindir=require_postgres(in_ci)) as cluster:
        yield cluster
