"""Every form of every page answers bad input in the page: the pages are walked from the URL
conf (as the permission matrix does), each form found in them (``method="post"``, ``hx-post``,
a button's ``formaction``; ``method="get"`` filters too) is posted batches of bad values, one
field at a time and all at once. Never a 5xx; what is surely wrong for a field (a NUL, a
value beyond its length, an unknown choice, a non-number in a number, a bad or past date, an
empty required field) is refused next to that field, with a 4xx or a re-rendered form, and
nothing is written; htmx gets only the 4xx codes it is told to swap (base.html)."""

from __future__ import annotations

import datetime as dt
import re
from collections import defaultdict
from dataclasses import dataclass, field
from html.parser import HTMLParser
from urllib.parse import urljoin

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.http import HttpResponse
from django.test import Client
from django.urls import get_resolver

from changes.models import MigChangeRequest, QuotaChangeRequest
from portal.access.tokens import create_token
from portal.models import ApiToken, AuditEvent
from tests.unit.portal.test_page_permissions import _routes, objects, objects_snapshot

pytestmark = pytest.mark.django_db

__all__ = [
    "objects",
    "objects_snapshot",
]  # the permission matrix's objects (a MIG change, a drain, a quota request)

# Pages whose URL takes arguments: the page to walk for each (filled from ``objects``).
PAGES_WITH_ARGUMENTS = {
    "fleet/nodes/<str:name>/": "/fleet/nodes/gpu-a100-03/",
    "reports/<str:name>.csv": "/reports/gpu-hours.csv",
    "queues/cluster-queues/<str:name>/edit/": "/queues/cluster-queues/cq-train/edit/",
    "queues/priority-classes/<str:name>/edit/": "/queues/priority-classes/training-critical/edit/",
    "quota/<int:pk>/": "/quota/{qr}/",
    "changes/<int:pk>/": "/changes/{mc}/",
    "clusters/<str:name>/": "/clusters/default/",
    "clusters/<str:name>/edit/": "/clusters/default/edit/",
    "teams/<slug:slug>/offboard/": "/teams/team-dev/offboard/",
    "teams/<slug:slug>/members/": "/teams/team-a/members/",
    "costs/invoices/<slug:team>/<str:month>/": "/costs/invoices/team-a/2026-11/",
    "idle/teams/<slug:slug>/policy/": "/idle/teams/team-a/policy/",
}
# Routes not walked as pages, and why. Their forms are still posted where a page shows them.
NOT_WALKED = {
    "quota/<int:pk>/<str:action>/": "the decision buttons of /quota/<pk>/ (posted from there)",
    "changes/<int:pk>/<str:action>/": "the decision buttons of /changes/<pk>/ (posted from there)",
    "changes/preview/": "the change form's preview (posted from /changes/new/)",
    "changes/mig-policy/<str:cluster>/propose/": (
        "a cluster's MIG policy proposal (posted from /changes/mig-policy/)"
    ),
    "changes/mig-policy/changes/<int:pk>/<str:action>/": (
        "the decision buttons of /changes/mig-policy/ (posted from there)"
    ),
    "clusters/<str:name>/test/": "the connection test button of /clusters/<name>/ (posted from there)",
    "logout/": "signing out ends the walk's session; it takes no input",
    "oidc/authenticate/": "a redirect to the identity provider, no form",
    "oidc/callback/": "the identity provider's answer (tests/integration/test_sso.py)",
    "healthz": "a probe, no form",
    "readyz": "a probe, no form",
    "metrics": "a probe, no form",
    # A budget's page answers its forms' refusals in a message above them, not yet next to
    # the field (tests/unit/budgets/test_budgets.py holds the services' field errors).
    "budgets/<int:pk>/": "a budget's page: its refusals are messages, not yet walked",
    "budgets/<int:pk>/delete/": (
        "a budget's removal confirmation: one hidden confirm field, no input to refuse "
        "(tests/unit/budgets/test_budgets.py)"
    ),
    "budgets/<int:pk>/extend/": "the extension form of /budgets/<pk>/ (posted from there)",
    "budgets/extensions/<int:pk>/<str:action>/": "the decision buttons of /budgets/<pk>/",
    "costs/prices/<int:pk>/delete/": (
        "a price's delete confirmation: one hidden confirm field, no input to refuse "
        "(tests/unit/costs/test_pages.py)"
    ),
    "costs/invoices/<slug:team>/<str:month>.csv": "an invoice's CSV download, no form",
    "costs/panel/<slug:team>/": "the home's cost panel, loaded into /, no form",
    "workloads/<str:cluster>/<str:namespace>/<str:name>/": (
        "a workload's page has no form (tests/unit/overview/test_workloads.py reads it)"
    ),
}
# Forms not posted (by their action), and why.
NOT_POSTED = {"/logout/": "signing out takes no input and ends the session"}
# Who walks: each page is walked by these users (the sign-in page signed out).
WALKERS = ("admin", "lead-a", "approver")

LONG = "x" * 10_000
BAD_VALUES = {
    "empty": "",
    "long": LONG,
    "negative": "-1",
    "not a number": "ten",
    "1e999": "1e999",
    "huge": "9" * 40,
    "nul": "a\x00b",
    "unicode": "\u202egpu\u200b\ufeff\U0001f4a5\u0301\uffff",
    "unknown choice": "no-such-choice",
    "bad date": "2024-13-45T25:61",
    "past date": "2001-02-03T04:05",
}


def _a_time_to_come(value: str) -> bool:
    try:
        return dt.datetime.fromisoformat(value) > dt.datetime.now()
    except ValueError:
        return False


@dataclass
class Field:
    """One input of a form: its name, kind and what it offers."""

    name: str
    tag: str
    kind: str = "text"
    value: str = ""
    required: bool = False
    maxlength: int | None = None
    numeric: bool = False
    least: float | None = None
    options: list[str] = field(default_factory=list)
    checked: list[str] = field(default_factory=list)

    def surely_wrong(self, label: str, value: str) -> bool:
        """Whether ``value`` cannot be right for this field, whatever the form is about."""
        if self.name == "csrfmiddlewaretoken":
            return False
        if label == "nul":
            return True
        if self.kind in ("hidden", "button") or (self.kind == "checkbox" and len(self.options) < 2):
            return False  # a lone checkbox is on or off, whatever it sends
        if self.tag == "select" or self.kind in ("checkbox", "radio"):
            return value not in self.options and (value != "" or self.required)
        if value == "":
            return self.required
        if self.kind in ("date", "datetime-local"):
            return not _a_time_to_come(value)
        if self.numeric:
            number = re.fullmatch(r"-?\d{1,15}", value)
            return not number or (self.least is not None and int(value) < self.least)
        if self.tag == "input" and self.kind != "password" and label == "long":
            return True  # every one-line input of the portal has a model's length behind it
        return self.maxlength is not None and len(value) > self.maxlength


@dataclass
class Form:
    """A form found in a page: where it posts, whether htmx sends it, and its inputs."""

    method: str
    action: str
    htmx: bool
    fields: dict[str, Field]
    button: tuple[str, str] | None = None

    def baseline(self) -> dict[str, list[str]]:
        data: dict[str, list[str]] = {}
        for f in self.fields.values():
            if f.kind in ("checkbox", "radio"):
                data[f.name] = list(f.checked)
            else:
                data[f.name] = [f.value]
        if self.button:
            data[self.button[0]] = [self.button[1]]
        return data


class FormParser(HTMLParser):
    """The forms of a page with their inputs (stdlib only: the walk needs no browser)."""

    def __init__(self, page: str) -> None:
        super().__init__(convert_charrefs=True)
        self.page = page
        self.forms: list[Form] = []
        self._open: list[tuple[Form, list[Form]]] = []  # a form and the extra targets in it
        self._select: Field | None = None
        self._textarea: Field | None = None

    def _field(self, form: Form, name: str, tag: str, a: dict[str, str]) -> Field:
        known = form.fields.get(name)
        if known is None:
            maxlength, least = a.get("maxlength", ""), a.get("min", "")
            known = form.fields[name] = Field(
                name=name,
                tag=tag,
                kind=a.get("type", "text") if tag == "input" else tag,
                required="required" in a,
                maxlength=int(maxlength) if maxlength.isdigit() else None,
                numeric=a.get("inputmode") == "numeric" or a.get("type") == "number",
                least=float(least) if re.fullmatch(r"-?\d+", least) else None,
            )
        return known

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "form":
            method = a.get("method", "get").lower()
            action = urljoin(self.page, a.get("hx-post") or a.get("action") or self.page)
            self._open.append((Form(method, action, "hx-post" in a, {}), []))
            return
        if not self._open:
            return
        form, extra = self._open[-1]
        if "hx-post" in a:  # a part of the form that posts the whole form elsewhere (a preview)
            extra.append(Form("post", urljoin(self.page, a["hx-post"]), True, form.fields))
        name = a.get("name", "")
        if tag == "button" and a.get("formaction"):
            target = Form(form.method, urljoin(self.page, a["formaction"]), False, form.fields)
            target.button = (name, a.get("value", "")) if name else None
            extra.append(target)
        elif tag == "button" and name and form.button is None and "disabled" not in a:
            form.button = (name, a.get("value", ""))
            form.fields.setdefault(name, Field(name, tag, "button", a.get("value", "")))
        elif tag in ("input", "select", "textarea") and name and a.get("type") != "submit":
            f = self._field(form, name, tag, a)
            if f.kind in ("checkbox", "radio"):
                f.options.append(a.get("value", "on"))
                if "checked" in a:
                    f.checked.append(a.get("value", "on"))
            elif tag == "input":
                f.value = a.get("value", "")
            self._select = f if tag == "select" else None
            self._textarea = f if tag == "textarea" else None
        elif tag == "option" and self._select is not None:
            self._select.options.append(a.get("value", ""))
            if "selected" in a or not self._select.value:
                self._select.value = a.get("value", "")

    def handle_data(self, data: str) -> None:
        if self._textarea is not None:
            self._textarea.value += data

    def handle_endtag(self, tag: str) -> None:
        if tag == "select":
            self._select = None
        elif tag == "textarea":
            self._textarea = None
        elif tag == "form" and self._open:
            form, extra = self._open.pop()
            self.forms += [form, *extra]


def forms_of(url: str, html: str) -> list[Form]:
    parser = FormParser(url)
    parser.feed(html)
    return parser.forms


def writes() -> tuple[int, ...]:
    """What a refused post must leave as it was: every service writes an audit row (one
    query: this runs before and after each of some 2,000 posts)."""
    counts = ", ".join(
        f'(SELECT count(*) FROM "{model._meta.db_table}")'
        for model in (AuditEvent, MigChangeRequest, QuotaChangeRequest, ApiToken)
    )
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {counts}")
        return tuple(cursor.fetchone())


class ShownNear(HTMLParser):
    """Whether an answer marks the field ``name`` as wrong: ``aria-invalid`` on it, or an
    error (``class="error"``) in the same ``.field`` box or table cell."""

    def __init__(self, name: str) -> None:
        super().__init__(convert_charrefs=True)
        self.name = name
        self.found = False
        self._open: list[dict[str, bool]] = []  # every open div and cell; boxes marked

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        classes = a.get("class", "").split()
        if tag in ("div", "td"):
            box = tag == "td" or "field" in classes
            self._open.append({"box": box, "field": False, "error": False})
        if a.get("name") == self.name:
            self.found |= a.get("aria-invalid") == "true"
            for box in self._open:
                box["field"] = True
        if "error" in classes:
            for box in self._open:
                box["error"] = True

    def handle_endtag(self, tag: str) -> None:
        if tag in ("div", "td") and self._open:
            box = self._open.pop()
            self.found |= box["box"] and box["field"] and box["error"]


def shown_near(response: HttpResponse, name: str) -> bool:
    body = response.content.decode(errors="replace")
    if not response["Content-Type"].startswith("text/html"):
        return name in body  # the middleware's plain answer names the field
    parser = ShownNear(name)
    parser.feed(body)
    return parser.found


def post(client: Client, form: Form, data: dict[str, list[str]], htmx: bool) -> HttpResponse:
    headers = {"HX-Request": "true"} if htmx else {}
    if form.method == "get":
        return client.get(form.action, data, headers=headers)
    return client.post(form.action, data, headers=headers)


def check(
    client: Client,
    form: Form,
    data: dict[str, list[str]],
    changed: list[str],
    wrong: list[str],
    without_js: set[str],
) -> list[str]:
    """Post ``data`` (as htmx when htmx sends the form, and without where a value is wrong
    in a field not yet posted so: ``without_js``, the fields that were); what went wrong,
    in words."""
    problems = []
    # htmx sends the form: as htmx always, also without (no JS) where the value is wrong,
    # once per field (the view is the same; the page around the form is what differs).
    again = bool(set(wrong) - without_js)
    without_js.update(wrong)
    for htmx in ((True, False) if again else (True,)) if form.htmx else (False,):
        before = writes()
        response = post(client, form, data, htmx)
        code = response.status_code
        where = f"{form.method.upper()} {form.action}{' (htmx)' if htmx else ''}"
        shown = {k: (v[0][:20] if v else "") for k, v in data.items() if k in changed}
        if code >= 500:
            problems.append(f"{where} {shown}: {code}")
        elif htmx and 400 <= code < 500 and code not in (400, 409, 422):
            problems.append(f"{where} {shown}: {code}, which htmx would not show")
        if not wrong or form.method == "get" or code >= 500:
            continue
        if writes() != before:
            problems.append(f"{where} {shown}: accepted ({code}), and written")
        elif code in (301, 302, 303) or (code == 204 and "HX-Redirect" in response):
            problems.append(f"{where} {shown}: accepted ({code})")
        elif code not in (403, 404) and not any(shown_near(response, name) for name in wrong):
            problems.append(f"{where} {shown}: {code} without an error next to {wrong}")
    return problems


def fuzz(client: Client, form: Form) -> list[str]:
    """One field at a time, then every field at once, with each bad value."""
    problems: list[str] = []
    without_js: set[str] = set()
    for label, value in BAD_VALUES.items():
        for f in form.fields.values():
            if f.name == "csrfmiddlewaretoken":
                continue
            data = form.baseline()
            data[f.name] = [value]
            wrong = [f.name] if f.surely_wrong(label, value) else []
            problems += check(client, form, data, [f.name], wrong, without_js)
        everything = {name: [value] for name in form.fields if name != "csrfmiddlewaretoken"} | {
            k: v for k, v in form.baseline().items() if k == "csrfmiddlewaretoken"
        }
        wrong = [f.name for f in form.fields.values() if f.surely_wrong(label, value)]
        problems += check(client, form, everything, list(form.fields), wrong, without_js)
    return problems


def walked_pages() -> list[str]:
    pages = []
    for route in _routes(get_resolver()):
        if route.startswith(("api/", "admin/")) or route in NOT_WALKED:
            continue
        pages.append("/" + route if "<" not in route else PAGES_WITH_ARGUMENTS.get(route, route))
    return pages


def test_every_page_is_walked_or_skipped_with_a_reason() -> None:
    """A new page is walked at once if it takes no argument; otherwise name the page to walk
    (or why not)."""
    unknown = [page for page in walked_pages() if "<" in page]
    assert not unknown, f"add to PAGES_WITH_ARGUMENTS or NOT_WALKED: {unknown}"


@pytest.fixture
def tokens(objects: dict[str, int]) -> None:
    """A token for each walker, so that the tokens page shows its revoke buttons."""
    for username in WALKERS:
        create_token(user=User.objects.get(username=username), name="ci", days=30)


@pytest.mark.parametrize("page", walked_pages())
def test_every_form_answers_bad_input_in_the_page(
    objects: dict[str, int], tokens: None, page: str
) -> None:
    url = page.format(**objects)
    walkers = ("anonymous",) if url == "/login/" else WALKERS
    problems: list[str] = []
    seen: defaultdict[tuple[str, str], list[set[str]]] = defaultdict(list)
    for user in walkers:
        client = Client(raise_request_exception=False)
        if user != "anonymous":
            client.force_login(User.objects.get(username=user))
        response = client.get(url)
        if response.status_code != 200 or not response["Content-Type"].startswith("text/html"):
            continue
        for form in forms_of(url, response.content.decode()):
            path = re.sub(r"\?.*", "", form.action.removeprefix("http://testserver"))
            # Once per form; a walker seeing fewer of its fields than another adds nothing.
            key = (form.method, path)
            if path in NOT_POSTED or any(set(form.fields) <= names for names in seen[key]):
                continue
            seen[key].append(set(form.fields))
            form.action = path
            problems += [f"{user}: {p}" for p in fuzz(client, form)]
    assert not problems, "\n".join(problems)
