"""Open a libvirt connection, choosing the URI and saying why.

Without an explicit URI the choice is, in order:

1. ``qemu:///system`` when a libvirt daemon's socket exists and the daemon
   answers within a few seconds;
2. ``qemu:///embed?root=<state dir>/embed`` when libvirt's QEMU driver module
   and a ``qemu-system-*`` binary are installed (libvirt runs in-process, no
   daemon needed);
3. ``test:///default``, libvirt's built-in fake host, otherwise.

``qemu:///embed`` needs libvirt's event loop running in this process;
:func:`open_connection` starts it (once) for every URI.  libvirt allows one
embed root per process, so the first embed root opened is the one used.

libvirt's embedded QEMU driver locks the root's pid file on the first open
and keeps it until the process exits (closing the connection does not
release it), and a process whose first open failed cannot open it again.
So before opening an embed root a process takes ``<root>.lock`` with
:func:`virtdriver.filelock.exclusive_lock` and keeps it for the rest of its
life: several processes on one root take turns instead of failing
(:func:`hold_embed_root`).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import glob
import os
import pwd
import re
import stat
import threading
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import libvirt

from virtdriver import filelock
# Re-exported: callers have always found state_dir() here.
from virtdriver.state_dir import (
    StateDirError, UnsafeStateError, make_dirs, state_dir)


SYSTEM_URI = "qemu:///system"
TEST_URI = "test:///default"
DAEMON_SOCKETS = ("/run/libvirt/virtqemud-sock", "/run/libvirt/libvirt-sock")
QEMU_DRIVER_GLOBS = (
    "/usr/lib/*/libvirt/connection-driver/libvirt_driver_qemu.so",
    "/usr/lib*/libvirt/connection-driver/libvirt_driver_qemu.so",
)
QEMU_BINARY_GLOB = "/usr/bin/qemu-system-*"
#: Seconds to wait for a daemon that has a socket but may be wedged.
DAEMON_TIMEOUT = 5.0
#: The user libvirt's QEMU driver runs QEMU as when privileged.
QEMU_USER = "libvirt-qemu"
#: Seconds a process waits for another process's hold on an embed root.
#: Longer than filelock's default: a holder on a cold root spends ~8 s
#: probing QEMU, and before :func:`on_probe_cpu` every holder could (six
#: queued reports took ~50 s here).
EMBED_LOCK_TIMEOUT = 120.0
#: libvirt's QEMU driver pid file, relative to the embed root.
EMBED_PID_FILE = Path("run") / "qemu" / "driver.pid"
#: Where Linux lists the online CPUs ("0-3,8"); see :func:`on_probe_cpu`.
ONLINE_CPUS = "/sys/devices/system/cpu/online"
_PID_FILE_ERROR = re.compile(r"Failed to acquire pid file '([^']+)'")


class LibvirtConnectionError(Exception):
    """libvirt could not be opened at ``uri``; the message says what to do."""

    def __init__(self, uri: str, detail: str, hint: str) -> None:
        self.uri = uri
        self.detail = detail
        self.hint = hint
        super().__init__(f"cannot open libvirt at {uri}: {detail}\n  {hint}")


@dataclass(frozen=True)
class URIChoice:
    """The URI opened and, in words, why it was chosen."""

    uri: str
    reason: str


def embed_uri(root: Path | str) -> str:
    """The ``qemu:///embed`` URI for the state tree at ``root``."""
    return f"qemu:///embed?root={root}"


_loop_lock = threading.Lock()
_loop_started = False


def ensure_event_loop() -> None:
    """Register libvirt's default event loop and run it in a daemon thread.

    Must happen before the first connection is opened; ``qemu:///embed``
    does not work without it.  Safe to call more than once.
    """
    global _loop_started
    with _loop_lock:
        if _loop_started:
            return
        libvirt.virEventRegisterDefaultImpl()
        # libvirt prints every error to stderr unless a handler is set; the
        # errors reach callers as libvirtError anyway.
        libvirt.registerErrorHandler(lambda _ctx, _err: None, None)
        thread = threading.Thread(target=_run_event_loop,
                                  name="libvirt-event-loop", daemon=True)
        thread.start()
        _loop_started = True


def _run_event_loop() -> None:
    while True:
        libvirt.virEventRunDefaultImpl()


def open_connection(uri: str | None = None, *,
                    lock_timeout: float = EMBED_LOCK_TIMEOUT,
                    ) -> tuple[libvirt.virConnect, URIChoice]:
    """Open libvirt read-write at ``uri``, or at the best URI for this host.

    Args:
        uri: the URI to open; ``None`` chooses one (see the module's doc;
            the embed root is ``state_dir() / "embed"``).
        lock_timeout: seconds to wait for another process that holds the
            embed root (see :func:`hold_embed_root`).

    Returns the connection and the :class:`URIChoice` that explains it.

    Raises:
        LibvirtConnectionError: the chosen URI did not open, the state
            directory is unusable, or another process kept the embed root.
    """
    ensure_event_loop()
    if uri:
        return _open(uri, lock_timeout), URIChoice(uri, "given with --uri")

    socket = next((s for s in DAEMON_SOCKETS if is_socket(s)), None)
    if socket:
        try:
            conn = _open_with_timeout(SYSTEM_URI, DAEMON_TIMEOUT)
            return conn, URIChoice(
                SYSTEM_URI, f"a libvirt daemon answered on {socket}")
        except LibvirtConnectionError as exc:
            no_daemon = f"daemon socket {socket} did not answer ({exc.detail})"
    else:
        no_daemon = "no libvirt daemon socket"

    driver, binary = find_qemu_driver(), find_qemu_binary()
    if driver and binary:
        try:
            root = state_dir() / "embed"
        except UnsafeStateError:
            raise               # bad input (2), not an unreachable libvirt
        except StateDirError as exc:
            raise LibvirtConnectionError(
                "qemu:///embed", exc.problem, exc.hint) from exc
        # Before prepare_embed_root: another process may be using the root.
        hold_embed_root(root, timeout=lock_timeout)
        prepare_embed_root(root)
        uri = embed_uri(root)
        return _open(uri, lock_timeout), URIChoice(
            uri, f"{no_daemon}; QEMU driver installed ({driver}, {binary})")

    missing = "QEMU driver module" if not driver else "qemu-system binary"
    return _open(TEST_URI), URIChoice(
        TEST_URI, f"neither: {no_daemon}, and no {missing} for "
                  "qemu:///embed; this is libvirt's built-in fake host")


#: The URI scheme fakelibvirt serves (``fake:///<name>``); the real
#: libvirt has no such driver.
FAKE_SCHEME = "fake"


def _check_not_fake(uri: str) -> None:
    """Refuse a ``fake:///`` URI when ``libvirt`` here is the real module:
    the fakelibvirt swap did not reach this code."""
    if urllib.parse.urlsplit(uri).scheme != FAKE_SCHEME:
        return
    if getattr(libvirt, "__name__", "").startswith("virtdriver.fakelibvirt"):
        return
    raise LibvirtConnectionError(
        uri, "a fakelibvirt URI reached the real libvirt (fakelibvirt is "
        f"not swapped in for {__name__})",
        "open it inside virtdriver.fakelibvirt.use_fakelibvirt() or the "
        "pytest fixture `fakelibvirt` (the ini option fakelibvirt_packages "
        "adds your packages to virtdriver's), or give a real libvirt URI")


def _open(uri: str, lock_timeout: float = EMBED_LOCK_TIMEOUT
          ) -> libvirt.virConnect:
    _check_not_fake(uri)
    root = embed_root(uri)
    if root is not None:
        hold_embed_root(root, timeout=lock_timeout)
    try:
        if root is None:
            return libvirt.open(uri)
        with on_probe_cpu():  # see on_probe_cpu: warm stays warm
            return libvirt.open(uri)
    except libvirt.libvirtError as exc:
        message = _message(exc)
        busy = _PID_FILE_ERROR.search(message)
        if busy:  # a process that does not take our lock has the root
            pid_file = Path(busy.group(1))
            raise _root_busy(uri, root or pid_file.parents[2],
                             pid_file) from exc
        raise LibvirtConnectionError(uri, message, _hint(uri)) from exc


def online_cpus() -> list[int]:
    """The online CPUs, lowest first (every CPU when Linux does not say)."""
    try:
        return _cpu_list(Path(ONLINE_CPUS).read_text())
    except (OSError, ValueError):
        return list(range(os.cpu_count() or 1))


@contextlib.contextmanager
def on_probe_cpu() -> Iterator[int | None]:
    """While inside, this thread runs on one CPU only: the lowest online
    CPU this process may use, whatever ``taskset`` it was started under
    (yields it; ``None`` where affinity cannot be set).

    Why: libvirt 9.0's embedded QEMU driver reads the host's CPUID once,
    when it starts (in the thread that opens the first connection), and
    stores it in each cached QEMU capabilities file; a later process whose
    reading differs throws the cache away and probes every qemu-system
    binary again (~8 s; "host cpuid changed" in libvirt's debug log).
    KVM answers that CPUID on the CPU the thread runs on, and leaf 0x1f
    carries that CPU's x2APIC id, so two CPUs never agree.  On one fixed
    CPU every process reads the same CPUID, and a warm cache stays warm
    whichever CPU the process was started on.  (libvirt has no setting
    that skips this check.)  The caller's affinity is restored after,
    and so is that of threads libvirt started meanwhile (they inherit
    it); where affinity cannot be set nothing changes.
    """
    if not hasattr(os, "sched_setaffinity"):
        yield None
        return
    before = os.sched_getaffinity(0)
    threads = _threads()
    cpu = next(filter(_run_on, online_cpus()), None)
    if cpu is None:
        yield None
        return
    try:
        yield cpu
    finally:
        os.sched_setaffinity(0, before)
        for tid in _threads() - threads:
            with contextlib.suppress(OSError):  # it ended meanwhile
                os.sched_setaffinity(tid, before)


def _cpu_list(text: str) -> list[int]:
    cpus: list[int] = []
    for part in filter(None, text.strip().split(",")):
        first, _, last = part.partition("-")
        cpus.extend(range(int(first), int(last or first) + 1))
    return cpus


def _run_on(cpu: int) -> bool:
    try:
        os.sched_setaffinity(0, {cpu})
    except OSError:  # outside this process's cgroup cpuset
        return False
    return True


def _threads() -> set[int]:
    try:
        return {int(tid) for tid in os.listdir("/proc/self/task")}
    except OSError:
        return set()


def _open_with_timeout(uri: str, timeout: float) -> libvirt.virConnect:
    result: dict[str, object] = {}

    def attempt() -> None:
        try:
            result["conn"] = _open(uri)
        except LibvirtConnectionError as exc:
            result["error"] = exc

    thread = threading.Thread(target=attempt, name=f"open {uri}", daemon=True)
    thread.start()
    thread.join(timeout)
    if "conn" in result:
        return result["conn"]  # type: ignore[return-value]
    if "error" in result:
        raise result["error"]  # type: ignore[misc]
    raise LibvirtConnectionError(uri, f"no answer within {timeout:g} s",
                                 _hint(uri))


def _message(exc: libvirt.libvirtError) -> str:
    return exc.get_error_message() or str(exc)


def _hint(uri: str) -> str:
    if uri.startswith("qemu:///embed"):
        return ("check that libvirt's QEMU driver and qemu-system are "
                f"installed and the '{QEMU_USER}' user exists (as root, "
                "`./run setup` does both), or pass --uri test:///default")
    if uri.startswith("qemu:///system"):
        return ("check that virtqemud or libvirtd is running and that you "
                "may use its socket (root, or the libvirt group), or pass "
                "--uri test:///default")
    return "check the URI (see https://libvirt.org/uri.html)"


def embed_root(uri: str) -> Path | None:
    """The ``root`` of a ``qemu:///embed?root=...`` URI; ``None`` for any
    other URI."""
    parts = urllib.parse.urlsplit(uri)
    if parts.scheme != "qemu" or parts.netloc or parts.path != "/embed":
        return None
    for param in parts.query.split("&"):
        name, _, value = param.partition("=")
        if name == "root" and value:
            return Path(urllib.parse.unquote(value))
    return None


def embed_lock_path(root: Path | str) -> Path:
    """The lock file of the embed root ``root``: ``<root>.lock``, beside it
    (libvirt owns what is inside)."""
    return Path(os.path.abspath(root) + ".lock")


_embed_guard = threading.Lock()
#: Embed roots this process holds, each until the process exits.
_embed_held: dict[str, contextlib.ExitStack] = {}


def hold_embed_root(root: Path | str, *,
                    timeout: float = EMBED_LOCK_TIMEOUT) -> None:
    """Keep other processes off the embed root ``root`` until this process
    exits.

    Takes ``<root>.lock``, waiting up to ``timeout`` seconds for a process
    that holds it, then waits (within the same time) for libvirt's pid file
    in the root to be free, since a holder that is exiting, or one that is
    not virtdriver, may still have it; libvirt is never asked to open a
    root that another process holds, because a process whose first embed
    open failed cannot open one again.  A root this process already holds
    returns at once.

    Raises:
        LibvirtConnectionError: another process kept the root for
            ``timeout`` seconds, or the lock file cannot be opened.
    """
    key = os.path.abspath(root)
    uri = embed_uri(key)
    with _embed_guard:
        if key in _embed_held:
            return
        deadline = time.monotonic() + timeout
        hold = contextlib.ExitStack()
        try:
            hold.enter_context(filelock.exclusive_lock(
                embed_lock_path(key), purpose=f"the libvirt embed root {key}",
                timeout=timeout))
        except (filelock.LockTimeout, filelock.LockError) as exc:
            raise LibvirtConnectionError(uri, str(exc), _OWN_ROOT) from exc
        try:
            _wait_for_pid_file(Path(key), uri, deadline)
        except BaseException:
            hold.close()
            raise
        _embed_held[key] = hold


_OWN_ROOT = ("or give this process its own embed root: another "
             "[virtdriver] state_dir or $VIRTDRIVER_STATE_DIR")


def _wait_for_pid_file(root: Path, uri: str, deadline: float) -> None:
    pid_file = root / EMBED_PID_FILE
    pause = 0.02
    while _pid_file_locked(pid_file):
        left = deadline - time.monotonic()
        if left <= 0:
            raise _root_busy(uri, root, pid_file)
        time.sleep(min(pause, left))
        pause = min(pause * 2, 0.25)


def _pid_file_locked(pid_file: Path) -> bool:
    """Whether another process holds libvirt's lock on ``pid_file``.

    Only for a root this process has not opened: closing any descriptor of
    a file drops this process's own POSIX locks on it, libvirt's included.
    """
    try:
        fd = os.open(pid_file, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False  # absent (a fresh root), or libvirt will say what is
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)  # libvirt's byte
    except OSError as exc:
        return exc.errno in (errno.EAGAIN, errno.EACCES)
    finally:
        os.close(fd)
    return False


def _root_busy(uri: str, root: Path, pid_file: Path
               ) -> LibvirtConnectionError:
    return LibvirtConnectionError(
        uri, f"another process holds the embed root {root}: libvirt's pid "
             f"file {pid_file} is locked{_pid_file_holder(pid_file)}",
        "wait for that process to finish or stop it, then run again; "
        + _OWN_ROOT)


def _pid_file_holder(pid_file: Path) -> str:
    """`` by pid 123 (python3 -m ...)`` from the pid file, or ``""``."""
    try:
        pid = int(pid_file.read_text().strip())
    except (OSError, ValueError):
        return ""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return f" by pid {pid}"
    command = raw.replace(b"\0", b" ").decode(errors="replace").strip()
    return f" by pid {pid} ({command[:200]})" if command else f" by pid {pid}"


def is_socket(path: str) -> bool:
    """Whether ``path`` exists and is a Unix socket."""
    try:
        return stat.S_ISSOCK(os.stat(path).st_mode)
    except OSError:
        return False


def find_qemu_driver() -> str | None:
    """Path of libvirt's QEMU driver module, if installed."""
    for pattern in QEMU_DRIVER_GLOBS:
        found = sorted(glob.glob(pattern))
        if found:
            return found[0]
    return None


def find_qemu_binary() -> str | None:
    """Path of the first executable ``qemu-system-*``, if any."""
    found = sorted(p for p in glob.glob(QEMU_BINARY_GLOB)
                   if os.access(p, os.X_OK))
    return found[0] if found else None


QEMU_CONF_AS_ROOT = """\
# Written by virtdriver: the '{user}' user cannot use /dev/kvm on this host,
# so libvirt 9.x would find its cached QEMU capabilities invalid on every
# call and probe every emulator again (seconds each).  QEMU started by this
# embedded driver therefore runs as root.  Delete this file to change that.
user = "root"
group = "root"
"""


def prepare_embed_root(root: Path) -> None:
    """Create the embed root; write its qemu.conf when KVM needs it."""
    conf = root / "etc" / "qemu.conf"
    if (os.path.lexists(conf) or os.geteuid() != 0
            or _qemu_user_can_use_kvm()):
        make_dirs(root)
        return
    make_dirs(conf.parent)
    # Created, never opened through a link or over another file.
    fd = os.open(conf, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                 | os.O_CLOEXEC, 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as stream:
        stream.write(QEMU_CONF_AS_ROOT.format(user=QEMU_USER))


def _qemu_user_can_use_kvm(device: str = "/dev/kvm") -> bool:
    """Whether QEMU_USER may read and write ``device`` (True if absent)."""
    try:
        st = os.stat(device)
        user = pwd.getpwnam(QEMU_USER)
    except (OSError, KeyError):
        return True
    if st.st_uid == user.pw_uid:
        wanted = stat.S_IRUSR | stat.S_IWUSR
    elif st.st_gid in os.getgrouplist(user.pw_name, user.pw_gid):
        wanted = stat.S_IRGRP | stat.S_IWGRP
    else:
        wanted = stat.S_IROTH | stat.S_IWOTH
    return st.st_mode & wanted == wanted
