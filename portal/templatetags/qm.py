"""``{% load qm %}``: numbers and times as people read them, one set for every page.

- ``{{ n|thousands }}`` 5,000 · ``{{ x|number }}`` at most one decimal (``1,234.5``, ``3``)
  · ``{{ ratio|percent }}`` 75%
- ``{{ bytes|gib }}`` 64 GiB, 1.5 GiB, 512 MiB · ``{{ mebibytes|mib }}`` the same from MiB
  (DCGM's frame-buffer counts) · ``{{ "64Gi"|quantity:"memory" }}`` a
  Kubernetes quantity in the unit its resource is read in (memory in GiB, CPU in cores,
  devices counted)
- ``{{ seconds|duration }}`` 45 s, 12 min, 2 h 10 min, 3 d 4 h (a ``timedelta`` too)
- ``{{ start|took:end }}`` how long from one moment to the other: 45 s, 2 h 10 min
- ``{{ stamp|ago }}`` just now, 5 min ago, in 2 h · ``{{ stamp|when }}`` a ``<time>`` element:
  "2 Dec, 14:05" (the year shown when it is not this year), which the browser turns into
  its own local time (static/js/portal.js)
- ``{{ pod.gpu_requests|gpus }}`` 2 GPUs, 1 MIG 3g.40gb slice (what a pod or workload holds)
- ``{{ code|words }}`` Breaks quota, Needs a drain, Not ready (codes and states in words)

Anything a filter cannot read is shown as it came (an empty value as a dash), so a page never
fails on a number it did not expect.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

from django import template
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString

from portal.vocabulary import numbers
from portal.vocabulary.numbers import DASH
from portal.vocabulary.words import code_words

register = template.Library()

_GIB = 2**30
_MIB = 2**20
_MINUTE, _HOUR, _DAY = 60, 3600, 86400
_MEMORY = re.compile(r"(^|\.)(memory|ephemeral-storage|storage|hugepages-[^.]+)$")
_CPU = re.compile(r"(^|\.)cpu$")


@register.filter
def number(value: Any, places: int = 1) -> str:
    """At most ``places`` decimals (one unless told), thousands separated: 1,234.5."""
    return numbers.number(value, places)


@register.filter
def thousands(value: Any) -> str:
    """A count with thousands separators: 5,000 (a fraction keeps one decimal)."""
    return number(value, 1)


@register.filter
def percent(value: Any) -> str:
    """A ratio (0.75) as a percentage: 75%; 0.5% keeps its decimal."""
    amount = numbers.as_fraction(value)
    if amount is None:
        return numbers.as_came(value)
    return f"{numbers.decimal(amount * 100, 1)}%"


@register.filter
def gib(value: Any) -> str:
    """Bytes (a number or a quantity such as ``64Gi``) in GiB, below 1 GiB in MiB."""
    amount = numbers.as_fraction(value)
    if amount is None:
        return numbers.as_came(value)
    if amount == 0:
        return "0 GiB"
    if abs(amount) < _GIB:
        return f"{numbers.decimal(amount / _MIB, 1)} MiB"
    return f"{numbers.decimal(amount / _GIB, 1)} GiB"


@register.filter
def mib(value: Any) -> str:
    """A count of MiB (DCGM reports GPU memory so) as ``gib`` shows bytes: 79.6 GiB."""
    amount = numbers.as_fraction(value)
    if amount is None:
        return numbers.as_came(value)
    return gib(amount * _MIB)


@register.filter
def quantity(value: Any, resource: str = "") -> str:
    """A Kubernetes quantity read as its resource is: memory and storage in GiB, CPU in
    cores (``500m`` is 0.5 cores), devices and counts as numbers."""
    amount = numbers.as_fraction(value)
    if amount is None:
        return numbers.as_came(value)
    name = str(resource or "")
    if _MEMORY.search(name):
        return gib(amount)
    if _CPU.search(name):
        cores = numbers.decimal(amount, 1 if amount >= 1 else 3)
        return f"{cores} core" if amount == 1 else f"{cores} cores"
    return numbers.decimal(amount, 1)


def _seconds(value: Any) -> float | None:
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    amount = numbers.as_fraction(value)
    return None if amount is None else float(amount)


def _span(seconds: float) -> str:
    """A length of time in the two largest units that mean something."""
    seconds = abs(seconds)
    if seconds < _MINUTE:
        return f"{int(seconds)} s"
    if seconds < _HOUR:
        return f"{int(seconds // _MINUTE)} min"
    if seconds < _DAY:
        hours, rest = divmod(int(seconds), _HOUR)
        minutes = rest // _MINUTE
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    days, rest = divmod(int(seconds), _DAY)
    hours = rest // _HOUR
    return f"{days:,} d {hours} h" if hours else f"{days:,} d"


@register.filter
def duration(value: Any) -> str:
    """Seconds or a timedelta as people say them: 45 s, 12 min, 2 h 10 min, 3 d 4 h."""
    seconds = _seconds(value)
    if seconds is None:
        return numbers.as_came(value)
    return _span(seconds)


@register.filter
def took(start: Any, end: Any) -> str:
    """How long from ``start`` to ``end`` (two moments): under a second, 45 s, 2 h 10 min;
    a dash when either is missing (a step still running has no end)."""
    if not isinstance(start, dt.datetime) or not isinstance(end, dt.datetime):
        return DASH
    seconds = (_aware(end) - _aware(start)).total_seconds()
    return "under a second" if 0 <= seconds < 1 else _span(seconds)


def _aware(value: dt.datetime | dt.date) -> dt.datetime:
    if not isinstance(value, dt.datetime):
        value = dt.datetime.combine(value, dt.time.min)
    if timezone.is_naive(value):
        value = timezone.make_aware(value, dt.UTC)
    return value


@register.filter
def ago(value: Any, now: dt.datetime | None = None) -> str:
    """How long ago (or how soon): just now, 5 min ago, 2 h 10 min ago, in 3 d."""
    if not isinstance(value, dt.datetime | dt.date):
        return numbers.as_came(value)
    seconds = ((now or timezone.now()) - _aware(value)).total_seconds()
    if abs(seconds) < _MINUTE:
        return "just now"
    return f"{_span(seconds)} ago" if seconds > 0 else f"in {_span(seconds)}"


def _shown(stamp: dt.datetime, today: dt.date) -> str:
    day = f"{stamp.day} {stamp:%b}"
    if stamp.year != today.year:
        day += f" {stamp.year}"
    return f"{day}, {stamp:%H:%M}"


@register.filter(is_safe=True)
def when(value: Any, now: dt.datetime | None = None) -> SafeString | str:
    """A moment as a ``<time>`` element: the portal's time zone on the server ("2 Dec,
    14:05"; "2 Dec 2025, 14:05" when not this year), the reader's own in the browser; the
    exact time in its title."""
    if not isinstance(value, dt.datetime | dt.date):
        return numbers.as_came(value)
    stamp = timezone.localtime(_aware(value))
    today = timezone.localtime(now or timezone.now()).date()
    return format_html(
        '<time datetime="{}" data-local title="{}">{}</time>',
        stamp.isoformat(timespec="seconds"),
        f"{stamp:%Y-%m-%d %H:%M:%S} {stamp.tzname()}",
        _shown(stamp, today),
    )


@register.filter
def words(value: Any) -> str:
    """A code or state in words: ``breaks_quota`` → Breaks quota, ``NotReady`` → Not ready,
    ``mig-reconfiguring`` → MIG reconfiguring."""
    if value in (None, ""):
        return DASH
    return code_words(str(value))


_GPU = "nvidia.com/gpu"
_MIG = "nvidia.com/mig-"


@register.filter
def gpus(value: Any) -> str:
    """What a pod or workload holds of GPUs, from its requests (resource -> count): 2 GPUs,
    1 MIG 3g.40gb slice, 3 MIG 1g.10gb slices + 1 GPU; other resources are left out, and
    none at all reads "no GPU"."""
    if not isinstance(value, dict):
        return numbers.as_came(value)
    parts = []
    for resource, count in sorted(value.items(), key=lambda i: (i[0] == _GPU, i[0])):
        amount = numbers.as_fraction(count)
        if amount is None or amount == 0:
            continue
        shown = numbers.decimal(amount, 1)
        if resource == _GPU:
            parts.append(f"{shown} GPU" if amount == 1 else f"{shown} GPUs")
        elif str(resource).startswith(_MIG):
            profile = str(resource).removeprefix(_MIG)
            parts.append(f"{shown} MIG {profile} slice{'' if amount == 1 else 's'}")
    return " + ".join(parts) or "no GPU"
