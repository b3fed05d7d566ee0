// Syntax highlighting and SSA linking for the explore page (no libraries).
(function () {
  "use strict";

  function esc(s) {
    return s.replace(/[&<>"]/g, function (c) {
      return { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" }[c];
    });
  }

  // Per language: [class, pattern] pairs, tried left to right as one alternation.
  var NUMBER = /-?\b\d+(?:\.\d+)?(?:[eE][+-]?\d+)?\b/;
  var STRING = /"(?:[^"\\]|\\.)*"/;
  var SPECS = {
    mlir: [["c", /\/\/.*$/], ["s", STRING], ["v", /%[\w$.\-]+(?:#\d+)?/], ["bb", /\^[\w$.\-]+/],
           ["y", /@[\w$.\-]+/],
           ["t", /(?:tensor|memref|vector|complex)<[^<>]*(?:<[^<>]*>[^<>]*)*>|\b(?:[su]?i\d+|bf16|f\d+|index)\b/],
           ["a", /\b[a-z_]\w*\.[a-z_][\w.]*(?=\s*=)/], ["o", /\b[a-z_]\w*\.[a-z_][\w.]*/],
           ["k", /\b(?:module|attributes|return|dense|public|private|applies|across|dimensions|init|to)\b/],
           ["n", NUMBER]],
    hlo: [["c", /\/\/.*$/], ["s", STRING], ["v", /%[\w.\-]+/],
          ["t", /\b(?:pred|bf16|[suf]\d+|c\d+|token)\[[\d,]*\](?:\{[^}]*\})?/], ["o", /\b[a-z][\w\-]*(?=\()/],
          ["k", /\b(?:ROOT|ENTRY|HloModule|true|false)\b/], ["n", NUMBER]],
    jaxpr: [["s", STRING], ["t", /\b(?:pred|bool|bf16|[iuf]\d+|c\d+)\[[\d,]*\]/],
            ["k", /\b(?:lambda|let|in)\b/], ["o", /\b[a-z_]\w*(?=\[|\s+[a-z])/], ["n", NUMBER]]
  };
  var RULES = {};
  Object.keys(SPECS).forEach(function (lang) {
    RULES[lang] = {
      classes: SPECS[lang].map(function (p) { return p[0]; }),
      rx: new RegExp(SPECS[lang].map(function (p) { return "(" + p[1].source + ")"; }).join("|"), "g")
    };
  });
  var DEF_AFTER = /^(?::\d+)?\s*=(?!=)/;
  var ARG_AFTER = /^:\s/;

  // SSA scoping: each definition gets its own key; a use takes the key of
  // the innermost visible definition of its name (regions open with "{").
  function Scopes() { this.stack = [{}]; this.count = 0; }
  Scopes.prototype.define = function (name) {
    var key = "d" + (++this.count);
    this.stack[this.stack.length - 1][name] = key;
    return key;
  };
  Scopes.prototype.use = function (name) {
    for (var i = this.stack.length - 1; i >= 0; i--) if (name in this.stack[i]) return this.stack[i][name];
    return "u:" + name;
  };
  Scopes.prototype.line = function (text, lang, inner) {
    if (lang !== "mlir") return inner();
    var t = text.trim();
    if (t.charAt(0) === "}" && this.stack.length > 1) this.stack.pop();
    var out = inner();
    if (t.charAt(t.length - 1) === "{") this.stack.push({});
    return out;
  };

  function highlightLine(text, lang, scopes) {
    var rule = RULES[lang] || RULES.mlir, rx = rule.rx;
    var out = "", last = 0, m;
    rx.lastIndex = 0;
    while ((m = rx.exec(text)) !== null) {
      if (m[0] === "") { rx.lastIndex++; continue; }
      var k = 1;
      while (k < m.length && m[k] === undefined) k++;
      var cls = rule.classes[k - 1] || "";
      out += esc(text.slice(last, m.index));
      if (cls === "s" && /^"[a-z_]+\.[\w.]+"$/.test(m[0])) cls = "o";  // generic op names
      if (cls === "v") {
        var name = m[0].replace(/#\d+$/, "");
        var after = text.slice(rx.lastIndex);
        var before = text.slice(0, m.index).trim();
        var isDef = DEF_AFTER.test(after) ||
          (ARG_AFTER.test(after) && /^\s*(\^|func\.func\b)/.test(text)) ||  // function and block arguments
          (lang === "hlo" && /^\s*\(/.test(after) && (before === "" || before === "ENTRY"));  // computations
        var key = isDef ? scopes.define(name) : scopes.use(name);
        out += '<span class="v' + (isDef ? " def" : "") + '" data-v="' + key + '">' +
          esc(m[0]) + "</span>";
      } else {
        out += '<span class="' + cls + '">' + esc(m[0]) + "</span>";
      }
      last = rx.lastIndex;
    }
    return out + esc(text.slice(last));
  }

  function highlight(pre) {
    var lang = pre.getAttribute("data-lang") || "mlir";
    var scopes = new Scopes();
    function one(text) {
      return scopes.line(text, lang, function () { return highlightLine(text, lang, scopes); });
    }
    var lines = pre.querySelectorAll("span.l");
    if (!lines.length) {  // plain text: wrap each line
      pre.innerHTML = pre.textContent.split("\n").map(function (t) {
        return '<span class="l">' + one(t) + "</span>";
      }).join("\n");
      return;
    }
    for (var i = 0; i < lines.length; i++) lines[i].innerHTML = one(lines[i].textContent);
  }

  var selected = null;
  function select(span) {
    var marked = document.querySelectorAll(".v.hl");
    for (var i = 0; i < marked.length; i++) marked[i].classList.remove("hl", "hldef");
    var status = document.getElementById("status");
    if (!span || selected === span.getAttribute("data-v") + "|" + span.closest("pre").id) {
      selected = null;
      status.hidden = true;
      return;
    }
    var pre = span.closest("pre");
    var key = span.getAttribute("data-v");
    var same = pre.querySelectorAll('.v[data-v="' + key + '"]');
    var defs = 0;
    for (var j = 0; j < same.length; j++) {
      same[j].classList.add("hl");
      if (same[j].classList.contains("def")) { same[j].classList.add("hldef"); defs++; }
    }
    selected = key + "|" + pre.id;
    status.hidden = false;
    status.textContent = span.textContent.replace(/#\d+$/, "") + ": " +
      (defs ? "definition" : "no definition in this block") + " and " + (same.length - defs) + " use" +
      (same.length - defs === 1 ? "" : "s") + " highlighted (click again to clear)";
  }

  function init() {
    var pres = document.querySelectorAll("pre.ir");
    for (var i = 0; i < pres.length; i++) {
      if (!pres[i].id) pres[i].id = "ir-" + i;
      highlight(pres[i]);
    }
    document.addEventListener("click", function (e) {
      var span = e.target.closest ? e.target.closest("span.v") : null;
      if (span) select(span);
    });
    var ms = performance.now();
    document.body.setAttribute("data-ready-ms", ms.toFixed(1));
    var slot = document.getElementById("load-ms");
    if (slot) slot.textContent = ms.toFixed(0) + " ms";
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
