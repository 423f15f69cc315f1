"""Flavor + image properties → the instance's NUMA request (or ``None``).

:func:`numa_constraints` follows the rules operators know from Nova
(``nova.virt.hardware.numa_get_constraints``), refusing what Nova would
refuse, and a little more where Nova silently ignores a setting; each
refusal names the keys and values at fault, and all of them are reported
together in one :class:`~virtdriver.claims.model.InvalidRequest`.  The
rules, with examples, are in ``docs/claims.md``.  In short:

* A NUMA topology is implied by a node count (``hw:numa_nodes`` /
  ``hw_numa_nodes``), a page size (``hw:mem_page_size``) or a dedicated or
  mixed CPU policy (also implied by ``resources:PCPU``).  Without one the
  result is ``None``.
* vCPUs and memory split evenly over the nodes, or as ``hw:numa_cpus.N`` /
  ``hw:numa_mem.N`` (MiB) say for every node.
* An image may set what the flavor leaves unset; it may override the
  flavor only where Nova lets it (a CPU policy the flavor leaves open, a
  page size under flavor ``large``/``any``, a thread policy under flavor
  ``prefer``-or-unset); an image value equal to the flavor's is accepted,
  except for the node count and the per-node lists, which the image may
  not set at all when the flavor does (Nova's
  ``ImageNUMATopologyForbidden``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

import os_resource_classes as orc
import os_traits

from virtdriver.claims.extra_specs import (
    INVALID, Inputs, cpus_text, flavor_key, image_key, show)
from virtdriver.claims.model import (
    CPU_DEDICATED, CPU_MIXED, CPU_POLICIES, CPU_SHARED, EMULATOR_ISOLATE,
    EMULATOR_POLICIES, PAGE_ANY, PAGE_LARGE, THREAD_ISOLATE, THREAD_POLICIES,
    THREAD_PREFER, THREAD_REQUIRE, Flavor, InvalidRequest,
    NUMARequest)
from virtdriver.claims.topology import FORBIDDEN_RULE, guest_cells


class Setting(NamedTuple):
    """A resolved value and the key that set it (``None``: nothing did)."""

    value: Any
    key: str | None = None
    raw: Any = None

    def shown(self, unset: str) -> str:
        return show(self.key, self.raw) if self.key else unset


def numa_constraints(flavor: Flavor, image_properties: Mapping[str, Any]
                     ) -> NUMARequest | None:
    """The NUMA topology ``flavor`` and ``image_properties`` ask for.

    Returns:
        the request, or ``None`` when nothing implies a NUMA topology.

    Raises:
        InvalidRequest: with every problem found, each naming its keys.
    """
    inputs = Inputs(flavor, image_properties)
    inputs.request_keys()
    vcpus, memory = inputs.flavor_size()
    policy = _cpu_policy(inputs)
    thread = _thread_policy(inputs)
    emulator = inputs.choice("hw:emulator_threads_policy",
                             inputs.specs.get("hw:emulator_threads_policy"),
                             EMULATOR_POLICIES, "an emulator threads policy")
    realtime_on, realtime = _realtime(inputs, vcpus, emulator)
    mask = _dedicated_mask(inputs, vcpus)
    policy = _explicit_cpu_resources(inputs, policy, emulator, vcpus)
    thread = _hyperthreading_trait(inputs, thread)
    dedicated = _dedicated_cpus(inputs, policy, thread, emulator,
                                realtime_on, realtime, mask, vcpus)
    nodes = _node_count(inputs)
    page_size = _page_size(inputs)
    locked = _locked_memory(inputs)

    implied = (nodes is not None or page_size is not None
               or policy.value in (CPU_DEDICATED, CPU_MIXED))
    cells = guest_cells(inputs, implied, nodes, vcpus, memory, dedicated,
                        page_size)
    if inputs.problems:
        raise InvalidRequest(inputs.problems)
    if not implied:
        return None
    pinned = policy.value in (CPU_DEDICATED, CPU_MIXED)
    return NUMARequest(
        cells=tuple(cells),
        cpu_policy=policy.value or CPU_SHARED,
        cpu_thread_policy=(thread.value or THREAD_PREFER) if pinned else None,
        emulator_threads_policy=emulator if pinned else None,
        page_size=page_size,
        realtime_cpus=realtime if realtime_on else frozenset(),
        locked_memory=bool(locked))


def _pair(inputs: Inputs, name: str, allowed: tuple[str, ...], what: str
          ) -> tuple[Setting, Setting]:
    fkey, ikey = flavor_key(name), image_key(name)
    fraw, iraw = inputs.specs.get(fkey), inputs.props.get(ikey)
    return (Setting(inputs.choice(fkey, fraw, allowed, what), fkey, fraw),
            Setting(inputs.choice(ikey, iraw, allowed, what), ikey, iraw))


def _cpu_policy(inputs: Inputs) -> Setting:
    flavor, image = _pair(inputs, "cpu_policy", CPU_POLICIES, "a CPU policy")
    if INVALID in (flavor.value, image.value):
        return Setting(INVALID)
    forbidden = {CPU_SHARED: (CPU_DEDICATED, CPU_MIXED),
                 CPU_MIXED: (CPU_DEDICATED,)}.get(flavor.value, ())
    if image.value in forbidden:
        inputs.refuse(
            f"image {image.shown('')} conflicts with flavor "
            f"{flavor.shown('')}; remove hw_cpu_policy from the image or "
            f"use a flavor with hw:cpu_policy={image.value}",
            {flavor.key: flavor.raw, image.key: image.raw})
    if flavor.value is not None:
        return flavor    # a dedicated flavor wins over any image policy
    return image if image.value is not None else Setting(None)


def _thread_policy(inputs: Inputs) -> Setting:
    flavor, image = _pair(inputs, "cpu_thread_policy", THREAD_POLICIES,
                          "a CPU thread policy")
    if INVALID in (flavor.value, image.value):
        return Setting(INVALID)
    if flavor.value in (None, THREAD_PREFER):
        # Nova: an image may choose only when the flavor leaves it open;
        # flavor 'prefer' stands.
        return flavor if flavor.value else (
            image if image.value else Setting(None))
    if image.value and image.value != flavor.value:
        inputs.refuse(
            f"image {image.shown('')} conflicts with flavor "
            f"{flavor.shown('')}; remove hw_cpu_thread_policy from the image "
            "or make the two equal",
            {flavor.key: flavor.raw, image.key: image.raw})
    return flavor


def _realtime(inputs: Inputs, vcpus: Any, emulator: Any
              ) -> tuple[bool, Any]:
    """Whether realtime is on, and the realtime vCPUs."""
    on_key = "hw:cpu_realtime"
    enabled = inputs.boolean(on_key, inputs.specs.get(on_key))
    masks = {}
    for key in ("hw:cpu_realtime_mask", "hw_cpu_realtime_mask"):
        source = inputs.specs if key.startswith("hw:") else inputs.props
        if key in source and vcpus is not INVALID:
            masks[key] = inputs.cpu_mask(key, source[key], vcpus)
    if enabled is not True:
        return False, frozenset()   # Nova ignores masks without realtime
    if vcpus is INVALID or INVALID in masks.values():
        return True, INVALID
    # The image's mask is the more specific one.
    key = next((k for k in ("hw_cpu_realtime_mask", "hw:cpu_realtime_mask")
                if k in masks), None)
    every = frozenset(range(vcpus))
    cpus = masks[key] if key else every
    keys = {on_key: inputs.specs[on_key]}
    if key:
        keys[key] = (inputs.props if key.startswith("hw_")
                     else inputs.specs)[key]
    if not cpus:
        return True, inputs.refuse(
            f"realtime mask {show(key, keys[key])} leaves no realtime vCPU; "
            "name the realtime vCPUs, or exclude only some with '^N'", keys)
    if cpus - every:
        return True, inputs.refuse(
            f"realtime mask {show(key, keys[key])} names vCPU(s) "
            f"{cpus_text(cpus - every)} beyond the flavor's {vcpus} vCPUs "
            f"({cpus_text(every)}); name vCPUs in that range", keys)
    if cpus == every and emulator is None:
        return True, inputs.refuse(
            f"flavor {show(on_key, keys[on_key])} makes every vCPU realtime "
            f"({'no mask' if not key else show(key, keys[key])}) and leaves "
            "none for the emulator threads; exclude one with "
            "hw:cpu_realtime_mask='^0', or set hw:emulator_threads_policy",
            keys)
    return True, cpus


def _dedicated_mask(inputs: Inputs, vcpus: Any) -> Any:
    key = "hw:cpu_dedicated_mask"
    raw = inputs.specs.get(key)
    if raw is None or vcpus is INVALID:
        return None if raw is None else INVALID
    cpus = inputs.cpu_mask(key, raw, vcpus)
    if cpus is INVALID:
        return INVALID
    every = frozenset(range(vcpus))
    if cpus - every:
        return inputs.refuse(
            f"flavor {show(key, raw)} names vCPU(s) {cpus_text(cpus - every)} "
            f"beyond the flavor's {vcpus} vCPUs ({cpus_text(every)}); name "
            "vCPUs in that range", {key: raw})
    if not cpus or cpus == every:
        return inputs.refuse(
            f"flavor {show(key, raw)} makes "
            f"{'no' if not cpus else 'every'} vCPU dedicated; a mixed "
            "instance needs both dedicated and shared vCPUs", {key: raw})
    return cpus


def _explicit_cpu_resources(inputs: Inputs, policy: Setting, emulator: Any,
                            vcpus: Any) -> Setting:
    """``resources:VCPU`` / ``resources:PCPU``: the policy they stand for."""
    shared, shared_keys = inputs.resource_amount(orc.VCPU)
    pinned, pinned_keys = inputs.resource_amount(orc.PCPU)
    if INVALID in (shared, pinned, policy.value):
        return policy
    keys = {k: inputs.specs[k] for k in shared_keys + pinned_keys
            if inputs.specs[k].strip() != "0"}
    named = ", ".join(show(k, v) for k, v in keys.items())
    if policy.value is not None and (shared or pinned):
        inputs.refuse(
            f"flavor {named} cannot be combined with {policy.shown('')}; "
            "use one or the other", {**keys, policy.key: policy.raw})
        return policy
    if shared and pinned:
        inputs.refuse(f"flavor {named} asks for both shared and dedicated "
                      "CPUs; use one of them (or hw:cpu_policy=mixed)", keys)
        return policy
    if pinned:
        isolate = emulator == EMULATOR_ISOLATE
        expected = INVALID if vcpus is INVALID else vcpus + isolate
        if expected is not INVALID and pinned != expected:
            inputs.refuse(
                f"flavor {named} does not match the flavor's {vcpus} vCPUs"
                + (" plus 1 for hw:emulator_threads_policy='isolate'"
                   if isolate else "")
                + f"; set PCPU to {expected}", {**keys, "vcpus": vcpus})
        return Setting(CPU_DEDICATED, pinned_keys[0],
                       inputs.specs[pinned_keys[0]])
    if shared:
        return Setting(CPU_SHARED, shared_keys[0],
                       inputs.specs[shared_keys[0]])
    return policy


def _hyperthreading_trait(inputs: Inputs, thread: Setting) -> Setting:
    """``trait:HW_CPU_HYPERTHREADING``: required ⇒ require, forbidden ⇒
    isolate (as Nova's request filter translates it)."""
    trait = os_traits.HW_CPU_HYPERTHREADING
    flavor, flavor_keys = inputs.flavor_trait(trait)
    image = inputs.image_trait(trait)
    image_key_ = f"trait:{trait}"
    if INVALID in (flavor, image):
        return thread
    if flavor and image and flavor != image:
        inputs.refuse(
            f"image {show(image_key_, image)} conflicts with flavor "
            f"{show(flavor_keys[0], flavor)}; remove it from the image or "
            "make the two equal",
            {flavor_keys[0]: flavor, image_key_: image})
    value = flavor or image
    key = flavor_keys[0] if flavor else image_key_
    if not value or thread.value is INVALID:
        return thread
    if thread.value is not None:
        inputs.refuse(
            f"{show(key, value)} cannot be combined with "
            f"{thread.shown('')}; use one or the other",
            {key: value, thread.key: thread.raw})
        return thread
    return Setting(THREAD_ISOLATE if value == "forbidden" else THREAD_REQUIRE,
                   key, value)


def _dedicated_cpus(inputs: Inputs, policy: Setting, thread: Setting,
                    emulator: Any, realtime_on: bool, realtime: Any,
                    mask: Any, vcpus: Any) -> Any:
    """The guest vCPUs to pin, after the policy cross-checks."""
    value = policy.value
    if value is INVALID:
        return INVALID
    mask_key = "hw:cpu_dedicated_mask"
    if value in (None, CPU_SHARED):
        unpinned = policy.shown("no hw:cpu_policy (shared)")
        keys = {policy.key: policy.raw} if policy.key else {}
        if thread.value not in (None, INVALID):
            inputs.refuse(
                f"{thread.shown('')} needs dedicated CPUs but the flavor and "
                f"image give {unpinned}; set hw:cpu_policy=dedicated or "
                "mixed, or remove it", {**keys, thread.key: thread.raw})
        if emulator == EMULATOR_ISOLATE:
            inputs.refuse(
                "flavor hw:emulator_threads_policy='isolate' needs dedicated "
                f"CPUs but the flavor and image give {unpinned}; set "
                "hw:cpu_policy=dedicated or mixed, or remove it",
                {**keys, "hw:emulator_threads_policy": emulator})
        if mask is not None:
            inputs.refuse(
                f"flavor {show(mask_key, inputs.specs[mask_key])} needs "
                f"hw:cpu_policy=mixed but the flavor and image give "
                f"{unpinned}; set hw:cpu_policy=mixed or remove the mask",
                {**keys, mask_key: inputs.specs[mask_key]})
        if realtime_on:
            inputs.refuse(
                f"flavor {show('hw:cpu_realtime', inputs.specs['hw:cpu_realtime'])}"
                f" needs dedicated CPUs but the flavor and image give "
                f"{unpinned}; set hw:cpu_policy=dedicated or mixed, or remove "
                "it",
                {**keys, "hw:cpu_realtime": inputs.specs["hw:cpu_realtime"]})
        return frozenset()
    if value == CPU_DEDICATED:
        if mask is not None:
            inputs.refuse(
                f"flavor {show(mask_key, inputs.specs[mask_key])} needs "
                f"hw:cpu_policy=mixed, not {policy.shown('')}; use the mixed "
                "policy or remove the mask",
                {policy.key: policy.raw, mask_key: inputs.specs[mask_key]})
        return INVALID if vcpus is INVALID else frozenset(range(vcpus))
    if INVALID in (mask, realtime):
        return INVALID
    rt_cpus = realtime if realtime_on else None
    if (rt_cpus is None) == (mask is None):
        keys = {policy.key: policy.raw}
        if mask is not None:
            keys[mask_key] = inputs.specs[mask_key]
            keys["hw:cpu_realtime"] = inputs.specs["hw:cpu_realtime"]
        return inputs.refuse(
            f"{policy.shown('')} needs exactly one of hw:cpu_dedicated_mask "
            "and hw:cpu_realtime with hw:cpu_realtime_mask, but "
            + ("both are set" if mask is not None else "neither is")
            + "; give one mask saying which vCPUs are dedicated", keys)
    if mask is None and rt_cpus == frozenset(range(vcpus)):
        return inputs.refuse(
            f"{policy.shown('')} with every vCPU realtime leaves no shared "
            "vCPU; exclude the shared ones with hw:cpu_realtime_mask='^0'",
            {policy.key: policy.raw,
             "hw:cpu_realtime": inputs.specs["hw:cpu_realtime"]})
    return mask if mask is not None else rt_cpus


def _node_count(inputs: Inputs) -> Any:
    fkey, ikey = "hw:numa_nodes", "hw_numa_nodes"
    what = "the number of guest NUMA nodes (1 or more)"
    flavor = inputs.count(fkey, inputs.specs.get(fkey), what)
    image = inputs.count(ikey, inputs.props.get(ikey), what)
    if flavor is not None and image is not None \
            and INVALID not in (flavor, image):
        # Nova's ImageNUMATopologyForbidden: even an equal value is refused.
        inputs.refuse(
            f"image {show(ikey, inputs.props[ikey])} may not be set when "
            f"flavor {show(fkey, inputs.specs[fkey])} sets the node count, "
            f"{FORBIDDEN_RULE}; remove hw_numa_nodes from the image",
            {fkey: inputs.specs[fkey], ikey: inputs.props[ikey]})
    return flavor if flavor is not None else image


def _page_size(inputs: Inputs) -> Any:
    fkey, ikey = "hw:mem_page_size", "hw_mem_page_size"
    flavor = inputs.page_size(fkey, inputs.specs.get(fkey))
    image = inputs.page_size(ikey, inputs.props.get(ikey))
    keys = {k: v for k, v in ((fkey, inputs.specs.get(fkey)),
                              (ikey, inputs.props.get(ikey))) if v is not None}
    if flavor is None and image is not None:
        if image is not INVALID:
            inputs.refuse(
                f"image {show(ikey, keys[ikey])} needs the flavor to allow "
                "a page size choice; set hw:mem_page_size=large or any on "
                "the flavor, or remove it from the image", keys)
        return INVALID
    if flavor is None or image is None or INVALID in (flavor, image):
        return INVALID if INVALID in (flavor, image) else flavor
    if flavor in (PAGE_LARGE, PAGE_ANY):
        return image
    if image != flavor:
        inputs.refuse(
            f"image {show(ikey, keys[ikey])} may not override flavor "
            f"{show(fkey, keys[fkey])}; only a flavor page size of large or "
            "any lets the image choose", keys)
    return flavor


def _locked_memory(inputs: Inputs) -> Any:
    fkey, ikey = "hw:locked_memory", "hw_locked_memory"
    flavor = inputs.boolean(fkey, inputs.specs.get(fkey))
    image = inputs.boolean(ikey, inputs.props.get(ikey))
    if INVALID in (flavor, image):
        return INVALID
    keys = {k: v for k, v in ((fkey, inputs.specs.get(fkey)),
                              (ikey, inputs.props.get(ikey))) if v is not None}
    if flavor is not None and image is not None and flavor != image:
        inputs.refuse(
            f"image {show(ikey, keys[ikey])} conflicts with flavor "
            f"{show(fkey, keys[fkey])}; remove it from the image or make the "
            "two equal", keys)
        return INVALID
    locked = flavor if flavor is not None else image
    if locked and "hw:mem_page_size" not in inputs.specs \
            and "hw_mem_page_size" not in inputs.props:
        inputs.refuse(
            f"{' and '.join(show(k, v) for k, v in keys.items())} needs a "
            "page size; set hw:mem_page_size on the flavor (e.g. large) or "
            "do not lock the memory", keys)
        return INVALID
    return bool(locked)

