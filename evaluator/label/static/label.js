// The labelling page's keys. The page works without this script (plain forms); it only
// adds keys: the key shown beside a value chooses it for the highlighted criterion and
// moves on to the next one, x = cannot judge, up/down = criterion, Enter = save and go on,
// left/right = previous/next case, n = next unlabelled case.
(function () {
  "use strict";
  var form = document.getElementById("label-form");
  if (!form) { return; }
  var sets = Array.prototype.slice.call(form.querySelectorAll("fieldset.criterion"));
  var current = 0;

  function answered(set) {
    return Array.prototype.some.call(set.querySelectorAll("input"), function (input) {
      return (input.type === "radio" || input.type === "checkbox") ? input.checked
        : input.value.trim() !== "";
    });
  }
  function focusSet(i, quiet) {
    if (!sets.length) { return; }
    current = Math.max(0, Math.min(sets.length - 1, i));
    sets.forEach(function (set, j) { set.classList.toggle("current", j === current); });
    if (quiet) { return; }  // on load: the case is read first, from the top
    var text = sets[current].querySelector("input[type=text]");
    if (text) { text.focus(); } else { sets[current].scrollIntoView({block: "nearest"}); }
  }
  function follow(id) {
    var link = document.getElementById(id);
    if (link) { window.location.assign(link.href); }
  }
  function typing(target) {
    return target && (target.tagName === "TEXTAREA" ||
      (target.tagName === "INPUT" && target.type === "text"));
  }
  sets.forEach(function (set, j) {
    set.addEventListener("click", function () { current = j; focusSet(j); });
  });
  var first = sets.findIndex(function (set) { return !answered(set); });
  focusSet(first < 0 ? 0 : first, true);
  if (document.activeElement === document.body || !document.activeElement) {
    form.setAttribute("tabindex", "-1");
    form.focus({preventScroll: true});
  }

  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey) { return; }
    var key = event.key;
    if (typing(event.target)) {
      if (key === "Escape") { event.target.blur(); }
      if ((key === "ArrowDown" || key === "ArrowUp") && event.target.closest("fieldset")) {
        event.preventDefault();
        event.target.blur();
        focusSet(current + (key === "ArrowDown" ? 1 : -1));
      }
      return;  // Enter in a text box submits the form by itself
    }
    if (key === "Enter") {
      event.preventDefault();
      if (form.requestSubmit) { form.requestSubmit(); } else { form.submit(); }
    } else if (key === "ArrowLeft") {
      event.preventDefault(); follow("prev");
    } else if (key === "ArrowRight") {
      event.preventDefault(); follow("next");
    } else if (key === "ArrowDown") {
      event.preventDefault(); focusSet(current + 1);
    } else if (key === "ArrowUp") {
      event.preventDefault(); focusSet(current - 1);
    } else if (key === "n") {
      follow("next-unlabelled");
    } else if (sets.length) {
      var set = sets[current];
      var choice = set.querySelector('input[data-key="' + CSS.escape(key) + '"]');
      if (!choice && key === "x") { choice = set.querySelector('input[type=checkbox]'); }
      if (choice) {
        event.preventDefault();
        choice.checked = true;
        if (key === "x") {
          var reason = form.querySelector('input[name="reason"]');
          if (reason && !reason.value) { reason.focus(); return; }
        }
        focusSet(current + 1);
      }
    }
  });
})();
