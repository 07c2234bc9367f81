// One answer for every htmx request that does not swap: the page says what happened.
// Validation answers (400, 409, 422) are swapped like any page (see the htmx-config meta
// in base.html); anything else that fails (403, 404, 500, no network) is said here, in a
// live region above the content, so no form ever fails silently.
(function () {
  "use strict";
  function say(text) {
    var box = document.getElementById("request-error");
    if (!box) return;
    box.textContent = text;
    box.hidden = false;
    box.scrollIntoView({ block: "nearest" });
  }
  function reason(xhr) {
    var doc = new DOMParser().parseFromString(xhr.responseText || "", "text/html");
    var found = doc.querySelector("[data-reason], .error, h1");
    return found ? found.textContent.trim() : "";
  }
  document.addEventListener("htmx:beforeRequest", function () {
    var box = document.getElementById("request-error");
    if (box) box.hidden = true;
  });
  document.addEventListener("htmx:responseError", function (event) {
    var xhr = event.detail.xhr;
    var words = {
      401: "You are signed out: sign in again, then retry.",
      403: "Not allowed.",
      404: "Not found: it may have been deleted.",
      429: "Too many requests: wait a moment, then retry."
    };
    var detail = reason(xhr);
    var head = words[xhr.status] || "The server could not answer (" + xhr.status + "): nothing was changed by this request unless the page says so.";
    say(detail && detail !== head ? head + " " + detail : head);
  });
  document.addEventListener("htmx:sendError", function () {
    say("The portal could not be reached: check your connection, then retry. Nothing was sent.");
  });
})();

// Times the server wrote in the portal's time zone ({{ stamp|when }}: <time data-local>) are
// shown in the reader's own, with the year only when it is not this year; the exact time
// stays in the title.
(function () {
  "use strict";
  function localise(root) {
    var now = new Date();
    root.querySelectorAll("time[data-local]").forEach(function (node) {
      var stamp = new Date(node.getAttribute("datetime"));
      if (isNaN(stamp)) return;
      var options = { day: "numeric", month: "short", hour: "2-digit", minute: "2-digit", hour12: false };
      if (stamp.getFullYear() !== now.getFullYear()) options.year = "numeric";
      node.textContent = new Intl.DateTimeFormat(undefined, options).format(stamp);
      node.title = stamp.toString();
      node.removeAttribute("data-local");
    });
  }
  document.addEventListener("DOMContentLoaded", function () { localise(document); });
  document.addEventListener("htmx:afterSettle", function (event) { localise(event.target); });
})();

// Behaviour that would otherwise be inline (the Content-Security-Policy runs no inline
// script and no eval): a <select data-submit-on-change> submits its form when changed; an
// element polling with hx-trigger="every …" and data-poll-when-visible skips its request
// while the tab is hidden.
(function () {
  "use strict";
  document.addEventListener("change", function (event) {
    var field = event.target;
    if (field.matches && field.matches("select[data-submit-on-change]") && field.form) {
      field.form.submit();
    }
  });
  document.addEventListener("htmx:beforeRequest", function (event) {
    var elt = event.detail.elt;
    if (elt.hasAttribute("data-poll-when-visible") && document.visibilityState !== "visible") {
      event.preventDefault();
    }
  });
})();

// A form answered with errors brings them into view: the first refused field (the one
// marked aria-invalid) is focused and scrolled to the middle of the window; a refusal of
// no field (an alert in the form) is focused instead. After an htmx swap of a form, and
// on a page loaded with a refused field (a POST answered without htmx), unless the page
// put the focus somewhere itself (autofocus).
(function () {
  "use strict";
  function firstError(root, fieldsOnly) {
    var field = root.querySelector('[aria-invalid="true"]');
    if (field || fieldsOnly) return field;
    var alert = root.querySelector(".error[role=alert], [role=alert].error");
    if (alert && !alert.hasAttribute("tabindex")) alert.setAttribute("tabindex", "-1");
    return alert;
  }
  function bringIntoView(form, fieldsOnly) {
    var target = firstError(form, fieldsOnly === true);
    if (!target) return false;
    // A checkbox list is one field: its box is what is shown, its first box what is focused.
    if (target.matches("div, fieldset") && !target.hasAttribute("tabindex")) {
      var inner = target.querySelector("input, select, textarea");
      if (inner) target = inner;
    }
    target.focus({ preventScroll: true });
    (target.closest(".field") || target).scrollIntoView({ block: "center" });
    return true;
  }
  function formsIn(root) {
    if (root.matches && root.matches("form")) return [root];
    return Array.prototype.slice.call(root.querySelectorAll ? root.querySelectorAll("form") : []);
  }
  var submitted = false;  // only an answer to a sent form moves the focus, not a preview
  document.addEventListener("submit", function () { submitted = true; }, true);
  document.addEventListener("DOMContentLoaded", function () {
    if (document.activeElement && document.activeElement !== document.body) return;
    formsIn(document).some(function (form) { return bringIntoView(form, true); });
  });
  document.addEventListener("htmx:afterSettle", function (event) {
    if (!submitted) return;
    submitted = false;
    formsIn(event.target).some(function (form) { return bringIntoView(form, false); });
  });
})();
