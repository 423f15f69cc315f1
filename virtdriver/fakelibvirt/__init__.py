"""A stand-in for the ``libvirt`` module, so the real libvirt driver runs
in tests without a hypervisor.

It answers the calls :mod:`virtdriver.drivers.libvirt` makes from a
:class:`HostDocuments` (capabilities, domain capabilities, CPU map,
versions, node devices), with libvirt's constants and libvirt's errors,
runs domains on it (:mod:`.domain_api`, :mod:`.domain`, :mod:`.guests`,
events through :mod:`.event_loop`), raises ``VIR_ERR_NO_SUPPORT`` for every
other call libvirt-python has (:mod:`.api_table`), and lets a test inject
faults, drop connections and take CPUs offline::

    from virtdriver import fakelibvirt
    host = fakelibvirt.register_host("h1", documents)
    with fakelibvirt.use_fakelibvirt():
        driver = LibvirtDriver(uri="fake:///h1")   # reads host "h1"
        ...

See ``docs/fakelibvirt.md``.  fakelibvirt never imports ``libvirt``.
"""

from virtdriver.fakelibvirt.connection import (
    GLOBAL_FAULTS,
    FakeHost,
    connection_for,
    get_host,
    open,  # noqa: A004 - libvirt's name
    openReadOnly,
    register_host,
    reset,
    unregister_host,
    virConnect,
)
from virtdriver.fakelibvirt import constants as _constants
from virtdriver.fakelibvirt.constants import *  # noqa: F403
from virtdriver.fakelibvirt.documents import DomainCapsKey, HostDocuments
from virtdriver.fakelibvirt.errors import libvirtError, registerErrorHandler
from virtdriver.fakelibvirt import domain_constants as _domain_constants
from virtdriver.fakelibvirt.domain_constants import *  # noqa: F403
from virtdriver.fakelibvirt.domain import virDomain
from virtdriver.fakelibvirt.event_loop import (
    virEventAddTimeout, virEventInvokeFreeCallback, virEventRegisterDefaultImpl,
    virEventRemoveTimeout, virEventRunDefaultImpl, virEventUpdateTimeout)
from virtdriver.fakelibvirt.faults import Fault
from virtdriver.fakelibvirt.module_api import (
    getVersion, openAuth, virGetLastError, virGetLastErrorCode,
    virGetLastErrorDomain, virGetLastErrorMessage, virInitialize,
    virResetLastError)
from virtdriver.fakelibvirt.nodedev import virNodeDevice
from virtdriver.fakelibvirt.nodedev_state import node_devices
from virtdriver.fakelibvirt.swap import use_fakelibvirt

#: Plan a fault for every connection (see :meth:`.FaultPlan.fail`).
fail = GLOBAL_FAULTS.fail
#: Forget the faults planned with :func:`fail`.
clear_faults = GLOBAL_FAULTS.clear

__all__ = [  # and every constant of .constants (a star import)
    "DomainCapsKey", "Fault", "FakeHost", "HostDocuments", "clear_faults",
    "connection_for", "fail", "get_host", "libvirtError", "open",
    "openReadOnly", "register_host", "registerErrorHandler", "reset",
    "unregister_host", "use_fakelibvirt", "virConnect",
    "virEventRegisterDefaultImpl", "virEventRunDefaultImpl",
    "virEventAddTimeout", "virEventUpdateTimeout", "virEventRemoveTimeout",
    "virEventInvokeFreeCallback", "getVersion", "openAuth", "virDomain",
    "virGetLastError", "virGetLastErrorCode", "virGetLastErrorDomain",
    "virGetLastErrorMessage", "virInitialize", "virResetLastError",
    "virNodeDevice", "node_devices",
    *(name for name in dir(_constants) if name.startswith("VIR_")),
    *(name for name in dir(_domain_constants) if name.startswith("VIR_")),
]


def __dir__() -> list[str]:
    """The package's names and every libvirt-python name it answers."""
    from virtdriver.fakelibvirt.api_table import CONSTANTS, MODULE_FUNCTIONS
    return sorted({*globals(), *CONSTANTS, *MODULE_FUNCTIONS})


def __getattr__(name: str):
    """Any other ``VIR_*`` constant of libvirt-python; any other module
    call of libvirt-python raises ``VIR_ERR_NO_SUPPORT`` when called."""
    from virtdriver.fakelibvirt.api_table import module_attribute
    return module_attribute(name)
