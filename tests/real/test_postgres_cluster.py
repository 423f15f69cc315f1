"""A real PostgreSQL server: ``tests/postgres_cluster.py``'s throw-away cluster.

Skipped when PostgreSQL is not installed and cannot be (not root); failed
instead under CI, where ``./run`` installs Debian's ``postgresql``.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from urllib.parse import urlsplit

import psycopg2
import pytest

from tests import postgres_cluster as pgc
from tests.postgres_cluster import PostgresCluster, PostgresError, processes_in

pytestmark = pytest.mark.real

REPO = pathlib.Path(__file__).resolve().parents[2]

@pytest.fixture(scope="module")
def bindir(in_ci):
    return pgc.require_postgres(in_ci)


@pytest.fixture
def parent_dir():
    """A directory for the test's own clusters, reachable by ``postgres``
    (pytest's ``tmp_path`` is root's alone) and with a short path."""
    path = pathlib.Path(tempfile.mkdtemp(prefix="vd-pgtest-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def psycopg2_dsn(sqlalchemy_url: str) -> str:
    """libpq's form of a ``postgresql+psycopg2://`` URL."""
    scheme, rest = sqlalchemy_url.split("://", 1)
    assert scheme == "postgresql+psycopg2"
    return f"postgresql://{rest}"


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead but not yet reaped by its parent.
    stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def listening_sockets(pid: int) -> tuple[set[str], set[str], set[str]]:
    """The TCP (IPv4 and IPv6) addresses ``pid`` listens on, as
    /proc/net/tcp spells them, and the paths of its unix sockets."""
    inodes = set()
    for fd in pathlib.Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    tcp = {}
    for family in ("tcp", "tcp6"):
        rows = pathlib.Path(f"/proc/net/{family}").read_text().splitlines()[1:]
        tcp[family] = {fields[1] for fields in map(str.split, rows)
                       if fields[3] == "0A" and fields[9] in inodes}
    unix = set()
    for row in pathlib.Path("/proc/net/unix").read_text().splitlines()[1:]:
        fields = row.split()
        if len(fields) >= 8 and fields[6] in inodes:
            unix.add(fields[7])
    return tcp["tcp"], tcp["tcp6"], unix


# -- the session cluster -----------------------------------------------------


def test_a_database_accepts_its_role_through_the_url(postgres_cluster):
    url = postgres_cluster.create_database("vd_query", owner="vd_agent")

    parts = urlsplit(url)
    assert (parts.scheme, parts.hostname, parts.port, parts.username,
            parts.path) == ("postgresql+psycopg2", "127.0.0.1",
                            postgres_cluster.port, "vd_agent", "/vd_query")
    conn = psycopg2.connect(psycopg2_dsn(url))
    try:
        with conn, conn.cursor() as cur:
            cur.execute("SELECT current_user, current_database(), "
                        "rolsuper FROM pg_roles WHERE rolname = current_user")
            assert cur.fetchone() == ("vd_agent", "vd_query", False)
            # The role owns the database: it may make tables in it.
            cur.execute("CREATE TABLE t (id serial PRIMARY KEY, name text)")
            cur.execute("INSERT INTO t (name) VALUES ('a'), ('b') "
                        "RETURNING id")
            assert [row[0] for row in cur.fetchall()] == [1, 2]
    finally:
        conn.close()


def test_the_url_works_in_sqlalchemy(postgres_cluster):
    sqlalchemy = pytest.importorskip(
        "sqlalchemy", reason="SQLAlchemy is not installed yet (it comes with "
        "openstack-placement); the URL is tested through psycopg2 above")
    url = postgres_cluster.create_database("vd_sqlalchemy")

    engine = sqlalchemy.create_engine(url)
    try:
        with engine.connect() as conn:
            assert conn.execute(sqlalchemy.text(
                "SELECT current_user || '@' || current_database()"
            )).scalar() == "vd_sqlalchemy@vd_sqlalchemy"
    finally:
        engine.dispose()


def test_settings_suit_many_agents_and_throw_away_data(postgres_cluster):
    conn = psycopg2.connect(**postgres_cluster.connect_kwargs())
    try:
        with conn.cursor() as cur:
            values = {}
            for name in ("max_connections", "fsync", "listen_addresses",
                         "unix_socket_directories", "server_encoding"):
                cur.execute(f"SHOW {name}")
                values[name] = cur.fetchone()[0]
    finally:
        conn.close()

    assert int(values.pop("max_connections")) >= 100
    assert values == {"fsync": "off", "listen_addresses": "127.0.0.1",
                      "unix_socket_directories":
                          str(postgres_cluster.socket_dir),
                      "server_encoding": "UTF8"}


def test_it_listens_only_on_loopback_and_its_own_socket(postgres_cluster):
    tcp, tcp6, unix = listening_sockets(postgres_cluster.pid)

    assert tcp == {f"0100007F:{postgres_cluster.port:04X}"}
    assert tcp6 == set()
    assert unix == {f"{postgres_cluster.socket_dir}/.s.PGSQL."
                    f"{postgres_cluster.port}"}
    # The socket answers too.
    conn = psycopg2.connect(host=str(postgres_cluster.socket_dir),
                            port=postgres_cluster.port, dbname="postgres",
                            user=pgc.SUPERUSER)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT inet_server_addr() IS NULL")  # not TCP
            assert cur.fetchone() == (True,)
    finally:
        conn.close()


def test_twenty_connections_at_once(postgres_cluster):
    url = postgres_cluster.create_database("vd_many")
    count = 20
    barrier = threading.Barrier(count + 1, timeout=30)
    pids, errors = [], []

    def client():
        try:
            conn = psycopg2.connect(psycopg2_dsn(url))
            try:
                with conn.cursor() as cur:
                    cur.execute("SELECT pg_backend_pid()")
                    pids.append(cur.fetchone()[0])
                    barrier.wait()  # every connection is open now
                    barrier.wait()  # and was counted
                    cur.execute("SELECT count(*) FROM pg_class")
                    assert cur.fetchone()[0] > 0
            finally:
                conn.close()
        except Exception as exc:  # reported below, with the others
            errors.append(repr(exc))
            barrier.abort()

    threads = [threading.Thread(target=client) for _ in range(count)]
    for thread in threads:
        thread.start()
    try:
        barrier.wait()
        conn = psycopg2.connect(**postgres_cluster.connect_kwargs())
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT count(*) FROM pg_stat_activity "
                            "WHERE datname = 'vd_many'")
                open_now = cur.fetchone()[0]
        finally:
            conn.close()
        barrier.wait()
    except threading.BrokenBarrierError:
        open_now = None
    for thread in threads:
        thread.join(30)

    assert errors == []
    assert open_now == count
    assert len(set(pids)) == count


# -- a cluster's life ------------------------------------------------------


def test_stop_leaves_no_process_and_no_file(bindir, parent_dir):
    cluster = PostgresCluster(bindir=bindir, parent_dir=str(parent_dir))
    cluster.start()
    base, pid, port = cluster.base_dir, cluster.pid, cluster.port
    url = cluster.create_database("vd_stop")
    conn = psycopg2.connect(psycopg2_dsn(url))  # a backend to take down
    running = processes_in(base)

    cluster.stop()

    assert pid in running and len(running) > 2  # postmaster, backend, ...
    assert not alive(pid)
    assert processes_in(base) == []
    assert not base.exists()
    assert list(parent_dir.iterdir()) == []
    assert cluster.pid is None
    with pytest.raises(psycopg2.OperationalError):
        psycopg2.connect(host="127.0.0.1", port=port, dbname="postgres",
                         user=pgc.SUPERUSER, connect_timeout=2)
    conn.close()
    cluster.stop()  # again: nothing to do
    print(f"\npostgres cluster: start {cluster.start_seconds:.2f} s, "
          f"stop {cluster.stop_seconds:.2f} s")


def test_a_failing_block_still_removes_the_cluster(bindir, parent_dir):
    with pytest.raises(RuntimeError, match="the test's own failure"):
        with PostgresCluster(bindir=bindir,
                             parent_dir=str(parent_dir)) as cluster:
            base, pid = cluster.base_dir, cluster.pid
            raise RuntimeError("the test's own failure")

    assert not alive(pid)
    assert processes_in(base) == []
    assert list(parent_dir.iterdir()) == []


def test_a_server_that_cannot_start_is_reported_and_removed(bindir,
                                                             parent_dir):
    cluster = PostgresCluster(bindir=bindir, parent_dir=str(parent_dir),
                              settings={"shared_buffers": "'plenty'"})

    with pytest.raises(PostgresError) as caught:
        cluster.start()

    message = str(caught.value)
    assert "did not start" in message and "shared_buffers" in message
    assert "\n" not in message
    assert list(parent_dir.iterdir()) == []
    assert cluster.base_dir is None and cluster.pid is None


@pytest.mark.skipif(os.geteuid() != 0, reason="only root switches to the "
                    "postgres user, who may not enter another's directory")
def test_a_directory_postgres_cannot_enter_is_named(bindir):
    private = pathlib.Path(tempfile.mkdtemp(prefix="vd-pgtest-"))  # 0700
    try:
        with pytest.raises(PostgresError) as caught:
            PostgresCluster(bindir=bindir, parent_dir=str(private)).start()
        message = str(caught.value)
        assert "initdb" in message and "Permission denied" in message
        assert f"the postgres user must be able to enter {private}" in message
        assert list(private.iterdir()) == []
    finally:
        shutil.rmtree(private)


def test_a_name_that_is_not_an_identifier_is_refused(postgres_cluster):
    with pytest.raises(PostgresError, match=r"'vd; DROP' is not a plain"):
        postgres_cluster.create_database("vd; DROP")


CHILD = """
import json, os, signal, sys
sys.path.insert(0, {repo!r})
from tests.postgres_cluster import PostgresCluster
cluster = PostgresCluster(parent_dir={parent!r}).start()
print(json.dumps([str(cluster.base_dir), cluster.pid]), flush=True)
if sys.argv[1] == "kill":
    os.kill(os.getpid(), signal.SIGKILL)
"""


def run_child(how: str, parent_dir: pathlib.Path) -> tuple[pathlib.Path, int]:
    child = subprocess.run(
        [sys.executable, "-c", CHILD.format(repo=str(REPO),
                                            parent=str(parent_dir)), how],
        capture_output=True, text=True, timeout=60)
    assert child.stdout, child.stderr
    base, pid = json.loads(child.stdout.splitlines()[0])
    return pathlib.Path(base), pid


def wait_gone(pid: int, seconds: float = 60) -> bool:
    """Whether ``pid`` is gone within ``seconds`` (generous: a busy
    machine is slow, not wrong)."""
    deadline = time.monotonic() + seconds
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not alive(pid)


def test_a_process_that_exits_without_stop_takes_its_cluster(bindir,
                                                             parent_dir):
    base, pid = run_child("exit", parent_dir)

    assert wait_gone(pid), f"pid {pid} still runs after its process exited"
    assert processes_in(base) == []
    assert not base.exists()


def test_a_killed_process_takes_its_server_down(bindir, parent_dir):
    base, pid = run_child("kill", parent_dir)

    try:
        # SIGKILL runs no finalizer: the postmaster's parent-death signal
        # (SIGQUIT, immediate shutdown) is what stops it.
        assert wait_gone(pid), f"pid {pid} survived SIGKILL"
        deadline = time.monotonic() + 60
        while processes_in(base) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert processes_in(base) == []
    finally:  # if not, this test must not leave the server running
        for leftover in processes_in(base):
            os.kill(leftover, signal.SIGKILL)


# -- when PostgreSQL is missing ----------------------------------------------


@pytest.mark.parametrize(("in_ci", "root", "apt", "outcome"), [
    (False, False, True, pytest.skip.Exception),  # cannot install it
    (False, True, False, pytest.skip.Exception),  # root, but not Debian
    (False, True, True, pytest.fail.Exception),  # ./run setup would have
    (True, False, True, pytest.fail.Exception),  # CI installs it
])
def test_missing_postgres_skips_only_where_it_cannot_be_installed(
        in_ci, root, apt, outcome, monkeypatch):
    monkeypatch.setattr(pgc, "find_bindir", lambda: None)

    with pytest.raises(outcome) as caught:
        pgc.require_postgres(in_ci, root=root, apt=apt)

    assert "PostgreSQL's server is not installed" in str(caught.value)
    assert "./run setup" in str(caught.value)


def test_an_installed_postgres_is_found(bindir):
    assert pgc.require_postgres(True) == bindir
    assert (bindir / "initdb").is_file() and (bindir / "postgres").is_file()
