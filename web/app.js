// The couplet page's 对下联 mode: the form, its lock boxes, the candidates and their votes, one's own
// line (loaded after view.js and api.js; alternatives.js, scroll.js and own_check.js use its state
// and helpers). Every piece of user or model text goes in through textContent, never as HTML.
"use strict";

let shown = null; // the last answer of /api/v1/generate
let asked = null; // the request that answer answered (its tone mode, 藏头, 嵌字 for the alternatives)
let reverseModel = false; // the bundle writes upper lines for lower lines (GET /api/v1/model)
// a character the server mirrors from the given line (punctuation, symbols): no lock box
const PUNCTUATION = /[\p{P}\p{S}]/u;

// The two directions: lower lines for an upper line (上联求下联), or upper lines for a lower
// line (下联求上联). The line typed is the "given" line, the candidates are "written" lines.
const FORWARD = "upper_to_lower";
const REVERSE = "lower_to_upper";

function sides(direction) {
  return direction === REVERSE ? { given: "下联", written: "上联" } : { given: "上联", written: "下联" };
}

// The rule report's checks; no_reuse: the written line takes none of the given line's characters.
function rules(direction) {
  return [
    ["length", "字数相等"],
    ["punctuation", "标点相对"],
    ["repeats", "叠字相对"],
    ["no_reuse", `不重${sides(direction).given}字`],
    ["tone_end", "仄起平收"],
    ["no_three_level_tail", "无三平尾"],
  ];
}

// The direction the form asks in (the radio buttons, shown when the bundle has a reverse model).
function chosenDirection() {
  return $("direction-reverse").checked ? REVERSE : FORWARD;
}

// The direction of the answer on show (a server without the field: forward).
function shownDirection() {
  return (shown && shown.direction) || FORWARD;
}

function givenLine(answer) {
  return answer.direction === REVERSE ? answer.lower : answer.upper;
}

function givenTones(answer) {
  return (answer.direction === REVERSE ? answer.lower_tones : answer.upper_tones) || [];
}

// A written line and the answer's given line as the couplet they make, upper line first: the
// feedback, the 春联 and the alternatives take them so, in either direction.
function couplet(written) {
  return shownDirection() === REVERSE ? { upper: written, lower: shown.lower } : { upper: shown.upper, lower: written };
}

// The lock boxes belong to the form's direction; an answer of the other direction leaves them be.
function locksFollowShown() {
  return shown !== null && shownDirection() === chosenDirection();
}

function upperChars() {
  return [...$("upper").value.replace(/\s+/g, "")];
}

// One box per character of the given line, for the written line's character there.
function rebuildLocks() {
  const chars = upperChars().slice(0, 100);
  const { given, written } = sides(chosenDirection());
  const box = $("locks");
  const old = [...box.querySelectorAll("input")].map((input) => input.value);
  box.replaceChildren();
  chars.forEach((ch, i) => {
    const cell = el("label", "lock-cell");
    const input = el("input", "lock");
    input.maxLength = 1;
    if (PUNCTUATION.test(ch)) {
      input.value = ch; // punctuation is mirrored, never locked
      input.disabled = true;
    } else {
      input.value = old[i] && !PUNCTUATION.test(old[i]) ? old[i] : "";
    }
    input.setAttribute("aria-label", `${written}第 ${i + 1} 字（对${given}「${ch}」）`);
    cell.append(el("span", "lock-over", ch), input);
    box.append(cell);
  });
  $("locks-box").hidden = chars.length === 0;
}

function lockPattern() {
  const values = [...$("locks").querySelectorAll("input")].map((input) =>
    input.disabled ? "_" : input.value.trim() || "_",
  );
  return values.some((v) => v !== "_") ? values.join("") : null;
}

function lockAt(position, ch) {
  const input = $("locks").querySelectorAll("input")[position];
  if (!input || input.disabled || !locksFollowShown()) return;
  const { written } = sides(shownDirection());
  input.value = input.value === ch ? "" : ch;
  announce(input.value ? `已锁定${written}第 ${position + 1} 字「${ch}」` : `已解锁${written}第 ${position + 1} 字`);
}

function reportView(report) {
  const list = el("ul", "report");
  for (const [key, label] of rules(shownDirection())) {
    const value = report[key];
    const state = value === true ? "ok" : value === false ? "bad" : "unknown";
    list.append(el("li", "rule " + state, (state === "ok" ? "✓ " : state === "bad" ? "✗ " : "? ") + label));
  }
  if (report.rhythm !== null && report.rhythm !== undefined) {
    list.append(el("li", "rule info", `节奏点平仄相反 ${Math.round(report.rhythm * 100)}%`));
  }
  return list;
}

async function vote(item, candidate, value) {
  const status = item.querySelector(".vote-status");
  const buttons = item.querySelectorAll(".vote");
  if ([...buttons].some((button) => button.disabled)) return; // one vote per candidate
  buttons.forEach((button) => (button.disabled = true)); // until the answer: no second vote in flight
  try {
    const saved = await api("/api/v1/feedback", {
      kind: "vote",
      ...couplet(candidate.text), // the couplet upper line first, in either direction
      vote: value,
      model_version: shown.model_version,
    });
    status.textContent = `已记录（编号 ${saved.id}）`;
  } catch (error) {
    status.textContent = error.message;
    buttons.forEach((button) => (button.disabled = false)); // not stored: may be sent again
  }
}

// The 横批 the server ranked for this couplet, each with its tone marks; one click draws the
// 春联 with it.
function bannersView(candidate) {
  const box = el("div", "banners");
  box.append(el("span", "banners-label", "横批"));
  for (const banner of candidate.banners) {
    const button = el("button", "banner");
    button.type = "button";
    button.title = `以「${banner.text}」为横批画春联（契合度 ${banner.score.toFixed(2)}）`;
    button.setAttribute("aria-label", `横批「${banner.text}」，画成春联`);
    const line = lineView(banner.text, banner.tones);
    line.className = "banner-line"; // not a candidate's .line: its characters are no lower line
    button.append(line);
    button.addEventListener("click", () => {
      $("banner").value = banner.text;
      showScroll(candidate.text);
    });
    box.append(button);
  }
  return box;
}

function candidateView(candidate) {
  const item = el("li", "candidate");
  const name = sides(shownDirection()).written;
  item.append(lineView(candidate.text, candidate.tones, (i) => showAlternatives(item, candidate, i), name));
  const score = el("span", "score", `得分 ${candidate.rank_score.toFixed(2)}`);
  // The order's score (model, tagger and tone preferences together); the model's own in the tooltip.
  score.title = `排序得分（每字）；模型自身的对数概率 ${candidate.score.toFixed(2)}`;
  item.append(score);
  item.append(reportView(candidate.report));
  const votes = el("div", "votes");
  const up = el("button", "vote up", "好");
  const down = el("button", "vote down", "不好");
  up.type = down.type = "button";
  up.addEventListener("click", () => vote(item, candidate, 1));
  down.addEventListener("click", () => vote(item, candidate, -1));
  const status = el("span", "vote-status");
  status.setAttribute("role", "status");
  const toScroll = el("button", "to-scroll", "春联");
  toScroll.type = "button";
  toScroll.title = "画成春联，可下载打印";
  toScroll.addEventListener("click", () => {
    const best = candidate.banners && candidate.banners[0];
    if (best && !$("banner").value.trim()) $("banner").value = best.text;
    showScroll(candidate.text);
  });
  votes.append(up, down, toScroll, status);
  item.append(votes);
  if (candidate.banners && candidate.banners.length) item.append(bannersView(candidate));
  return item;
}

// The hint that the given line reads like the other side (an upper line ending 平, a lower line
// ending 仄), with a button that asks again the other way round.
function showReversed(answer) {
  const reverse = answer.direction === REVERSE;
  $("reversed-text").textContent = reverse
    ? "这一句以仄声收尾，像是上联；下联通常以平声收尾。"
    : "这一句以平声收尾，像是下联；上联通常以仄声收尾。";
  const button = $("reversed-switch");
  button.textContent = reverse ? "为它对下联 / Write lower lines for it" : "为它对上联 / Write upper lines for it";
  button.hidden = !reverse && !reverseModel; // upper lines only from a bundle with a reverse model
  $("reversed").hidden = !(answer.reads_reversed ?? answer.upper_ends_level);
}

function render(answer) {
  shown = answer;
  const { given, written } = sides(shownDirection());
  $("shown-label").textContent = given;
  $("upper-shown").replaceWith(Object.assign(lineView(givenLine(answer), givenTones(answer)), { id: "upper-shown" }));
  const badge = $("badge");
  if (answer.in_training_set) {
    badge.textContent = answer.known_lower_lines.length
      ? `训练集中有这句上联，原下联：${answer.known_lower_lines.join(" ／ ")}`
      : "训练集中有这句上联";
    badge.hidden = false;
  } else {
    badge.hidden = true;
  }
  showReversed(answer);
  $("unknown").textContent = answer.unknown_chars.length ? `模型不认识这些字：${answer.unknown_chars.join("")}` : "";
  $("unknown").hidden = !answer.unknown_chars.length;
  $("candidates-label").textContent = `${written}候选`;
  $("candidates").replaceChildren(...answer.candidates.map(candidateView));
  $("none").textContent = `没有合适的${written}。`;
  $("none").hidden = answer.candidates.length > 0;
  $("own-label").textContent = `我来对${written}`;
  $("own-lower").placeholder = `写下你自己的${written}`;
  $("own-result").hidden = true;
  hideScroll(); // the picture was of the last answer's couplet (scroll.js)
  $("result").hidden = false;
  announce(answer.candidates.length ? `得到 ${answer.candidates.length} 条${written}` : `没有合适的${written}`);
}

async function ask(event) {
  event.preventDefault();
  showError("");
  $("busy").hidden = false;
  $("go").disabled = true;
  try {
    const direction = chosenDirection();
    const line = $("upper").value; // the given line: an upper line, or a lower line in 下联求上联
    const body = direction === REVERSE ? { lower: line, direction } : { upper: line };
    Object.assign(body, { n: Number($("n").value), tone_mode: $("tone-mode").value });
    const locks = lockPattern();
    if (locks) body.locks = locks;
    if ($("required-first").value.trim()) body.required_first = $("required-first").value;
    if ($("required-chars").value.trim()) body.required_chars = $("required-chars").value;
    if ($("fast").checked) body.fast = true;
    if ($("diverse").checked) body.diverse = true;
    // the register, where the model writes in several (GET /api/v1/model); the reverse model has none
    if (!$("register-label").hidden && direction !== REVERSE) body.register = $("register").value;
    const answer = await api("/api/v1/generate", body);
    asked = body;
    render(answer);
  } catch (error) {
    // The last answer goes: feedback given below it would be stored against a line the
    // input no longer shows
    shown = null;
    $("result").hidden = true;
    showError(error.message);
  } finally {
    $("busy").hidden = true;
    $("go").disabled = false;
  }
}

async function submitOwn(event) {
  event.preventDefault();
  const result = $("own-result");
  const button = $("own").querySelector("button[type=submit]");
  if (!shown || button.disabled) return;
  button.disabled = true; // no second copy while the first is in flight
  try {
    // one's own line is the written side: the lower line, or the upper line in 下联求上联
    const saved = await api("/api/v1/feedback", { kind: "own", ...couplet($("own-lower").value) });
    const broken = rules(shownDirection()).filter(([key]) => saved.report[key] === false).map(([, label]) => label);
    result.textContent = `已收到（编号 ${saved.id}）。` + (broken.length ? `不合规则：${broken.join("、")}` : "合乎基本规则，谢谢！");
  } catch (error) {
    result.textContent = error.message;
  } finally {
    button.disabled = false;
  }
  result.hidden = false;
}

// The form's labels follow the direction chosen; the lock boxes are for the written line, so a
// new direction empties them.
function directionChanged() {
  const direction = chosenDirection();
  const { given, written } = sides(direction);
  $("given-label").textContent = given;
  $("upper").placeholder = direction === REVERSE ? "例如：家和万事兴" : "例如：春风得意花千里";
  $("go").textContent = `对${written}`;
  $("locks-label").textContent = `锁定${written}的字（在格子里填字，留空不锁）`;
  $("busy").textContent = `正在对${written}……`;
  $("locks").querySelectorAll("input").forEach((input) => {
    if (!input.disabled) input.value = "";
  });
  rebuildLocks();
}

// The hint's button: the line on show asked again the other way round.
function switchDirection() {
  if (!shown) return;
  const to = shownDirection() === REVERSE ? FORWARD : REVERSE;
  $("upper").value = givenLine(shown);
  $(to === REVERSE ? "direction-reverse" : "direction-forward").checked = true;
  directionChanged();
  announce(to === REVERSE ? "已改为下联求上联" : "已改为上联求下联");
  $("ask").requestSubmit();
}

document.addEventListener("DOMContentLoaded", () => {
  $("ask").addEventListener("submit", ask);
  $("direction-forward").addEventListener("change", directionChanged);
  $("direction-reverse").addEventListener("change", directionChanged);
  $("reversed-switch").addEventListener("click", switchDirection);
  $("own").addEventListener("submit", submitOwn);
  $("upper").addEventListener("input", rebuildLocks);
  api("/api/v1/model")
    .then((info) => {
      $("model-version").textContent = `模型 ${info.version}`;
      $("fast-label").hidden = !info.fast_mode; // offered only when the model has a proposer
      const registers = info.registers || ["general"];
      $("register-label").hidden = registers.length < 2; // offered only when the model has registers
      for (const option of $("register").options) option.hidden = !registers.includes(option.value);
      reverseModel = Boolean(info.reverse_model); // 下联求上联 offered only when the bundle can
      $("direction").hidden = !reverseModel;
      $("lead-reverse").hidden = !reverseModel;
      if (!reverseModel && chosenDirection() === REVERSE) {
        $("direction-forward").checked = true;
        directionChanged();
      }
      if (shown) showReversed(shown); // an answer that came first: its switch button now
      document.dispatchEvent(new CustomEvent("duilian:model", { detail: info })); // compose.js listens
    })
    .catch(() => {});
});
