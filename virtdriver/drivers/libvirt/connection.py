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
"""

from __future__ import annotations

import glob
import os
import pwd
import stat
import threading
from dataclasses import dataclass
from pathlib import Path

import libvirt

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


def state_dir() -> Path:
    """virtdriver's state directory, created if needed.

    ``$VIRTDRIVER_STATE_DIR`` if set, else ``/var/lib/virtdriver`` for root
    and ``~/.local/state/virtdriver`` for other users.
    """
    env = os.environ.get("VIRTDRIVER_STATE_DIR")
    if env:
        path = Path(env)
    elif os.geteuid() == 0:
        path = Path("/var/lib/virtdriver")
    else:
        path = Path.home() / ".local" / "state" / "virtdriver"
    path.mkdir(parents=True, exist_ok=True)
    return path


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


def open_connection(uri: str | None = None) -> tuple[libvirt.virConnect,
                                                      URIChoice]:
    """Open libvirt read-write at ``uri``, or at the best URI for this host.

    Returns the connection and the :class:`URIChoice` that explains it.

    Raises:
        LibvirtConnectionError: the chosen URI did not open.
    """
    ensure_event_loop()
    if uri:
        return _open(uri), URIChoice(uri, "given with --uri")

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
        root = state_dir() / "embed"
        prepare_embed_root(root)
        uri = embed_uri(root)
        return _open(uri), URIChoice(
            uri, f"{no_daemon}; QEMU driver installed ({driver}, {binary})")

    missing = "QEMU driver module" if not driver else "qemu-system binary"
    return _open(TEST_URI), URIChoice(
        TEST_URI, f"neither: {no_daemon}, and no {missing} for "
                  "qemu:///embed; this is libvirt's built-in fake host")


def _open(uri: str) -> libvirt.virConnect:
    try:
        return libvirt.open(uri)
    except libvirt.libvirtError as exc:
        raise LibvirtConnectionError(uri, _message(exc), _hint(uri)) from exc


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
    if conf.exists() or os.geteuid() != 0 or _qemu_user_can_use_kvm():
        root.mkdir(parents=True, exist_ok=True)
        return
    conf.parent.mkdir(parents=True, exist_ok=True)
    conf.write_text(QEMU_CONF_AS_ROOT.format(user=QEMU_USER))


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
