"""The three-way merge of an edit form (pure): untouched fields take the stored value, this
person's edits stay, a field both changed differently is a conflict."""

from __future__ import annotations

from queues.merge import three_way


def test_untouched_fields_keep_the_other_save_and_edits_stay() -> None:
    base = {"nominal": "12", "borrowing": "", "weight": "1"}
    theirs = {"nominal": "16", "borrowing": "", "weight": "1"}
    mine = {"nominal": "12", "borrowing": "4", "weight": "1"}
    merge = three_way(base, mine, theirs)
    assert merge.values == {"nominal": "16", "borrowing": "4", "weight": "1"}
    assert (merge.changed, merge.conflicts) == ([("nominal", "12", "16")], [])


def test_a_field_changed_on_both_sides_is_a_conflict_unless_alike() -> None:
    base, theirs = {"nominal": "12"}, {"nominal": "16"}
    assert three_way(base, {"nominal": "14"}, theirs).conflicts == ["nominal"]
    assert three_way(base, {"nominal": "14"}, theirs).values == {"nominal": "14"}
    assert three_way(base, {"nominal": "16"}, theirs).conflicts == []


def test_fields_gained_or_lost_follow_the_stored_object() -> None:
    merge = three_way({"a": "1", "gone": "2"}, {"a": "1", "gone": "3"}, {"a": "1", "new": "5"})
    assert merge.values == {"a": "1", "new": "5"}
