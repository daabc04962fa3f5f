// The alternatives of one character of a candidate (loaded after app.js, whose state and helpers it
// uses: shown, asked, sides, couplet, givenLine, locksFollowShown, lockAt, candidateView).
"use strict";

// The lock pattern for the alternatives of the ``written`` line's position: the boxes that agree
// with the line (a box that disagrees is not this line's constraint), the clicked character's
// repeat group (the given line's repeats, which the written line mirrors) left free.
function locksFor(written, position) {
  if (!locksFollowShown()) return null;
  const given = [...givenLine(shown)];
  const chars = [...written];
  const boxes = [...$("locks").querySelectorAll("input")];
  if (boxes.length !== chars.length) return null;
  const values = boxes.map((input, i) => {
    const value = input.disabled ? "" : input.value.trim();
    return value && value === chars[i] && given[i] !== given[position] ? value : "_";
  });
  return values.some((v) => v !== "_") ? values.join("") : null;
}

// Clicking a character of a candidate lists the best characters for that place, the rest of the
// line kept and every rule with it (POST /api/v1/alternatives); choosing one replaces it (and its
// repeats) in the candidate, and the lock boxes of those places take it. The first button keeps
// the old click: lock the character as it is.
async function showAlternatives(item, candidate, position) {
  if (!shown) return;
  const old = item.querySelector(".alternatives");
  if (old) old.remove();
  const box = el("div", "alternatives");
  box.setAttribute("role", "group");
  const ch = [...candidate.text][position];
  box.setAttribute("aria-label", `${sides(shownDirection()).written}第 ${position + 1} 字「${ch}」可换的字`);
  const lock = el("button", "alt-lock", `锁定「${ch}」`);
  lock.type = "button";
  lock.addEventListener("click", () => {
    lockAt(position, ch);
    box.remove();
  });
  const close = el("button", "alt-close", "×");
  close.type = "button";
  close.setAttribute("aria-label", "关闭");
  close.addEventListener("click", () => box.remove());
  box.addEventListener("keydown", (event) => {
    if (event.key === "Escape") box.remove();
  });
  const list = el("ol", "alt-list");
  const status = el("span", "alt-status", "正在找可换的字……");
  box.append(el("span", "alt-title", `第 ${position + 1} 字可换：`), lock, close, status, list);
  item.querySelector(".line").after(box);
  lock.focus();
  // in 下联求上联 the candidate is the upper line, and ``position`` is in it
  const body = { ...couplet(candidate.text), position, n: 8, tone_mode: asked.tone_mode, direction: shownDirection() };
  const locks = locksFor(candidate.text, position);
  if (locks) body.locks = locks;
  if (asked.required_first) body.required_first = asked.required_first;
  if (asked.required_chars) body.required_chars = asked.required_chars;
  let found;
  try {
    found = await api("/api/v1/alternatives", body);
  } catch (error) {
    status.textContent = error.message;
    return;
  }
  if (!box.isConnected) return; // closed, or another character clicked meanwhile
  const own = found.alternatives.find((a) => a.original);
  status.textContent = found.positions.length > 1 ? `（叠字：第 ${found.positions.map((p) => p + 1).join("、")} 字一起换）` : "";
  for (const alt of found.alternatives) {
    const entry = el("li", "alt" + (alt.original ? " own" : ""));
    const button = el("button", "alt-choice");
    button.type = "button";
    const change = own ? alt.rank_score - own.rank_score : null;
    button.append(toneMark(alt.tones[position] || ""));
    button.append(el("span", "char", alt.char));
    const delta = alt.original ? "原字" : change === null ? alt.rank_score.toFixed(2) : (change >= 0 ? "+" : "") + change.toFixed(2);
    button.append(el("span", "alt-score", delta));
    button.title = `${alt.text}（得分 ${alt.rank_score.toFixed(2)}）`;
    button.setAttribute("aria-label", `换成「${alt.char}」：${alt.text}`);
    button.addEventListener("click", () => chooseAlternative(item, candidate, found, alt, own));
    entry.append(button);
    list.append(entry);
  }
  announce(`第 ${position + 1} 字有 ${found.alternatives.length} 个可选的字`);
}

function chooseAlternative(item, candidate, found, alt, own) {
  // the line's 得分 moves by what the character changes in the search's score of the whole line
  const change = own ? alt.rank_score - own.rank_score : 0;
  const scoreChange = own ? alt.score - own.score : 0;
  Object.assign(candidate, {
    text: alt.text,
    tones: alt.tones,
    report: alt.report,
    rank_score: candidate.rank_score + change,
    score: candidate.score + scoreChange,
  });
  const boxes = locksFollowShown() ? $("locks").querySelectorAll("input") : [];
  for (const p of found.positions) {
    const input = boxes[p];
    if (input && !input.disabled) input.value = alt.char;
  }
  const fresh = candidateView(candidate);
  item.replaceWith(fresh);
  const cell = fresh.querySelectorAll("button.ch")[found.position];
  if (cell) cell.focus();
  const { written } = sides(shownDirection());
  announce(`已把${written}第 ${found.positions.map((p) => p + 1).join("、")} 字换成「${alt.char}」并锁定`);
}
