// Runs first: every error after this point lands in #js-errors, where a
// headless browser's --dump-dom (and a reader) can see it.
(function () {
  var errors = [];
  function show() {
    var box = document.getElementById("js-errors");
    if (box && errors.length) { box.hidden = false; box.textContent = errors.join("\n"); }
  }
  function report(text) { errors.push(text); show(); }
  window.__pxlaErrors = errors;
  window.addEventListener("error", function (e) {
    report("error: " + e.message + " (line " + e.lineno + ":" + e.colno + ")");
  });
  window.addEventListener("unhandledrejection", function (e) { report("unhandled rejection: " + e.reason); });
  var consoleError = console.error;
  console.error = function () {
    report("console.error: " + Array.prototype.join.call(arguments, " "));
    return consoleError.apply(console, arguments);
  };
  document.addEventListener("DOMContentLoaded", show);  // errors from before #js-errors existed
})();
