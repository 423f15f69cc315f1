"""On a shared machine another local user cannot steer virtdriver's state:
the state directory is created private whatever the umask, a directory or
file others could write is refused, no state file is read or written
through a link, the lock file is never truncated, and the embedded
Placement's database is 0600 (issue 19, "The machine is shared")."""

from __future__ import annotations

import contextlib
import os
import stat
import sys
import threading

import pytest

from virtdriver import cli
from virtdriver.drivers.fake import FakeDriver
from virtdriver.filelock import describe_self, exclusive_lock, read_holder
from virtdriver.placement.embedded import EmbeddedError, private_database
from virtdriver.placement.state import SyncStateFile
from virtdriver.resource_tracker.tracker import LOCK_FILE, ResourceTracker
from virtdriver.state_dir import UnsafeStateError, state_dir

VICTIM_TEXT = "root:x:0:0:root:/root:/bin/bash\n"


@contextlib.contextmanager
def umask(value: int):
    before = os.umask(value)
    try:
        yield
    finally:
        os.umask(before)


def mode(path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@pytest.fixture
def victim(tmp_path):
    """A file outside the state directory that must never change."""
    path = tmp_path / "elsewhere" / "passwd"
    path.parent.mkdir()
    path.write_text(VICTIM_TEXT)
    return path


def tracker(state, **kwargs) -> ResourceTracker:
    driver = FakeDriver("small")
    driver.init_host("compute-1")
    return ResourceTracker(driver, state_dir=state, **kwargs)


# -- the state directory ------------------------------------------------------

@pytest.mark.parametrize("euid, expected", [(1000, 0o700), (0, 0o755)])
def test_the_state_directory_and_its_parents_are_private_under_umask_000(
        tmp_path, monkeypatch, euid, expected):
    monkeypatch.setattr(os, "geteuid", lambda: euid)
    wanted = tmp_path / "new" / "deeper" / "state"

    with umask(0):
        assert state_dir(wanted) == wanted

    for path in (tmp_path / "new", tmp_path / "new" / "deeper", wanted):
        assert mode(path) == expected, path


def test_an_existing_state_directory_keeps_its_mode(tmp_path):
    chosen = tmp_path / "state"
    chosen.mkdir(mode=0o750)
    chosen.chmod(0o750)

    state_dir(chosen)

    assert mode(chosen) == 0o750


@pytest.mark.parametrize("bits", [0o777, 0o775, 0o757])
def test_a_state_directory_others_may_write_is_refused(tmp_path, bits):
    chosen = tmp_path / "state"
    chosen.mkdir()
    chosen.chmod(bits)

    with pytest.raises(UnsafeStateError) as caught:
        state_dir(chosen)

    message = str(caught.value)
    assert message.startswith(f"the state directory {chosen} is writable "
                              f"by other users (mode {bits:04o}); ")
    assert f"chmod go-w {chosen}" in message and "\n" not in message


@pytest.mark.skipif(os.geteuid() != 0, reason="chown needs root")
def test_a_state_directory_of_another_user_is_refused(tmp_path):
    chosen = tmp_path / "state"
    chosen.mkdir(mode=0o700)
    os.chown(chosen, 4242, 4242)

    with pytest.raises(UnsafeStateError, match=(
            rf"the state directory {chosen} belongs to another user \(uid "
            r"4242, mode 0700\)")):
        state_dir(chosen)


def test_the_command_refuses_a_world_writable_state_directory_exit_2(
        tmp_path, monkeypatch, capsys):
    chosen = tmp_path / "state"
    chosen.mkdir()
    chosen.chmod(0o777)
    monkeypatch.setenv("VIRTDRIVER_STATE_DIR", str(chosen))

    status = cli.main(["claims", "--driver", "fake"])

    err = capsys.readouterr().err
    assert status == 2
    assert err.splitlines() == [
        f"virtdriver: the state directory {chosen} is writable by other "
        f"users (mode 0777); check its content, then run chmod go-w "
        f"{chosen}; or use another state directory"]
    assert not (chosen / LOCK_FILE).exists()


# -- the lock file ------------------------------------------------------------

def test_a_lock_file_planted_as_a_link_is_refused_and_its_target_kept(
        tmp_path, victim):
    state = tmp_path / "state"
    state.mkdir()
    (state / LOCK_FILE).symlink_to(victim)

    with pytest.raises(UnsafeStateError, match=(
            rf"the lock file {state / LOCK_FILE} is a symbolic link \(to "
            rf"{victim}\); virtdriver does not follow links")):
        tracker(state).update_all()

    assert victim.read_text() == VICTIM_TEXT


def test_the_command_refuses_a_planted_lock_link_exit_2(
        tmp_path, monkeypatch, capsys, victim):
    state = tmp_path / "state"
    state.mkdir()
    (state / LOCK_FILE).symlink_to(victim)
    monkeypatch.setenv("VIRTDRIVER_STATE_DIR", str(state))

    status = cli.main(["sync", "--driver", "fake", "--dry-run"])

    err = capsys.readouterr().err.splitlines()
    assert status == 2
    assert len(err) == 1 and "is a symbolic link" in err[0]
    assert victim.read_text() == VICTIM_TEXT


def test_a_lock_file_hard_linked_elsewhere_is_refused(tmp_path, victim):
    lock = tmp_path / "state" / LOCK_FILE
    lock.parent.mkdir()
    os.link(victim, lock)

    with pytest.raises(UnsafeStateError, match="has 2 hard links"):
        with exclusive_lock(lock, purpose="the test"):
            pass

    assert victim.read_text() == VICTIM_TEXT


def test_the_lock_file_is_0600_and_never_truncated(tmp_path):
    lock = tmp_path / "state" / LOCK_FILE
    with umask(0), exclusive_lock(lock, purpose="the test"):
        assert mode(lock) == 0o600
        assert mode(lock.parent) in (0o700, 0o755)
        assert read_holder(lock).startswith(f"pid {os.getpid()} (")
    # An earlier, longer holder's text is overwritten, not truncated away.
    lock.write_text("x" * 400 + "\n")
    with exclusive_lock(lock, purpose="the test"):
        assert read_holder(lock).startswith(f"pid {os.getpid()} (")
    assert lock.stat().st_size == 401
    assert read_holder(lock) == ""          # released: no holder


def test_a_lock_in_a_directory_others_may_write_is_refused(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)

    with pytest.raises(UnsafeStateError, match=(
            r"the lock file's directory .* is writable by other users "
            r"\(mode 1777\)")):
        with exclusive_lock(shared / LOCK_FILE, purpose="the test"):
            pass
    assert not (shared / LOCK_FILE).exists()


def test_the_recorded_command_line_hides_a_url_password(monkeypatch,
                                                        tmp_path):
    monkeypatch.setattr(sys, "argv", [
        "/usr/bin/virtdriver", "sync", "--placement-url",
        "http://admin:s3cr/et@placement:8778"])
    assert "s3cr" not in describe_self()
    assert "http://***@placement:8778" in describe_self()

    lock = tmp_path / LOCK_FILE
    with exclusive_lock(lock, purpose="the test"):
        assert "s3cr" not in lock.read_text()


# -- the state files ----------------------------------------------------------

@pytest.mark.parametrize("name", ["ledger-fake.json", "claims-fake.json",
                                  "provider-config-fake.json"])
def test_a_state_file_that_is_a_link_is_not_followed(tmp_path, victim, name):
    state = tmp_path / "state"
    state.mkdir()
    (state / name).symlink_to(victim)
    config = tmp_path / "provider_config"
    config.mkdir()

    with pytest.raises(UnsafeStateError, match=(
            rf"the state file {state / name} is a symbolic link")):
        found = tracker(state, provider_config=config)
        found.update_all()
        found.claims()

    assert victim.read_text() == VICTIM_TEXT


def test_a_state_file_others_may_write_is_refused_naming_its_mode(tmp_path):
    state = tmp_path / "state"
    tracker(state).update_all()
    ledger = state / "ledger-fake.json"
    ledger.chmod(0o666)

    with pytest.raises(UnsafeStateError, match=(
            rf"the state file {ledger} is writable by other users \(mode "
            r"0666\)")):
        tracker(state).update_all()


def test_a_fifo_as_a_state_file_is_refused_without_hanging(tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    fifo = state / "ledger-fake.json"
    os.mkfifo(fifo)
    outcome: list[BaseException | None] = []

    def update():
        try:
            tracker(state).update_all()
            outcome.append(None)
        except BaseException as exc:  # noqa: BLE001 (reported below)
            outcome.append(exc)

    worker = threading.Thread(target=update, daemon=True)
    worker.start()
    worker.join(timeout=60)
    if worker.is_alive():       # blocked opening the FIFO: unblock, fail
        with open(fifo, "w"):
            pass
        worker.join(timeout=60)
        pytest.fail("reading a FIFO state file blocked")
    [error] = outcome
    assert isinstance(error, UnsafeStateError), error
    assert "is not a regular file" in str(error)


def test_state_files_are_written_0600_under_umask_000(tmp_path):
    state = tmp_path / "state"
    config = tmp_path / "provider_config"
    config.mkdir()
    (config / "site.yaml").write_text(
        "meta: {schema_version: '1.0'}\nproviders:\n"
        "  - identification: {uuid: $COMPUTE_NODE}\n"
        "    traits: {additional: [CUSTOM_RACK_7]}\n")

    with umask(0):
        tracker(state, provider_config=config).update_all()

    assert {p.name: mode(p) for p in state.iterdir()} == {
        "ledger-fake.json": 0o600, "provider-config-fake.json": 0o600,
        "ledger.key": 0o600, LOCK_FILE: 0o600}


def test_the_sync_state_is_not_read_through_a_link(tmp_path, victim):
    state = tmp_path / "state"
    state.mkdir()
    (state / "placement-sync.json").symlink_to(victim)

    with pytest.raises(UnsafeStateError, match="is a symbolic link"):
        SyncStateFile(state).load()


# -- the embedded Placement's database ----------------------------------------

def test_the_database_is_created_0600_and_an_older_one_tightened(tmp_path):
    fresh = tmp_path / "a" / "placement.sqlite"
    private_database(fresh)
    assert mode(fresh) == 0o600 and fresh.stat().st_size == 0

    older = tmp_path / "placement.sqlite"
    older.write_bytes(b"")
    older.chmod(0o644)
    journal = tmp_path / "placement.sqlite-journal"
    journal.write_bytes(b"")
    journal.chmod(0o644)
    private_database(older)
    assert mode(older) == mode(journal) == 0o600


def test_a_database_planted_as_a_link_is_refused(tmp_path, victim):
    db = tmp_path / "placement.sqlite"
    db.symlink_to(victim)

    with pytest.raises(EmbeddedError, match="is a symbolic link"):
        private_database(db)
    assert victim.read_text() == VICTIM_TEXT


# -- credentials in a Placement URL -------------------------------------------

@pytest.mark.parametrize("url", [
    "http://admin:s3cret@placement.example:8778",
    "http://admin:s3cr/et@placement.example:8778",
    "admin:s3cret@placement.example:8778"])
def test_a_placement_url_with_a_password_is_refused_and_never_shown(
        tmp_path, monkeypatch, capsys, url):
    state = tmp_path / "state"
    monkeypatch.setenv("VIRTDRIVER_STATE_DIR", str(state))

    status = cli.main(["sync", "--driver", "fake", "--placement-url", url])

    captured = capsys.readouterr()
    assert status == 2 and captured.out == ""
    assert "s3cr" not in captured.err
    [line] = captured.err.splitlines()
    assert "***@placement.example:8778" in line
    assert "carries a user name or password" in line
    assert "[placement] auth options" in line
    assert not state.exists() or not any(
        "s3cr" in p.read_text(errors="replace") for p in state.iterdir()
        if p.is_file())


def test_an_endpoint_override_with_a_password_is_refused(
        tmp_path, monkeypatch, capsys):
    conf = tmp_path / "virtdriver.conf"
    conf.write_text("[placement]\nendpoint_override = "
                    "http://admin:s3cret@placement.example:8778\n")
    monkeypatch.setenv("VIRTDRIVER_STATE_DIR", str(tmp_path / "state"))

    status = cli.main(["sync", "--driver", "fake", "--config-file",
                       str(conf)])

    captured = capsys.readouterr()
    assert status == 2 and "s3cret" not in captured.out + captured.err
    assert ("[placement] endpoint_override = ***@placement.example:8778 "
            "carries a user name or password") in captured.err


def test_a_client_never_records_a_url_password():
    from virtdriver.placement.client import PlacementClient

    client = PlacementClient.from_url("http://u:s3cret@127.0.0.1:9")
    assert client.endpoint == "http://***@127.0.0.1:9"


# -- the libvirt embed root ---------------------------------------------------

@pytest.mark.skipif(os.geteuid() != 0, reason="qemu.conf is root's case")
def test_the_embed_root_is_created_private_and_its_qemu_conf_not_linked(
        tmp_path, monkeypatch, victim):
    from virtdriver.drivers.libvirt import connection

    monkeypatch.setattr(connection, "_qemu_user_can_use_kvm", lambda: False)
    root = tmp_path / "state" / "embed"
    with umask(0):
        connection.prepare_embed_root(root)
    assert mode(root) == mode(root / "etc") == 0o755
    assert mode(root / "etc" / "qemu.conf") == 0o644

    planted = tmp_path / "other" / "embed"
    (planted / "etc").mkdir(parents=True)
    (planted / "etc" / "qemu.conf").symlink_to(victim)
    connection.prepare_embed_root(planted)
    assert victim.read_text() == VICTIM_TEXT
