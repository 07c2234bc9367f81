"""A three-way merge of an edit form's values (pure): what the form showed (``base``), what
this person sent (``mine``) and what is stored now (``theirs``, someone else's save since).

A field this person did not touch takes the stored value (the other save stands); a field
only this person changed keeps their edit; a field both changed to different values is a
conflict: this person's value, flagged beside the stored one. The edit pages refuse a save
whose base is not the stored version, and offer the merge to read and save again, as the
API's ``If-Match`` refuses a PUT on a changed object."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Merge:
    """The merged values; the fields someone else changed since the form was shown (name,
    value shown, value now); of those, the ones this person changed too, differently."""

    values: dict[str, str]
    changed: list[tuple[str, str, str]] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)


def three_way(base: dict[str, str], mine: dict[str, str], theirs: dict[str, str]) -> Merge:
    """Merge ``mine`` into ``theirs`` over ``base``. A field the stored object no longer has
    is dropped; one it gained takes its stored value."""
    values: dict[str, str] = {}
    changed: list[tuple[str, str, str]] = []
    conflicts: list[str] = []
    for name, now in theirs.items():
        shown = base.get(name, now)
        sent = mine.get(name, shown)
        if now != shown:
            changed.append((name, shown, now))
        if sent == shown:  # untouched here: the stored value stands
            values[name] = now
        elif now in (shown, sent):  # changed here only (or the same way)
            values[name] = sent
        else:  # changed here and there, differently: this person's value, flagged
            values[name] = sent
            conflicts.append(name)
    return Merge(values, changed, conflicts)
