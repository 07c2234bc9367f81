"""Dynamic Resource Allocation's GPUs as a fleet (pure): what the ResourceSlices publish,
grouped into physical GPUs, and what the claims hold of them.

A device of the NVIDIA driver (``docs/reference/dra.md``) is a whole GPU (``type`` ``gpu``)
or a MIG device (``type`` ``mig``, its ``profile``). Devices of a partitionable GPU consume
the counters of one shared counter set (KEP-4815): the set is that GPU, and a device can be
had while the counters its allocated neighbours consume leave room for it, as the scheduler
decides. Without counters a GPU is its device (whole), or the MIG devices of one parent
(``parentUUID``: MIG set up beforehand). Rows are the observed rows' plain values
(``ObservedResourceSlice``, ``ObservedResourceClaim.allocated``), so the pages, usage and
the explainer count alike.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from gpus import catalog
from gpus.strips import GpuStrip, Slice
from portal.vocabulary.quantity import QuantityError, parse_quantity

WHOLE, MIG = "gpu", "mig"
MEMORY_SLICE = "memory-slice-"
# (driver, pool, device): a device as a claim's allocation names it
DeviceKey = tuple[str, str, str]


# A device taint's effects that keep a claim that does not tolerate it off the device
# (KEP-5055); "None", and any effect not known here, only inform (as the API says to treat
# an unknown effect).
SCHEDULING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})


@dataclass(frozen=True)
class Taint:
    """One taint of a device (the NVIDIA driver's health check: ``gpu.nvidia.com/xid`` with
    the XID as its value, ``gpu.nvidia.com/gpu-lost``; or an admin's DeviceTaintRule)."""

    key: str
    value: str
    effect: str

    @property
    def text(self) -> str:
        """As kubectl writes a taint: ``key=value:Effect``."""
        return (
            f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"
        )


def tolerates(toleration: Mapping[str, Any], taint: Taint) -> bool:
    """Whether one of a request's tolerations tolerates ``taint``: as a pod's toleration of
    a node's taint (an empty effect matches every effect; ``Exists`` with no key every
    key; ``Equal``, the default, the key and the value)."""
    effect = str(toleration.get("effect") or "")
    if effect and effect != taint.effect:
        return False
    key = str(toleration.get("key") or "")
    if str(toleration.get("operator") or "Equal") == "Exists":
        return not key or key == taint.key
    return key == taint.key and str(toleration.get("value") or "") == taint.value


def _amount(text: Any) -> Fraction:
    try:
        return parse_quantity(str(text))
    except (QuantityError, ValueError):
        return Fraction(0)


@dataclass(frozen=True)
class Device:
    """One published device, on the physical GPU ``gpu`` (its counter set, its or its
    parent's uuid, else its own name)."""

    node: str
    driver: str
    pool: str
    name: str
    kind: str  # "gpu", "mig", or another type the driver names ("" when none)
    profile: str  # a MIG device's profile, "" otherwise
    product: str
    gpu: str
    counter_set: str = ""
    consumes: tuple[tuple[str, Fraction], ...] = ()
    attributes: tuple[tuple[str, Any], ...] = ()
    taints: tuple[Taint, ...] = ()

    def blocking(self, tolerations: Sequence[Mapping[str, Any]] = ()) -> Taint | None:
        """The first taint that keeps a claim with ``tolerations`` off this device (None:
        the scheduler may allocate it, as far as taints go)."""
        for taint in self.taints:
            if taint.effect in SCHEDULING_EFFECTS and not any(
                tolerates(t, taint) for t in tolerations
            ):
                return taint
        return None

    @property
    def key(self) -> DeviceKey:
        return (self.driver, self.pool, self.name)

    @property
    def resource(self) -> str:
        """The device plugin's name of what this device is (``nvidia.com/gpu``,
        ``nvidia.com/mig-3g.40gb``): the GPU-share rule and the reports count by it."""
        if self.kind == WHOLE:
            return "nvidia.com/gpu"
        if self.kind == MIG and self.profile:
            return catalog.resource_name(self.profile)
        return ""

    @property
    def what(self) -> str:
        """Said on the pages: ``whole GPU`` or the MIG profile."""
        return (
            self.profile if self.kind == MIG else "whole GPU" if self.kind == WHOLE else self.kind
        )


@dataclass
class Gpu:
    """One physical GPU published through DRA: its devices, those allocated, and where it
    shares counters each counter's total and what the allocated devices consume of it."""

    node: str
    driver: str
    pool: str
    key: str
    product: str = ""
    devices: list[Device] = field(default_factory=list)
    taken: list[Device] = field(default_factory=list)
    counters: dict[str, tuple[Fraction, Fraction]] = field(default_factory=dict)

    @property
    def partitionable(self) -> bool:
        return bool(self.counters)

    def available(self, device: Device) -> bool:
        """Whether the scheduler could allocate ``device`` now to a claim that tolerates no
        taint: not taken, not tainted so, and every counter it consumes has room left
        beside what the taken devices consume."""
        if device in self.taken or device.blocking():
            return False
        for name, amount in device.consumes:
            total, used = self.counters.get(name, (Fraction(0), Fraction(0)))
            if used + amount > total:
                return False
        return True

    def kept_off(self) -> Taint | None:
        """The taint that keeps every one of the GPU's free devices from a claim with no
        toleration (the driver taints a GPU's devices after a fatal XID), None otherwise."""
        taints = [d.blocking() for d in self.devices if d not in self.taken]
        return taints[0] if taints and all(taints) else None

    def memory_slices(self) -> tuple[int, int]:
        """(left, total) of the GPU's memory-slice counters (0, 0 when it shares none)."""
        names = [n for n in self.counters if n.startswith(MEMORY_SLICE)]
        total = sum(int(self.counters[n][0]) for n in names)
        used = sum(int(self.counters[n][1]) for n in names)
        return total - used, total

    def model(self) -> str | None:
        return catalog.model_for_product(self.product.replace(" ", "-")) if self.product else None


def devices_of(row: Mapping[str, Any]) -> list[Device]:
    """The devices of one slice row (``node_name``, ``driver``, ``pool``, ``devices``)."""
    out = []
    for device in row.get("devices") or ():
        attributes = device.get("attributes") or {}
        uses = device.get("consumesCounters") or []
        counter_set = str(uses[0].get("counterSet", "")) if uses else ""
        consumes = tuple(
            (str(name), _amount(value))
            for use in uses[:1]
            for name, value in sorted((use.get("counters") or {}).items())
        )
        kind = str(attributes.get("type", ""))
        gpu = (
            counter_set
            or str(attributes.get("parentUUID") or "")
            or str(attributes.get("uuid") or "")
            or str(device.get("name", ""))
        )
        out.append(
            Device(
                node=str(row.get("node_name") or ""),
                driver=str(row.get("driver", "")),
                pool=str(row.get("pool", "")),
                name=str(device.get("name", "")),
                kind=kind,
                profile=str(attributes.get("profile", "")) if kind == MIG else "",
                product=str(attributes.get("productName", "")),
                gpu=gpu,
                counter_set=counter_set,
                consumes=consumes,
                attributes=tuple(sorted(attributes.items())),
                taints=tuple(
                    Taint(str(t.get("key", "")), str(t.get("value", "")), str(t.get("effect", "")))
                    for t in device.get("taints") or ()
                ),
            )
        )
    return out


def taken_devices(allocations: Iterable[Sequence[Mapping[str, Any]]]) -> set[DeviceKey]:
    """The devices the claims' allocations hold (each claim's ``allocated`` list)."""
    return {
        (str(a.get("driver", "")), str(a.get("pool", "")), str(a.get("device", "")))
        for allocated in allocations
        for a in allocated or ()
    }


def request_classes(requests: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """A claim's requests (``ObservedResourceClaim.requests``) -> the DeviceClass each asks
    for, by the name an allocation's result gives it: the request's, or for one of
    ``firstAvailable``'s alternatives ``<request>/<sub-request>``."""
    out = {}
    for request in requests or ():
        name = str(request.get("name", ""))
        if "first_available" in request:
            for sub in request.get("first_available") or ():
                out[f"{name}/{sub.get('name', '')}"] = str(sub.get("device_class", ""))
        else:
            out[name] = str(request.get("device_class", ""))
    return out


def device_classes(
    claims: Iterable[tuple[Sequence[Mapping[str, Any]], Sequence[Mapping[str, Any]]]],
) -> dict[DeviceKey, str]:
    """The DeviceClass each allocated device was allocated through, from the claims'
    (``allocated``, ``requests``)."""
    out: dict[DeviceKey, str] = {}
    for allocated, requests in claims:
        classes = request_classes(requests)
        for a in allocated or ():
            key = (str(a.get("driver", "")), str(a.get("pool", "")), str(a.get("device", "")))
            out[key] = classes.get(str(a.get("request", "")), "")
    return out


def gpus_of(slices: Iterable[Mapping[str, Any]], taken: set[DeviceKey]) -> list[Gpu]:
    """The physical GPUs the slice rows publish, by node, pool and GPU, with what
    ``taken`` holds of them and, for shared counters, what is consumed."""
    shared: dict[tuple[str, str, str], dict[str, Fraction]] = {}
    gpus: dict[tuple[str, str, str, str], Gpu] = {}
    for row in slices:
        driver, pool = str(row.get("driver", "")), str(row.get("pool", ""))
        for counter_set in row.get("shared_counters") or ():
            shared[(driver, pool, str(counter_set.get("name", "")))] = {
                str(name): _amount(value)
                for name, value in (counter_set.get("counters") or {}).items()
            }
        for device in devices_of(row):
            key = (device.node, driver, pool, device.gpu)
            gpu = gpus.get(key)
            if gpu is None:
                gpu = gpus[key] = Gpu(device.node, driver, pool, device.gpu)
            gpu.devices.append(device)
            if device.kind == WHOLE or not gpu.product:
                gpu.product = device.product or gpu.product
            if device.key in taken:
                gpu.taken.append(device)
    for (_, driver, pool, name), gpu in gpus.items():
        totals = shared.get((driver, pool, name))
        if totals is None:
            continue
        used: dict[str, Fraction] = defaultdict(Fraction)
        for device in gpu.taken:
            for counter, amount in device.consumes:
                used[counter] += amount
        gpu.counters = {c: (total, used.get(c, Fraction(0))) for c, total in totals.items()}
    return [gpus[k] for k in sorted(gpus)]


def _width(model: str | None, profile: str, total: int) -> int:
    if not profile:
        return total
    if model:
        try:
            return catalog.gpu_share(model, profile)[0]
        except (KeyError, StopIteration):
            pass
    head = profile.split("g.", 1)[0]
    return int(head) if head.isdigit() else 1


def strip(gpu: Gpu, index: int) -> GpuStrip:
    """One GPU drawn as the node pages draw MIG: its allocated devices in use; what is left
    free, by its counters for a partitionable GPU (one free part, ``N of M memory slices
    left``), else its devices; a device tainted against scheduling (or a GPU all of whose
    free devices are) drawn as not free, its label naming the taint."""
    model = gpu.model()
    total = int(catalog.gpu_models()[model].get("compute_slices") or 7) if model else 7
    out = GpuStrip(index, total, name=f"{gpu.key} (by DRA)")
    whole = [d for d in gpu.taken if d.kind == WHOLE]
    if whole:
        out.slices.append(Slice("", total, True))
        return out
    for device in sorted(gpu.taken, key=lambda d: d.name):
        out.slices.append(Slice(device.profile, _width(model, device.profile, total), True))
    used = sum(s.width for s in out.slices)
    if gpu.partitionable:
        left, slices = gpu.memory_slices()
        taint = gpu.kept_off()
        if total > used:
            note = f"counters left: {left} of {slices} memory slices" if slices else "counters left"
            if taint is not None:
                note = f"tainted {taint.text}: none of its devices can be had"
            out.slices.append(Slice("", total - used, None if taint else False, note=note))
        return out
    for device in gpu.devices:
        if device in gpu.taken:
            continue
        taint = device.blocking()  # drawn apart (not free): no claim without a toleration gets it
        note = f"{device.what} (tainted {taint.text})" if taint else ""
        width = _width(model, device.profile, total)
        out.slices.append(Slice(device.profile, width, None if taint else False, note=note))
    return out


@dataclass
class Offer:
    """What a set of GPUs offers through DRA of one kind of device (a whole GPU, a MIG
    profile): how many are published, how many are allocated, how many could be had now,
    and how many are not allocated but tainted so that no claim without a toleration gets
    them (the driver's health check, an admin's rule)."""

    what: str
    product: str
    devices: int = 0
    taken: int = 0
    available: int = 0
    tainted: int = 0

    @property
    def fill(self) -> int:
        return min(100, round(100 * self.taken / self.devices)) if self.devices else 0


def offers(gpus: Iterable[Gpu]) -> list[Offer]:
    """Per product and kind of device: published, allocated, could be had now (a
    partitionable GPU's devices count each where the counters left would allow it, so they
    do not add up: one 3g device taken may leave no whole GPU)."""
    out: dict[tuple[str, str], Offer] = {}
    for gpu in gpus:
        for device in gpu.devices:
            offer = out.setdefault(
                (device.product or gpu.product, device.what),
                Offer(device.what, device.product or gpu.product),
            )
            offer.devices += 1
            taken = device in gpu.taken
            offer.taken += taken
            offer.available += gpu.available(device)
            offer.tainted += not taken and device.blocking() is not None
    return [out[k] for k in sorted(out, key=lambda k: (k[0], k[1] != "whole GPU", k[1]))]


# ---------------------------------------------------------------- why a claim is not allocated
# The scheduler says only "cannot allocate all claims" for a claim no device can serve, for
# whatever reason: which one holds is read here from the published devices, the claims'
# allocations and the classes. Selectors are CEL; the forms the driver's classes and its
# users' claims write (``device.driver == '…'``, ``device.attributes['<driver>'].<name> ==
# <value>``, joined by ``&&``) are evaluated, anything else leaves the reason unknown.

_TERM = re.compile(
    r"""^\(?\s*device\.(?:driver|attributes\[(['"])([^'"]+)\1\]\.(\w+))\s*==\s*"""
    r"""(?:'([^']*)'|"([^"]*)"|(-?\d+)|(true|false))\s*\)?$"""
)
_DRIVER_TERM = re.compile(r"""^\(?\s*device\.driver\s*==\s*(?:'([^']*)'|"([^"]*)")\s*\)?$""")

CLASS_UNKNOWN = "class-unknown"
NO_MATCH = "no-match"
ALL_TAKEN = "all-taken"
COUNTERS = "counters"
TAINTED = "tainted"  # devices would be free for it but for taints it does not tolerate
TOO_FEW = "too-few"  # fewer devices match on any one node than it asks for, taken or not
APART = "apart"  # each of a pod's claims could be had, but on no one node all of them
QUOTA = "quota"  # its claim cannot be made: the namespace's quota on a class is used up
POLICY = "policy"  # its claim cannot be made: the namespace's MIG policy closes its class
FITS = "fits"  # devices are free for it now (the scheduler will see them)
UNKNOWN = "unknown"  # a selector this reading does not evaluate


def matches(device: Device, expression: str) -> bool | None:
    """Whether ``device`` satisfies a CEL selector of the forms above (None: another form)."""
    attributes = dict(device.attributes)
    for term in expression.split("&&"):
        text = term.strip()
        if text.strip("() ") == "true":  # a selector that selects every device
            continue
        driver = _DRIVER_TERM.match(text)
        if driver:
            if device.driver != (
                driver.group(1) if driver.group(1) is not None else driver.group(2)
            ):
                return False
            continue
        found = _TERM.match(text)
        if not found or found.group(2) is None:
            return None
        if found.group(2) != device.driver:
            return False
        value = attributes.get(found.group(3))
        wanted: Any
        if found.group(4) is not None or found.group(5) is not None:
            wanted = found.group(4) if found.group(4) is not None else found.group(5)
        elif found.group(6) is not None:
            wanted = int(found.group(6))
        else:
            wanted = found.group(7) == "true"
        if value != wanted:
            return False
    return True


@dataclass(frozen=True)
class ClaimVerdict:
    """Why one request of a claim is not served: ``reason`` (the constants above), the
    device class, what matches (``matching``: devices, ``taken``: of them allocated), and
    what the matching devices are (``what``: ``whole GPU``, a profile)."""

    request: str
    reason: str
    device_class: str
    wanted: int = 1
    matching: int = 0
    taken: int = 0
    what: str = ""
    classes: tuple[str, ...] = ()
    on_a_node: int = 0  # the most devices matching on one node
    free_on_a_node: int = 0  # the most of them one node could give at once now
    never: bool = False  # APART: no node could serve them all even with nothing allocated
    # TAINTED: each free matching device kept off (``<device> on <node>``) with its taint
    taints: tuple[tuple[str, Taint], ...] = ()


def _candidates(selectors: Sequence[str], gpus: Sequence[Gpu]) -> list[tuple[Device, Gpu]] | None:
    out = []
    for gpu in gpus:
        for device in gpu.devices:
            answers = [matches(device, s) for s in selectors]
            if any(a is None for a in answers):
                return None
            if all(answers):
                out.append((device, gpu))
    return out


def _at_once(
    found: Sequence[tuple[Device, Gpu]],
    held: dict[int, dict[str, Fraction]],
    limit: int | None = None,
    tolerations: Sequence[Mapping[str, Any]] | None = (),
) -> int:
    """How many of ``found`` (devices of one node) could be had together now (up to
    ``limit``) by a request with ``tolerations`` (None: as if no device were tainted): not
    taken, not tainted against it, the smallest first while their GPU's counters have room
    beside what is taken and what ``held`` (per GPU, by ``id``) already counts; ``held`` is
    added to."""
    count = 0
    for device, gpu in sorted(found, key=lambda f: (sum(a for _, a in f[0].consumes), f[0].name)):
        if count == limit:
            break
        used = held.setdefault(id(gpu), defaultdict(Fraction))
        if device in gpu.taken or used["device:" + device.name]:
            continue
        if tolerations is not None and device.blocking(tolerations):
            continue
        if not gpu.partitionable:
            used["device:" + device.name] += 1
            count += 1
            continue
        if all(
            gpu.counters.get(n, (Fraction(0), Fraction(0)))[1] + used[n] + amount
            <= gpu.counters.get(n, (Fraction(0), Fraction(0)))[0]
            for n, amount in device.consumes
        ):
            for n, amount in device.consumes:
                used[n] += amount
            used["device:" + device.name] += 1
            count += 1
    return count


def _by_node(found: Sequence[tuple[Device, Gpu]]) -> dict[str, list[tuple[Device, Gpu]]]:
    out: dict[str, list[tuple[Device, Gpu]]] = defaultdict(list)
    for device, gpu in found:
        out[gpu.node].append((device, gpu))
    return out


def claim_verdict(
    request: Mapping[str, Any], classes: Mapping[str, Sequence[str]], gpus: Sequence[Gpu]
) -> ClaimVerdict:
    """Why ``request`` (a claim's request as the rows keep it; of ``first_available``, the
    first alternative) is not served, with ``classes`` (name -> its selectors) and the
    fleet's ``gpus``. A claim's devices are all on one node (the scheduler allocates a pod's
    claims on the node it picks, ``docs/reference/dra.md``): each count is of the best node,
    ``matching`` and ``taken`` of the whole cluster beside them."""
    if request.get("first_available"):
        request = {"name": request.get("name", ""), **request["first_available"][0]}
    name, device_class = str(request.get("name", "")), str(request.get("device_class", ""))
    if device_class not in classes:
        return ClaimVerdict(name, CLASS_UNKNOWN, device_class, classes=tuple(sorted(classes)))
    found = _candidates([*classes[device_class], *(request.get("selectors") or ())], gpus)
    if found is None:
        return ClaimVerdict(name, UNKNOWN, device_class)
    nodes = _by_node(found)
    on_a_node = max((len(f) for f in nodes.values()), default=0)
    wanted = on_a_node if request.get("mode") == "All" else int(request.get("count") or 1)
    what = ", ".join(sorted({d.what for d, _ in found}))
    taken = sum(1 for d, g in found if d in g.taken)
    tolerations = request.get("tolerations") or ()
    untaken = max((sum(d not in g.taken for d, g in f) for f in nodes.values()), default=0)
    free = _free_on_a_node(nodes, request.get("mode") == "All", tolerations)
    facts = (wanted, len(found), taken, what)
    if not found:
        return ClaimVerdict(name, NO_MATCH, device_class, *facts)
    if on_a_node < wanted:
        return ClaimVerdict(name, TOO_FEW, device_class, *facts, on_a_node=on_a_node)
    if free < wanted and _free_on_a_node(nodes, request.get("mode") == "All", None) >= wanted:
        kept_off = tuple(
            (f"{d.name} on {d.node}", taint)
            for d, g in found
            if d not in g.taken and (taint := d.blocking(tolerations)) is not None
        )
        return ClaimVerdict(
            name,
            TAINTED,
            device_class,
            *facts,
            on_a_node=on_a_node,
            free_on_a_node=free,
            taints=kept_off,
        )
    reason = FITS if free >= wanted else COUNTERS if untaken >= wanted else ALL_TAKEN
    return ClaimVerdict(
        name, reason, device_class, *facts, on_a_node=on_a_node, free_on_a_node=free
    )


def _free_on_a_node(
    nodes: Mapping[str, Sequence[tuple[Device, Gpu]]],
    every: bool,
    tolerations: Sequence[Mapping[str, Any]] | None,
) -> int:
    """The most matching devices one node could give at once (``every``, allocation mode
    All: the most on a node that can give every one of its own), to ``tolerations`` (None:
    taints aside)."""
    if every:
        return max(
            (len(f) for f in nodes.values() if _at_once(f, {}, None, tolerations) == len(f)),
            default=0,
        )
    return max((_at_once(f, {}, None, tolerations) for f in nodes.values()), default=0)


def together(
    requests: Sequence[Mapping[str, Any]], classes: Mapping[str, Sequence[str]], gpus: Sequence[Gpu]
) -> bool | None:
    """Whether one node could serve every request of a pod's claims at once (each ExactCount
    request its count, the smallest free devices first, none given twice, counters shared):
    the scheduler allocates all of a pod's claims on the one node it picks. None when a
    class is missing or a selector is not read here."""
    wanted = []
    for request in requests:
        if request.get("first_available"):
            request = {**request, **request["first_available"][0]}
        device_class = str(request.get("device_class", ""))
        if device_class not in classes:
            return None
        found = _candidates([*classes[device_class], *(request.get("selectors") or ())], gpus)
        if found is None:
            return None
        wanted.append(
            (_by_node(found), int(request.get("count") or 1), request.get("tolerations") or ())
        )
    nodes = {node for by_node, _, _ in wanted for node in by_node}
    for node in nodes:
        held: dict[int, dict[str, Fraction]] = {}
        if all(
            _at_once_among(by_node.get(node, []), count, held, tolerations)
            for by_node, count, tolerations in wanted
        ):
            return True
    return False


def apart(
    claims: Sequence[tuple[str, Sequence[Mapping[str, Any]]]],
    said: Sequence[tuple[str, ClaimVerdict]],
    classes: Mapping[str, Sequence[str]],
    gpus: Sequence[Gpu],
    unallocated: Callable[[], Sequence[Gpu]],
) -> list[tuple[str, ClaimVerdict]]:
    """A pod's pending ``claims`` (name, requests) whose requests each fit on some node
    (``said``: their verdicts) but on no one node together: one verdict saying so (the
    claims' names, then the verdict), ``never`` when even ``unallocated()`` (the fleet with
    nothing allocated) has no such node; none otherwise."""
    if len(said) < 2 or any(v.reason != FITS for _, v in said):
        return []
    requests = [r for _, asked in claims for r in asked]
    if together(requests, classes, gpus) is not False:
        return []
    never = together(requests, classes, unallocated()) is False
    what = ", ".join(f"{name}: {v.wanted} {v.what}" for name, v in said)
    names = ", ".join(sorted({name for name, _ in claims}))
    return [(names, ClaimVerdict("", APART, "", len(said), what=what, never=never))]


def _at_once_among(
    found: Sequence[tuple[Device, Gpu]],
    count: int,
    held: dict[int, dict[str, Fraction]],
    tolerations: Sequence[Mapping[str, Any]] = (),
) -> bool:
    """Whether ``count`` of ``found`` can be had beside what ``held`` counts (then added
    to it), by a request with ``tolerations``."""
    trial: dict[int, dict[str, Fraction]] = {k: defaultdict(Fraction, v) for k, v in held.items()}
    if _at_once(found, trial, count, tolerations) < count:
        return False
    held.update(trial)
    return True


def most_at_once(selectors: Sequence[str], gpus: Sequence[Gpu]) -> int | None:
    """The most devices matching ``selectors`` (a class's, a request's) the fleet could give
    at once: per GPU, the smallest matching devices taken while its counters have room
    (each device once where it shares none). None when a selector is not read here."""
    total = 0
    for gpu in gpus:
        found = []
        for device in gpu.devices:
            answers = [matches(device, s) for s in selectors]
            if any(a is None for a in answers):
                return None
            if all(answers):
                found.append(device)
        used: dict[str, Fraction] = defaultdict(Fraction)
        for device in sorted(found, key=lambda d: (sum(a for _, a in d.consumes), d.name)):
            fits = all(
                used[name] + amount <= gpu.counters.get(name, (Fraction(0), Fraction(0)))[0]
                for name, amount in device.consumes
            )
            if not gpu.partitionable or fits:
                total += 1
                for name, amount in device.consumes:
                    used[name] += amount
    return total


def counter_at_once(
    classes: Sequence[Sequence[str]],
    counter: str,
    driver: str,
    scope: str,
    gpus: Sequence[Gpu],
) -> int | None:
    """The most of the shared counter ``counter`` the fleet could give at once to devices of
    ``driver`` that ``scope`` (a CEL selector, "" for every device) and one of ``classes``
    (each a class's selectors) select: the counter's value in the shared counter set of each
    GPU where such a device consumes it, summed (each value rounded up, as Kueue charges a
    counter's value). A GPU sharing no counter set adds nothing. None when a selector is
    not read here."""
    total = 0
    for gpu in gpus:
        if gpu.driver != driver or counter not in gpu.counters:
            continue
        for device in gpu.devices:
            if counter not in dict(device.consumes):
                continue
            chosen = _chosen(device, scope, classes)
            if chosen is None:
                return None
            if chosen:
                total += math.ceil(gpu.counters[counter][0])
                break
    return total


def _chosen(device: Device, scope: str, classes: Sequence[Sequence[str]]) -> bool | None:
    """Whether ``scope`` and one of ``classes`` select ``device`` (None: not read here)."""
    scoped = matches(device, scope) if scope else True
    if not scoped:
        return scoped
    for selectors in classes:
        answer = _all(matches(device, s) for s in selectors)
        if answer is not False:
            return answer
    return False


def _all(answers: Iterable[bool | None]) -> bool | None:
    """All true (True), one false (False), else not known (None)."""
    seen = list(answers)
    if False in seen:
        return False
    return None if None in seen else True
