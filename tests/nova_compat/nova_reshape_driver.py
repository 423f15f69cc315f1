"""A driver written against Nova's virt driver API, as a Nova developer
would write one, that reshapes: Nova's ``MediumFakeDriver`` whose VCPU
inventory moves to a child provider (``<node>-numa0``) when ``nested`` is
set, raising ``nova.exception.ReshapeNeeded`` when it is called without
the allocations and moving them when it is called with them (Nova's
round trip).  Imported only inside the Nova venv."""

from nova import exception
from nova.virt import fake


class ReshapingFakeDriver(fake.MediumFakeDriver):
    #: Set by the test between cycles.
    nested = False

    def update_provider_tree(self, provider_tree, nodename, allocations=None):
        child = nodename + '-numa0'
        on_root = 'VCPU' in provider_tree.data(nodename).inventory
        if self.nested and on_root and allocations is None:
            raise exception.ReshapeNeeded()
        super().update_provider_tree(provider_tree, nodename,
                                     allocations=allocations)
        if not self.nested:
            return
        if not provider_tree.exists(child):
            provider_tree.new_child(child, nodename)
        inventory = dict(provider_tree.data(nodename).inventory)
        provider_tree.update_inventory(child, {'VCPU': inventory.pop('VCPU')})
        provider_tree.update_inventory(nodename, inventory)
        if allocations is None:
            return
        root = provider_tree.data(nodename).uuid
        child_uuid = provider_tree.data(child).uuid
        for consumer in allocations.values():
            on = consumer['allocations'].get(root, {}).get('resources', {})
            if 'VCPU' in on:
                consumer['allocations'][child_uuid] = {
                    'resources': {'VCPU': on.pop('VCPU')}}
