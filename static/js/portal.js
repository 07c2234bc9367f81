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
