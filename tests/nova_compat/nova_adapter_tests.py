"""The adapter's promises, checked with Nova's own functional-test base
(runs inside the Nova venv: ``run_nova_functional.py`` runs it in both
modes; the control shows Nova's behaviour, the virtdriver run ours).

* Nova's resource tracker still adds ``COMPUTE_NODE`` and
  ``COMPUTE_STATUS_DISABLED`` after the driver; an operator's
  ``CUSTOM_`` trait survives a periodic; a CPU trait the driver owns and
  the host lacks is taken away again.
* The compute node root carries everything (no children), with the
  allocation ratios of ``nova.conf``.
* In virtdriver mode, the driver Nova loaded is the adapter, a subclass
  of Nova's libvirt driver.
"""

from __future__ import annotations

import os

import os_resource_classes as orc
import os_traits as ost

from nova.tests.functional.libvirt import integrated_helpers


class AdapterReportingTests(
        integrated_helpers.LibvirtProviderUsageBaseTestCase):
    """Nova's periodic, Nova's Placement, the driver under test."""

    def test_tracker_traits_and_operator_traits_survive(self):
        self.start_compute()
        rp = self.host_uuid
        traits = set(self._get_provider_traits(rp))
        self.assertIn(ost.COMPUTE_NODE, traits)
        self.assertIn(ost.HW_ARCH_X86_64, traits)

        self._create_trait("CUSTOM_OPERATOR")
        # AVX512F: a CPU trait the driver owns, which the fake host lacks.
        self._set_provider_traits(rp, ["CUSTOM_OPERATOR",
                                       ost.HW_CPU_X86_AVX512F])
        self.compute.manager.reset()
        self._run_periodics()
        traits = set(self._get_provider_traits(rp))
        self.assertIn("CUSTOM_OPERATOR", traits)
        self.assertIn(ost.COMPUTE_NODE, traits)
        self.assertNotIn(ost.HW_CPU_X86_AVX512F, traits)

        service = self.admin_api.get_services(binary="nova-compute")[0]
        self.admin_api.put_service(service["id"], {"status": "disabled"})
        self._run_periodics()
        traits = set(self._get_provider_traits(rp))
        self.assertIn(ost.COMPUTE_STATUS_DISABLED, traits)
        self.assertIn("CUSTOM_OPERATOR", traits)
        self.admin_api.put_service(service["id"], {"status": "enabled"})
        self._run_periodics()
        self.assertNotIn(ost.COMPUTE_STATUS_DISABLED,
                         self._get_provider_traits(rp))

    def test_one_root_with_novas_ratios(self):
        self.flags(initial_cpu_allocation_ratio=8.0,
                   ram_allocation_ratio=1.5, reserved_host_cpus=1)
        self.start_compute()
        providers = self._get_all_rps_in_a_tree(self.host_uuid)
        self.assertEqual([self.host_uuid], [p["uuid"] for p in providers])
        inventory = self._get_provider_inventory(self.host_uuid)
        self.assertEqual(8.0, inventory[orc.VCPU]["allocation_ratio"])
        self.assertEqual(1, inventory[orc.VCPU]["reserved"])
        self.assertEqual(1.5, inventory[orc.MEMORY_MB]["allocation_ratio"])
        self.assertNotIn(orc.PCPU, inventory)
        self.assertFalse([rc for rc in inventory
                          if rc.startswith("CUSTOM_MEM_PAGE_SIZE")])

    def test_the_driver_nova_loaded(self):
        self.start_compute()
        driver = self.compute.manager.driver
        from nova.virt.libvirt.driver import LibvirtDriver
        self.assertIsInstance(driver, LibvirtDriver)
        expected = ("virtdriver_nova.driver"
                    if os.environ.get("VIRTDRIVER_NOVA_MODE") == "virtdriver"
                    else "nova.virt.libvirt.driver")
        self.assertEqual(expected, type(driver).__module__)
