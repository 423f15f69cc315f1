"""Fixtures for tests against real libvirt: one ``qemu:///embed`` per session.

libvirt allows one embed root per process, so every real test shares it.
Skipped when libvirt's QEMU driver or a qemu-system binary is missing,
except under CI, where the bootstrap installs both and a skip would hide
a broken install.
"""

from __future__ import annotations

import pytest

from tests.postgres_cluster import postgres_cluster  # noqa: F401
from virtdriver.drivers.libvirt import connection
from virtdriver.drivers.libvirt.host import read_host


@pytest.fixture(scope="session")
def embed_uri(in_ci, virtdriver_state_dir):
    missing = [what for what, found in (
        ("libvirt's QEMU driver module", connection.find_qemu_driver()),
        ("a qemu-system binary", connection.find_qemu_binary())) if not found]
    if missing:
        message = (f"qemu:///embed needs {' and '.join(missing)}; "
                   "`./run setup` as root installs them")
        if in_ci:
            pytest.fail(message)
        pytest.skip(message)
    root = virtdriver_state_dir / "embed"
    connection.prepare_embed_root(root)
    return connection.embed_uri(root)


@pytest.fixture(scope="session")
def reading(embed_uri):
    conn, _ = connection.open_connection(embed_uri)
    try:
        return read_host(conn, embed_uri)
    finally:
        conn.close()


@pytest.fixture(scope="session")
def nodedev_daemon(in_ci):
    """A private libvirtd with only the node-device driver (see
    tests/nodedev_daemon.py); skipped (failed under CI) where libvirtd or
    its node-device driver is not installed."""
    import shutil
    import tempfile

    from tests.nodedev_daemon import DaemonUnavailable, NodedevDaemon

    # Not under tmp_path_factory: the daemon runs as nobody when we are
    # root, and pytest's base directory is root's alone.
    workdir = tempfile.mkdtemp(prefix="virtdriver-nodedev-")
    daemon = NodedevDaemon(workdir)
    try:
        daemon.start()
    except DaemonUnavailable as exc:
        shutil.rmtree(workdir, ignore_errors=True)
        if in_ci:
            pytest.fail(str(exc))
        pytest.skip(str(exc))
    try:
        yield daemon
    finally:
        daemon.stop()
        shutil.rmtree(workdir, ignore_errors=True)
