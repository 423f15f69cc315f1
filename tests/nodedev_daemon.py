"""A private libvirt daemon with only the node-device driver, for tests.

``qemu:///embed`` has no node-device API; the real one is a daemon's.
:class:`NodedevDaemon` starts Debian 12's monolithic ``libvirtd`` with
``LIBVIRT_DRIVER_DIR`` holding only ``libvirt_driver_nodedev.so``, its own
sockets, config, pid file and log in a scratch directory: no systemd, no
dbus, no system socket touched.  It lists this machine's real PCI
functions.  Stopped by its own pid (SIGTERM, then SIGKILL).  The fixture
``nodedev_daemon`` (tests/real/conftest.py) gives one per session; it
skips (fails under CI) when libvirtd or the driver module is missing.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import signal
import subprocess
import sys
import time

#: Where Debian's libvirt-daemon puts its connection drivers.
DRIVER_DIRS = ("/usr/lib/x86_64-linux-gnu/libvirt/connection-driver",
               "/usr/lib/aarch64-linux-gnu/libvirt/connection-driver",
               "/usr/lib64/libvirt/connection-driver",
               "/usr/lib/libvirt/connection-driver")
DRIVER = "libvirt_driver_nodedev.so"
#: Generous: the daemon answers in ~0.1 s here, a loaded machine is slower.
START_TIMEOUT = 60.0
STOP_TIMEOUT = 30.0


class DaemonUnavailable(Exception):
    """libvirtd or its node-device driver is not installed here."""


def find_driver() -> pathlib.Path | None:
    """The node-device driver module, or ``None``."""
    dirs = list(DRIVER_DIRS)
    try:
        libdir = subprocess.run(
            ["pkg-config", "--variable=libdir", "libvirt"], check=True,
            capture_output=True, text=True, timeout=30).stdout.strip()
        if libdir:
            dirs.insert(0, f"{libdir}/libvirt/connection-driver")
    except (OSError, subprocess.SubprocessError):
        pass
    for directory in dirs:
        path = pathlib.Path(directory) / DRIVER
        if path.is_file():
            return path
    return None


def find_libvirtd() -> str | None:
    """The ``libvirtd`` binary, or ``None``."""
    return shutil.which("libvirtd") or next(
        (p for p in ("/usr/sbin/libvirtd",) if os.access(p, os.X_OK)), None)


class NodedevDaemon:
    """One private node-device daemon in ``workdir`` (created, mode 0700).

    Attributes:
        uri: the URI that reaches it (``nodedev:///session?socket=...``;
            ``nodedev:///system?...`` if root had to run it as root).
        pid: the daemon's process id once started.
    """

    def __init__(self, workdir: pathlib.Path) -> None:
        self.workdir = pathlib.Path(workdir)
        self.pid: int | None = None
        self.uri = ""

    def start(self) -> NodedevDaemon:
        """Start the daemon and wait until its socket answers.

        As root the daemon runs as ``nobody``, in session mode: a root
        libvirtd's node-device driver takes the machine-wide
        ``/run/libvirt/nodedev/driver.pid``, so two could not run at once
        (parallel tests, another user's daemon).  Session mode keeps every
        file in ``workdir``.

        Raises:
            DaemonUnavailable: libvirtd or the driver module is missing.
            RuntimeError: it did not start; the message holds its log.
        """
        binary, driver = find_libvirtd(), find_driver()
        if binary is None or driver is None:
            missing = " and ".join(what for what, found in (
                ("libvirtd", binary), (DRIVER, driver)) if found is None)
            raise DaemonUnavailable(
                f"a private node-device daemon needs {missing} (Debian "
                "package libvirt-daemon; `./run setup` as root installs it)")
        w = self.workdir
        w.mkdir(mode=0o700, parents=True, exist_ok=True)
        for sub in ("run", "drv", "log", "home", "xdg"):
            (w / sub).mkdir(mode=0o700, exist_ok=True)
        link = w / "drv" / DRIVER
        if not link.is_symlink():
            link.symlink_to(driver)
        env = {"PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/bin"),
               "LIBVIRT_DRIVER_DIR": str(w / "drv"),
               "HOME": str(w / "home"), "XDG_RUNTIME_DIR": str(w / "xdg"),
               "XDG_CONFIG_HOME": str(w / "xdg" / "config"),
               "XDG_CACHE_HOME": str(w / "xdg" / "cache")}
        sockets = (w / "run" / "libvirt-sock",
                   w / "xdg" / "libvirt" / "libvirt-sock")
        config = w / "libvirtd.conf"
        config.write_text(
            f'unix_sock_dir = "{w / "run"}"\n'
            "listen_tls = 0\nlisten_tcp = 0\n"
            'auth_unix_ro = "none"\nauth_unix_rw = "none"\n'
            f'log_outputs = "1:file:{w / "log" / "libvirtd.log"}"\n',
            encoding="utf-8")
        config.chmod(0o600)
        pid_file = w / "libvirtd.pid"
        pid_file.unlink(missing_ok=True)
        user = _unprivileged() if os.geteuid() == 0 else None
        if user is not None:
            for path in (w, *w.rglob("*")):
                os.chown(path, user[0], user[1], follow_symlinks=False)
        result = subprocess.run(
            [binary, "--daemon", "--config", str(config),
             "--pid-file", str(pid_file)],
            env=env, capture_output=True, text=True, timeout=START_TIMEOUT,
            **({} if user is None else
               {"user": user[0], "group": user[1], "extra_groups": []}))
        if result.returncode != 0:
            raise RuntimeError(f"libvirtd did not start (exit "
                               f"{result.returncode}): {result.stderr}"
                               f"{self.log_tail()}")
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.pid is None and pid_file.is_file():
                text = pid_file.read_text(encoding="utf-8").strip()
                self.pid = int(text) if text.isdigit() else None
            if self.pid is not None:
                socket = next((p for p in sockets if p.exists()), None)
                if socket is not None:
                    mode = "session" if user or os.geteuid() else "system"
                    self.uri = f"nodedev:///{mode}?socket={socket}"
                    return self
                if not _alive(self.pid):
                    break
            time.sleep(0.05)
        self.stop()
        where = " or ".join(map(str, sockets))
        raise RuntimeError(f"libvirtd gave no socket at {where}"
                           f"{self.log_tail()}")

    def stop(self) -> None:
        """Stop the daemon by its pid: SIGTERM, then SIGKILL if it stays."""
        pid, self.pid = self.pid, None
        if pid is None:
            return
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + STOP_TIMEOUT
        while time.monotonic() < deadline:
            if not _alive(pid):
                return
            time.sleep(0.05)
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def log_tail(self, lines: int = 20) -> str:
        """The end of the daemon's log, for an error message."""
        log = self.workdir / "log" / "libvirtd.log"
        try:
            text = log.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return "\nlibvirtd log:\n" + "\n".join(text.splitlines()[-lines:])


def _unprivileged() -> tuple[int, int] | None:
    """uid and gid of ``nobody`` (the daemon's user when we are root)."""
    import pwd

    try:
        entry = pwd.getpwnam("nobody")
    except KeyError:
        return None
    return entry.pw_uid, entry.pw_gid


def _alive(pid: int) -> bool:
    """Whether ``pid`` still runs (a zombie counts as gone)."""
    try:
        stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


if __name__ == "__main__":  # manual check: start, print the URI, stop
    import tempfile

    daemon = NodedevDaemon(pathlib.Path(tempfile.mkdtemp())).start()
    print(daemon.uri, daemon.pid)
    daemon.stop()
    sys.exit(0)
