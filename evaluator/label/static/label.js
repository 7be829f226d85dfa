// The labelling page's keys. The page works without this script (plain forms); it only
// adds keys: the key shown beside a value chooses it for the highlighted criterion and
// moves on to the next one, x = cannot judge (then its reason; Enter or down moves on),
// up/down = criterion, Enter = save and go on (not while a criterion is unanswered),
// left/right = previous/next case, n = next unlabelled case. A key meant for what has the
// focus (Enter on a link or button, a digit typed in a text box) is left to it.
(function () {
  "use strict";
  function follow(id) {
    var link = document.getElementById(id);
    if (link) { window.location.assign(link.href); }
  }
  function typing(target) {
    return target && (target.tagName === "TEXTAREA" ||
      (target.tagName === "INPUT" && target.type === "text"));
  }
  function onControl(target) {  // a link or button: Enter, space and letters are its own
    return target && target.closest && target.closest("a, button");
  }
  function modified(event) { return event.ctrlKey || event.metaKey || event.altKey; }

  var form = document.getElementById("label-form");
  if (!form) {  // the end page: back to the last case, or on to the next unlabelled one
    document.addEventListener("keydown", function (event) {
      if (modified(event) || typing(event.target)) { return; }
      if (event.key === "ArrowLeft") { event.preventDefault(); follow("prev"); }
      else if (event.key === "n") { follow("next-unlabelled"); }
    });
    return;
  }
  var sets = Array.prototype.slice.call(form.querySelectorAll("fieldset.criterion"));
  var notice = document.getElementById("unanswered");
  var current = 0;

  function reasonOf(set) { return set.querySelector("input.reason"); }
  function cannot(set) { return set.querySelector('input[data-key="x"]:checked'); }
  function answered(set) {
    if (cannot(set)) { return reasonOf(set).value.trim() !== ""; }
    return Array.prototype.some.call(set.querySelectorAll("input"), function (input) {
      if (input.type === "radio") { return input.checked; }
      return input.classList.contains("number") && input.value.trim() !== "";
    });
  }
  function unanswered() { return sets.filter(function (set) { return !answered(set); }); }
  function highlight(i) {
    current = Math.max(0, Math.min(sets.length - 1, i));
    sets.forEach(function (set, j) { set.classList.toggle("current", j === current); });
  }
  function focusSet(i) {
    if (!sets.length) { return; }
    highlight(i);
    var set = sets[current];
    if (cannot(set) && !reasonOf(set).value.trim()) { reasonOf(set).focus(); return; }
    var number = set.querySelector("input.number");
    if (number && !cannot(set)) { number.focus(); return; }
    if (typing(document.activeElement)) { document.activeElement.blur(); }
    set.scrollIntoView({block: "nearest"});
  }
  function chooseCannot(set) {
    var box = set.querySelector('input[data-key="x"]');
    box.checked = true;
    var reason = reasonOf(set);
    if (!reason.value.trim()) { reason.focus(); } else { focusSet(current + 1); }
  }
  function save() {
    if (form.requestSubmit) { form.requestSubmit(); } else { form.submit(); }
  }
  // Saving with a criterion unanswered is refused here (and by the server): the page says
  // which, and stays on the case.
  form.addEventListener("submit", function (event) {
    var left = unanswered();
    if (!left.length) { return; }
    event.preventDefault();
    var names = left.map(function (set) { return set.getAttribute("data-criterion"); });
    notice.textContent = "Not saved: " + names.join(", ") + " not answered yet (choose a " +
      "value, or x and why).";
    notice.hidden = false;
    focusSet(sets.indexOf(left[0]));
    // Off the Save button, so that the next digit answers the criterion.
    if (!typing(document.activeElement)) { form.focus({preventScroll: true}); }
  });
  form.addEventListener("change", function () {
    if (!notice.hidden && !unanswered().length) { notice.hidden = true; }
  });
  sets.forEach(function (set, j) {
    set.addEventListener("click", function () { highlight(j); });
    set.addEventListener("focusin", function () { highlight(j); });
  });
  var first = sets.findIndex(function (set) { return !answered(set); });
  highlight(first < 0 ? 0 : first);  // on load: the case is read first, from the top
  form.setAttribute("tabindex", "-1");
  if (document.activeElement === document.body || !document.activeElement) {
    form.focus({preventScroll: true});
  }

  document.addEventListener("keydown", function (event) {
    if (modified(event)) { return; }
    var key = event.key, target = event.target;
    if (typing(target)) {
      var set = target.closest("fieldset.criterion");
      if (key === "Escape") { target.blur(); return; }
      if (!set) { return; }  // the comment box: Enter saves (the form's own submit)
      var i = sets.indexOf(set);
      if (key === "x" && target.classList.contains("number")) {
        event.preventDefault(); highlight(i); chooseCannot(set);
      } else if (key === "ArrowDown" || key === "ArrowUp") {
        event.preventDefault(); focusSet(i + (key === "ArrowDown" ? 1 : -1));
      } else if (key === "Enter") {
        // In a criterion's box Enter goes on to the next criterion; after the last, saves.
        event.preventDefault();
        if (i < sets.length - 1) { focusSet(i + 1); } else { target.blur(); save(); }
      }
      return;  // any other key is typed
    }
    if (onControl(target) && (key === "Enter" || key === " " || key.length === 1) &&
        key !== "n") {
      return;  // Enter follows the link or presses the button, as it should
    }
    if (key === "Enter") {
      event.preventDefault(); save();
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
      var here = sets[current];
      if (key === "x") { event.preventDefault(); chooseCannot(here); return; }
      var choice = here.querySelector('input[type=radio][data-key="' + CSS.escape(key) + '"]');
      if (choice) {
        event.preventDefault();
        choice.checked = true;
        choice.dispatchEvent(new Event("change", {bubbles: true}));
        focusSet(current + 1);
      }
    }
  });
})();
