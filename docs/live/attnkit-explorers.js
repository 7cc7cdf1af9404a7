/* attnkit-explorers.js — the live explorers on the course site's pages of notebooks 03, 04 and 05.
 *
 * The markup (labels, live regions) is written by docs/live_site.py; this file wires it to the models of
 * attnkit-live.js. Every result a learner waits for lands in a polite live region; a typo or a sum the
 * model cannot take is answered in words there, never by an exception.
 */
(function () {
  "use strict";
  const live = window.attnkitLive;
  const $ = (root, sel) => root.querySelector(sel);
  const KINDS = { "enc.self": "encoder self-attention", "dec.self": "decoder self-attention", "dec.cross": "decoder cross-attention" };
  const VIRIDIS = [[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]];

  /** viridis (perceptually uniform) at t in 0 … 1 */
  function colour(t) {
    const x = Math.min(1, Math.max(0, t)) * (VIRIDIS.length - 1), i = Math.min(VIRIDIS.length - 2, Math.floor(x));
    const c = VIRIDIS[i].map((v, k) => Math.round(v + (VIRIDIS[i + 1][k] - v) * (x - i)));
    return `rgb(${c.join(",")})`;
  }

  const svgEl = (name, attrs, text) => {
    const e = document.createElementNS("http://www.w3.org/2000/svg", name);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    return e;
  };

  /** A heatmap of weights[q][k], query tokens down the side, key tokens along the top (as the kit's plots). */
  function heatmap(svg, weights, rowLabels, colLabels, title) {
    const cell = 34, left = 48, top = 40;
    svg.replaceChildren(svgEl("title", {}, title));
    svg.setAttribute("viewBox", `0 0 ${left + cell * colLabels.length + 8} ${top + cell * rowLabels.length + 8}`);
    svg.setAttribute("width", left + cell * colLabels.length + 8);
    colLabels.forEach((t, j) => svg.appendChild(svgEl("text", { x: left + cell * (j + 0.5), y: top - 10, "text-anchor": "middle" }, t)));
    rowLabels.forEach((t, i) => {
      svg.appendChild(svgEl("text", { x: left - 8, y: top + cell * (i + 0.62), "text-anchor": "end" }, t));
      colLabels.forEach((_, j) =>
        svg.appendChild(svgEl("rect", { x: left + cell * j, y: top + cell * i, width: cell - 1, height: cell - 1, fill: colour(weights[i][j]) })));
    });
  }

  /** The strongest links of a pattern, in words: "'6' → '+' 0.93". */
  function strongest(weights, rowLabels, colLabels, n = 3) {
    const links = [];
    rowLabels.forEach((q, i) => colLabels.forEach((k, j) => links.push([weights[i][j], `${q} (position ${i}) → ${k} (position ${j}): ${weights[i][j].toFixed(2)}`])));
    return links.sort((a, b) => b[0] - a[0]).slice(0, n).map((l) => l[1]).join("; ");
  }

  function say(el, text) { if (el.textContent !== text) el.textContent = text; }
  /** Whether `input` holds something the model can take; if not, `error` is said and the box is marked invalid. */
  function accept(input, error, answer, message) {
    if (!error) { input.removeAttribute("aria-invalid"); return true; }
    if (answer) say(answer, "—");
    say(message, error);
    input.setAttribute("aria-invalid", "true");
    return false;
  }

  // ------------------------------------------------------------------ notebook 03: answer and attention
  async function mountAdder(root) {
    const adder = await live.adder();
    const input = $(root, "input[name=problem]"), answer = $(root, "output[name=answer]");
    const message = $(root, ".attnkit-live-message"), svg = $(root, "svg"), caption = $(root, "figcaption");
    const pick = (name) => $(root, `select[name=${name}]`);
    let last = null;

    function draw() {
      if (!last) return;
      const kind = pick("kind").value, layer = pick("layer").value, h = +pick("head").value;
      const rows = kind === "enc.self" ? last.labels.enc : last.labels.dec;
      const cols = kind === "dec.self" ? last.labels.dec : last.labels.enc;
      const weights = last.patterns[`${kind}.${layer}`][h].slice(0, rows.length).map((r) => r.slice(0, cols.length));
      const title = `Attention of ${KINDS[kind]}, layer ${layer}, head ${h} (${kind}.${layer}.${h}) for ${last.problem}`;
      heatmap(svg, weights, rows, cols, title);
      say(caption, `${title}: each row is a query token, each column a key token it attends to, brighter is more weight. ` +
        `Strongest links: ${strongest(weights, rows, cols)}.`);
    }

    function submit() {
      const problem = input.value.trim(), result = adder.run(problem);
      if (!accept(input, result.error, answer, message)) return;
      last = { ...result, problem };
      say(answer, result.answer);
      const [a, b] = problem.split("+").map((s) => BigInt(s.trim()));
      say(message, String(a + b) === result.answer ? "Right." : `Wrong: ${problem} is ${a + b}.`);
      draw();
    }

    $(root, "form").addEventListener("submit", (e) => { e.preventDefault(); submit(); });
    root.querySelectorAll("select").forEach((s) => s.addEventListener("change", draw));
    submit();
    return { adder, submit };
  }

  // ------------------------------------------------------------------ notebook 04: heads off
  async function mountAblation(root) {
    const adder = await live.adder();
    const input = $(root, "input[name=problem]"), answer = $(root, "output[name=answer]");
    const message = $(root, ".attnkit-live-message"), match = $(root, "output[name=exact-match]");
    const boxes = [...root.querySelectorAll("input[type=checkbox]")];
    const off = () => new Set(boxes.filter((b) => !b.checked).map((b) => b.value));
    const known = new Map(); // heads off (their ids, joined) -> right answers: toggling back is instant
    let run = 0;

    function answerSum() {
      const heads = off(), result = adder.solve(input.value.trim(), heads);
      if (!accept(input, result.error, answer, message)) return;
      say(answer, result.answer);
      say(message, `${heads.size} of ${boxes.length} heads off.`);
    }

    /** Exact match over the page's held-out sample, in slices so that the page stays responsive. */
    async function exactMatch() {
      const mine = ++run, heads = off(), lines = adder.sample, key = [...heads].join(" ");
      let right = 0;
      if (known.has(key)) right = known.get(key);
      else {
        say(match, `computing over ${lines.length} held-out sums…`);
        for (let i = 0; i < lines.length; i += 50) {
          await new Promise((r) => setTimeout(r, 0));
          if (mine !== run) return; // a newer toggle replaced this run
          right += adder.exactMatch(heads, lines.slice(i, i + 50)).right;
        }
        known.set(key, right);
      }
      const pct = (x) => (100 * x / lines.length).toFixed(1);
      const intact = known.has("") ? `; ${pct(known.get(""))} % with every head on` : "";
      say(match, `${pct(right)} % (${right} of ${lines.length}) with ${heads.size} heads off${intact}.`);
    }

    $(root, "form").addEventListener("submit", (e) => { e.preventDefault(); answerSum(); });
    boxes.forEach((b) => b.addEventListener("change", () => { answerSum(); exactMatch(); }));
    $(root, "button[name=all-on]").addEventListener("click", () => {
      boxes.forEach((b) => { b.checked = true; });
      answerSum();
      exactMatch();
    });
    answerSum();
    exactMatch();
    return { adder };
  }

  // ------------------------------------------------------------------ notebook 05: the sortedness classifiers
  function draw(kind, n) {
    const values = Array.from({ length: n }, () => Math.floor(Math.random() * 100)).sort((a, b) => a - b);
    if (kind === "swap") { // one adjacent pair with x_i < x_(i+1) swapped (data.swap_one_pair)
      const pairs = values.slice(1).map((v, i) => (values[i] < v ? i : -1)).filter((i) => i >= 0);
      if (!pairs.length) return draw(kind, n);
      const i = pairs[Math.floor(Math.random() * pairs.length)];
      [values[i], values[i + 1]] = [values[i + 1], values[i]];
    }
    if (kind === "shuffle") {
      for (let i = n - 1; i > 0; i--) { const j = Math.floor(Math.random() * (i + 1)); [values[i], values[j]] = [values[j], values[i]]; }
    }
    return values;
  }

  async function mountSortedness(root) {
    const input = $(root, "textarea[name=sequence]"), verdict = $(root, "output[name=verdict]");
    const scores = $(root, ".attnkit-live-scores"), encoding = $(root, "select[name=encoding]");
    const length = $(root, "select[name=length]");

    async function classify() {
      const model = await live.sortedness(encoding.value), parsed = model.parse(input.value);
      if (!accept(input, parsed.error, null, verdict)) {
        scores.textContent = "";
        return;
      }
      const v = parsed.values, r = model.classify(v);
      const truth = v.every((x, i) => i === 0 || v[i - 1] <= x);
      say(verdict, `${r.sorted ? "Sorted" : "Not sorted"}: P(sorted) = ${r.pSorted.toFixed(3)} ` +
        `(${encoding.value} encoding, ${v.length} values; the sequence ${truth ? "is" : "is not"} sorted, ` +
        `so the model is ${r.sorted === truth ? "right" : "wrong"}).`);
      const top = r.scores.map((s, i) => [s, i]).sort((a, b) => b[0] - a[0]).slice(0, 3);
      scores.textContent = "Highest violation scores (the model's per-token \"a violation is here\", pooled by max): " +
        top.map(([s, i]) => `position ${i} (value ${v[i]}${i ? `, after ${v[i - 1]}` : ""}): ${s.toFixed(2)}`).join("; ") + ".";
    }

    const fill = (kind) => { input.value = draw(kind, +length.value).join(" "); classify(); };
    root.querySelectorAll("button[data-draw]").forEach((b) => b.addEventListener("click", () => fill(b.dataset.draw)));
    $(root, "form").addEventListener("submit", (e) => { e.preventDefault(); classify(); });
    input.addEventListener("keydown", (e) => { if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); classify(); } });
    encoding.addEventListener("change", classify);
    await classify();
    return { classify };
  }

  const MOUNT = { adder: mountAdder, ablation: mountAblation, sortedness: mountSortedness };
  window.attnkitExplorers = {};
  document.querySelectorAll("[data-attnkit-live]").forEach((root) => {
    const kind = root.dataset.attnkitLive;
    window.attnkitExplorers[kind] = MOUNT[kind](root).catch((e) => {
      const message = root.querySelector(".attnkit-live-message") || root;
      message.textContent = `The live explorer could not start: ${e.message}`;
    });
  });
})();
