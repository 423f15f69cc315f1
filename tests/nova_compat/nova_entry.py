"""virtdriver drivers that are Nova's own drivers, through the thin
:class:`virtdriver.drivers.nova_wrapper.NovaDriver` (registered by
``run_nova_drivers.py`` under the ``virtdriver.drivers`` entry point;
imported only inside the Nova venv)."""

from virtdriver.drivers.nova_wrapper import NovaDriver


class NovaFake(NovaDriver):
    """``nova.virt.fake.FakeDriver``, unchanged."""

    nova_target = "nova.virt.fake:FakeDriver"


class NovaNestedFake(NovaDriver):
    """``nova.virt.fake.MediumFakeDriverWithNestedCustomResources``."""

    nova_target = "nova.virt.fake:MediumFakeDriverWithNestedCustomResources"


class NovaReshapingFake(NovaDriver):
    """:class:`nova_reshape_driver.ReshapingFakeDriver`, a driver written
    against Nova's API that raises Nova's ``ReshapeNeeded``."""

    nova_target = "nova_reshape_driver:ReshapingFakeDriver"
