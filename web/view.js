// The page's DOM helpers and the views its parts share (loaded first: app.js, alternatives.js,
// scroll.js, own_check.js and compose.js use them). Every piece of user or model text goes in
// through textContent, never as HTML.
"use strict";

const $ = (id) => document.getElementById(id);

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

// An error's message ("中文 / English", as the API gives it) in a mode's alert box; "" hides it.
function showError(message, id = "error") {
  $(id).textContent = message;
  $(id).hidden = !message;
}

function announce(message) {
  $("status").textContent = message; // a polite live region: screen readers hear it
}

// A tone mark (平/仄/中, or a blank) as the lines and the alternatives show it above a character.
function toneMark(tone) {
  return el("span", "mark tone-" + ({ 平: "level", 仄: "oblique", 中: "either" }[tone] || "none"), tone || "\u00a0");
}

// Arrow keys move between a line's character buttons; Tab enters the line once (at the
// character last focused) and leaves it, instead of stopping at every character.
function rovingFocus(line) {
  const cells = () => [...line.querySelectorAll("button.ch")];
  line.addEventListener("keydown", (event) => {
    const all = cells();
    const at = all.indexOf(document.activeElement);
    const step = { ArrowRight: 1, ArrowDown: 1, ArrowLeft: -1, ArrowUp: -1 }[event.key];
    const to = event.key === "Home" ? 0 : event.key === "End" ? all.length - 1 : step ? at + step : -1;
    if (at < 0 || to < 0 || to >= all.length) return;
    event.preventDefault();
    all.forEach((cell, i) => (cell.tabIndex = i === to ? 0 : -1));
    all[to].focus();
  });
}

// A line as characters, each with its tone mark (平/仄/中) above it; ``name``: the side of a
// pickable line (下联, or 上联 when written for a lower line).
function lineView(text, tones, onPick, name = "下联") {
  const line = el("span", "line");
  if (onPick) {
    line.setAttribute("role", "group");
    line.setAttribute("aria-label", `${name} ${text}（方向键选字，回车看可换的字）`);
    rovingFocus(line);
  }
  [...text].forEach((ch, i) => {
    const cell = el(onPick ? "button" : "span", "ch");
    if (onPick) {
      cell.type = "button";
      cell.tabIndex = i === 0 ? 0 : -1;
      cell.title = "换字或锁定";
      cell.setAttribute("aria-label", `${name}第 ${i + 1} 字「${ch}」：换字或锁定`);
      cell.addEventListener("click", () => onPick(i, ch));
    }
    cell.append(toneMark(tones[i] || ""));
    cell.append(el("span", "char", ch));
    line.append(cell);
  });
  return line;
}

// The rules of a check (POST /api/v1/check's ``rules``, and each composed couplet's), each kept (✓),
// broken (✗) or not judged (–), the rhythm with its share.
function checkRulesView(rules, id) {
  const list = el("ul", "report");
  if (id) list.id = id;
  list.append(
    ...rules.map((rule) => {
      const state = rule.kept === true ? "ok" : rule.kept === false ? "bad" : "unknown";
      const text = (state === "ok" ? "✓ " : state === "bad" ? "✗ " : "– ") + rule.label;
      const item = el("li", `rule ${state}`, rule.name === "rhythm" && rule.share !== null
        ? `${text} ${Math.round(rule.share * 100)}%` : text);
      item.dataset.rule = rule.name;
      return item;
    }),
  );
  return list;
}
