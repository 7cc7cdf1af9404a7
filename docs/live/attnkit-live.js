/* attnkit-live.js — the kit's two models run in the page, from the committed checkpoints.
 *
 * A plain-JavaScript mirror of the PyTorch code, to be read beside it:
 *   the adder      attnkit/adder/model.py (Seq2SeqTransformer), attnkit/adder/data.py (tokens),
 *                  attnkit/core/attention.py (MultiHeadAttention), attnkit/core/blocks.py (pre-LN layers);
 *   the classifier attnkit/sortedness/model.py (SortednessClassifier), attnkit/core/positional.py.
 * The weights come from docs/live_site.py, which writes each checkpoint's float32 tensors, base64, into a
 * script under _static/live/ that calls attnkitLive.addWeights (a script, not a fetch: a page opened from
 * file:// may not fetch). Activations are plain float64 numbers, one Float64Array per position; the
 * weights are the checkpoint's float32 values exactly. tests/test_site.py holds this file to PyTorch.
 */
(function (global) {
  "use strict";

  // ------------------------------------------------------------------ weights
  const loaded = {}; // model name -> {config, extra, tensor(name)}
  const waiting = {}; // model name -> callbacks until its script has run

  function addWeights(name, manifest, base64) {
    const text = atob(base64), bytes = new Uint8Array(text.length);
    for (let i = 0; i < text.length; i++) bytes[i] = text.charCodeAt(i);
    // float32, little-endian (as every browser's hardware), widened once to float64 for the arithmetic
    const all = Float64Array.from(new Float32Array(bytes.buffer));
    const tensors = {};
    for (const [key, [offset, shape]] of Object.entries(manifest.tensors))
      tensors[key] = all.subarray(offset, offset + shape.reduce((a, b) => a * b, 1));
    const tensor = (key) => {
      if (!tensors[key]) throw new Error(`${name}: no tensor ${key} in the export`);
      return tensors[key];
    };
    loaded[name] = { config: manifest.config, extra: manifest.extra || {}, tensor };
    (waiting[name] || []).forEach((done) => done(loaded[name]));
    delete waiting[name];
  }

  /** The model's weights, loading its script (beside this one) on first use. */
  function weights(name) {
    if (loaded[name]) return Promise.resolve(loaded[name]);
    return new Promise((resolve, reject) => {
      if (!waiting[name]) {
        waiting[name] = [];
        const script = document.createElement("script");
        script.src = `${global.attnkitLiveBase || "_static/live/"}${name}.js`;
        script.onerror = () => reject(new Error(`the weights of ${name} did not load`));
        document.head.appendChild(script);
      }
      waiting[name].push(resolve);
    });
  }

  // ------------------------------------------------------------------ building blocks
  /** y = W x + b, W stored (out, in) row-major as nn.Linear keeps it. */
  function linear(x, W, b) {
    const n = x.length, m = W.length / n, y = new Float64Array(m);
    for (let i = 0; i < m; i++) {
      let s = b ? b[i] : 0;
      for (let j = 0, o = i * n; j < n; j++) s += W[o + j] * x[j];
      y[i] = s;
    }
    return y;
  }

  /** nn.LayerNorm: biased variance, eps 1e-5. */
  function layerNorm(x, g, b) {
    const n = x.length;
    let mean = 0, v = 0;
    for (let i = 0; i < n; i++) mean += x[i];
    mean /= n;
    for (let i = 0; i < n; i++) v += (x[i] - mean) ** 2;
    const r = 1 / Math.sqrt(v / n + 1e-5), y = new Float64Array(n);
    for (let i = 0; i < n; i++) y[i] = (x[i] - mean) * r * g[i] + b[i];
    return y;
  }

  /** erf to ~1e-14: its Taylor series near 0, the continued fraction of erfc further out (JS has no Math.erf). */
  function erf(x) {
    const a = Math.abs(x);
    if (a < 2.5) {
      let term = a, sum = a;
      for (let n = 1; n < 80 && Math.abs(term) > 1e-17 * Math.abs(sum); n++) {
        term *= (-a * a) / n;
        sum += term / (2 * n + 1);
      }
      return Math.sign(x) * sum * 2 / Math.sqrt(Math.PI);
    }
    let f = a;
    for (let n = 60; n >= 1; n--) f = a + n / 2 / f; // erfc(a) = e^(-a²)/√π · 1/(a + (1/2)/(a + 1/(a + …)))
    return Math.sign(x) * (1 - Math.exp(-a * a) / Math.sqrt(Math.PI) / f);
  }

  /** nn.GELU() (exact, not the tanh approximation): x·Φ(x). */
  const gelu = (x) => 0.5 * x * (1 + erf(x / Math.SQRT2));

  /** FeedForward (core/blocks.py): Linear -> GELU -> Linear. */
  function feedForward(w, p, x) {
    return linear(linear(x, w(p + "0.weight"), w(p + "0.bias")).map(gelu), w(p + "2.weight"), w(p + "2.bias"));
  }

  const add = (a, b) => a.map((v, i) => v + b[i]);

  /**
   * MultiHeadAttention (core/attention.py) for the query rows xq over keys and values kv = project(…):
   * softmax(q·kᵀ/√d_head + bias) · v per head, each head's z then W_O. Returns the output rows and
   * pattern[head][q][k]. opts: allowed(i, j) (a mask: causal), bias(h, i, j) (ALiBi, relative buckets),
   * rotary(vector, pos) (RoPE on q and k), off: the heads whose z is zeroed before W_O (ablation).
   */
  function attention(w, p, xq, kv, nHeads, opts = {}) {
    const q = xq.map((x) => linear(x, w(p + "W_Q.weight"), w(p + "W_Q.bias"))), { k, v } = kv;
    const d = q[0].length, dh = d / nHeads, scale = 1 / Math.sqrt(dh);
    const head = (row, h, pos) => {
      const part = row.subarray(h * dh, (h + 1) * dh);
      return opts.rotary ? opts.rotary(part, pos) : part;
    };
    const pattern = [], z = xq.map(() => new Float64Array(d));
    for (let h = 0; h < nHeads; h++) {
      const kh = k.map((row, j) => head(row, h, j));
      const rows = [];
      for (let i = 0; i < q.length; i++) {
        const qh = head(q[i], h, opts.qStart ? opts.qStart + i : i);
        const scores = kh.map((kj, j) => {
          if (opts.allowed && !opts.allowed(i, j)) return -Infinity;
          let s = 0;
          for (let c = 0; c < dh; c++) s += qh[c] * scale * kj[c];
          return opts.bias ? s + opts.bias(h, i, j) : s;
        });
        const top = Math.max(...scores);
        const e = scores.map((s) => Math.exp(s - top)), total = e.reduce((a, b) => a + b, 0);
        const weights = e.map((x) => x / total);
        rows.push(weights);
        if (opts.off && opts.off.has(h)) continue; // ablated: this head's z stays 0
        for (let j = 0; j < weights.length; j++)
          for (let c = 0; c < dh; c++) z[i][h * dh + c] += weights[j] * v[j][h * dh + c];
      }
      pattern.push(rows);
    }
    return { out: z.map((zi) => linear(zi, w(p + "W_O.weight"), w(p + "W_O.bias"))), pattern };
  }

  /** MultiHeadAttention.project_kv: the key and value rows of xkv (kept while decoding, as model.py's state). */
  function project(w, p, xkv) {
    return {
      k: xkv.map((x) => linear(x, w(p + "W_K.weight"), w(p + "W_K.bias"))),
      v: xkv.map((x) => linear(x, w(p + "W_V.weight"), w(p + "W_V.bias"))),
    };
  }

  /** EncoderLayer (core/blocks.py), pre-LayerNorm: x + attn(LN(x)), then + FF(LN(·)). */
  function encoderLayer(w, p, x, nHeads, opts) {
    const ln = x.map((r) => layerNorm(r, w(p + "ln_attn.weight"), w(p + "ln_attn.bias")));
    const a = attention(w, p + "self_attn.", ln, project(w, p + "self_attn.", ln), nHeads, opts);
    x = x.map((r, i) => add(r, a.out[i]));
    x = x.map((r) => add(r, feedForward(w, p + "ff.", layerNorm(r, w(p + "ln_ff.weight"), w(p + "ln_ff.bias")))));
    return { x, pattern: a.pattern };
  }

  const row = (table, i, d) => Float64Array.from(table.subarray(i * d, (i + 1) * d));

  // ------------------------------------------------------------------ the adder (attnkit/adder)
  const PLUS = 10, BOS = 11, EOS = 12, PAD = 13; // adder/data.py: a digit's id is the digit
  const VOCAB = [..."0123456789+", "<s>", "</s>", "<pad>"];

  /** head ids as the kit names them: "enc.self.L.H", "dec.self.L.H", "dec.cross.L.H" (model.heads' order) */
  function adderHeads(cfg) {
    const ids = [], each = (kind, L) => [...Array(cfg.n_heads).keys()].forEach((h) => ids.push(`${kind}.${L}.${h}`));
    for (let L = 0; L < cfg.n_enc_layers; L++) each("enc.self", L);
    for (let L = 0; L < cfg.n_dec_layers; L++) { each("dec.self", L); each("dec.cross", L); }
    return ids;
  }

  /** data.parse_problem: "663+497" -> {a: "663", b: "497"}, or {error} in words. */
  function parseProblem(text, nDigits) {
    const m = /^\s*(\d+)\s*\+\s*(\d+)\s*$/.exec(String(text));
    if (!m) return { error: `"${text}" is not a sum of the form a+b with digits only, e.g. 663+497.` };
    const ops = [m[1], m[2]].map((s) => s.replace(/^0+/, "") || "0");
    const long = ops.find((s) => s.length > nDigits);
    if (long) return { error: `${long} has more than ${nDigits} digits: the model adds 0 … ${"9".repeat(nDigits)}.` };
    return { a: ops[0], b: ops[1] };
  }

  class Adder {
    constructor(model) {
      this.cfg = model.config;
      this.w = model.tensor;
      this.heads = adderHeads(this.cfg);
      this.sample = model.extra.sample || []; // held-out sums "a+b=sum" for the exact match
    }

    /** encode_sources with zero_pad: "5+5" is read as "005+005", 2·n_digits+1 tokens, no padding. */
    source(text) {
      const p = parseProblem(text, this.cfg.n_digits);
      if (p.error) return p;
      const n = this.cfg.n_digits;
      return { ids: [...`${p.a.padStart(n, "0")}+${p.b.padStart(n, "0")}`].map((c) => (c === "+" ? PLUS : +c)) };
    }

    embed(table, ids, start) {
      const d = this.cfg.d_model;
      return ids.map((t, i) => add(row(this.w("tok_embed.weight"), t, d), row(this.w(table), start + i, d)));
    }

    /** off: Set of head ids -> {"enc.self.0": Set of head indices} */
    static offByModule(off) {
      const out = {};
      for (const id of off || []) {
        const at = id.lastIndexOf(".");
        (out[id.slice(0, at)] = out[id.slice(0, at)] || new Set()).add(+id.slice(at + 1));
      }
      return out;
    }

    /** Seq2SeqTransformer.encode: the memory rows and each layer's pattern. */
    encode(src, off) {
      const cfg = this.cfg, byModule = Adder.offByModule(off), patterns = {};
      let x = this.embed("src_pos.weight", src, 0);
      for (let L = 0; L < cfg.n_enc_layers; L++) {
        const r = encoderLayer(this.w, `encoder.${L}.`, x, cfg.n_heads, { off: byModule[`enc.self.${L}`] });
        x = r.x;
        patterns[`enc.self.${L}`] = r.pattern;
      }
      return { memory: x.map((r) => layerNorm(r, this.w("ln_enc.weight"), this.w("ln_enc.bias"))), patterns };
    }

    /**
     * Seq2SeqTransformer.decode over the target rows y (positions start, start+1, …), each DecoderLayer
     * pre-LN: + causal self-attention, + cross-attention over the memory, + feed-forward. `state` holds each
     * layer's keys and values: of the earlier positions (incremental decoding) and of the memory, as model.py's.
     */
    decode(tgt, memory, off, states, start) {
      const cfg = this.cfg, w = this.w, byModule = Adder.offByModule(off), patterns = {};
      let y = this.embed("tgt_pos.weight", tgt, start);
      for (let L = 0; L < cfg.n_dec_layers; L++) {
        const p = `decoder.${L}.`, ln = (r, name) => layerNorm(r, w(`${p}${name}.weight`), w(`${p}${name}.bias`));
        const h = y.map((r) => ln(r, "ln_self")), state = (states[L] = states[L] || {});
        const now = project(w, p + "self_attn.", h);
        state.self = state.self ? { k: state.self.k.concat(now.k), v: state.self.v.concat(now.v) } : now;
        state.cross = state.cross || project(w, p + "cross_attn.", memory); // the memory never changes
        const self = attention(w, p + "self_attn.", h, state.self, cfg.n_heads, {
          allowed: (i, j) => j <= start + i, // causal: a digit sees <s> and the digits before it
          off: byModule[`dec.self.${L}`],
        });
        y = y.map((r, i) => add(r, self.out[i]));
        const cross = attention(w, p + "cross_attn.", y.map((r) => ln(r, "ln_cross")), state.cross, cfg.n_heads, {
          off: byModule[`dec.cross.${L}`],
        });
        y = y.map((r, i) => add(r, cross.out[i]));
        y = y.map((r) => add(r, feedForward(w, p + "ff.", ln(r, "ln_ff"))));
        patterns[`dec.self.${L}`] = self.pattern;
        patterns[`dec.cross.${L}`] = cross.pattern;
      }
      const logits = y.map((r) => linear(layerNorm(r, w("ln_dec.weight"), w("ln_dec.bias")), w("unembed.weight"), w("unembed.bias")));
      return { logits, patterns };
    }

    /** Seq2SeqTransformer.greedy: max_tgt_len - 1 steps, each the argmax of the newest position (no early stop). */
    greedy(src, off) {
      const { memory } = this.encode(src, off), states = [], out = [];
      let token = BOS;
      for (let t = 0; t < this.cfg.n_digits + 2; t++) {
        const logits = this.decode([token], memory, off, states, t).logits[0];
        token = logits.indexOf(Math.max(...logits)); // torch's argmax: the first of equal maxima
        out.push(token);
      }
      return out;
    }

    /** data.decode_digits: the tokens up to </s> (or <pad>) as the answer string. */
    answerOf(out) {
      const stop = out.findIndex((t) => t === EOS || t === PAD);
      const text = out.slice(0, stop < 0 ? out.length : stop).map((t) => VOCAB[t]).join("");
      return this.cfg.reverse_output ? [...text].reverse().join("") : text;
    }

    /** Adder.solve for one problem: {answer} or {error}. off: head ids switched off. */
    solve(text, off) {
      const s = this.source(text);
      return s.error ? s : { answer: this.answerOf(this.greedy(s.ids, off)) };
    }

    /**
     * Adder.run_with_cache's patterns: the decoder fed its own greedy output (<s> then the answer; from the
     * first </s> on, <pad>, as its code does), every layer's pattern[head][q][k] by module name, and the labels.
     */
    run(text, off) {
      const s = this.source(text);
      if (s.error) return s;
      const out = this.greedy(s.ids, off);
      const tgt = [BOS, ...out.slice(0, -1)];
      const end = tgt.indexOf(EOS);
      if (end >= 0) tgt.fill(PAD, end);
      const enc = this.encode(s.ids, off), dec = this.decode(tgt, enc.memory, off, [], 0);
      const labels = (ids) => ids.filter((t) => t !== PAD).map((t) => VOCAB[t]);
      return {
        answer: this.answerOf(out),
        patterns: { ...enc.patterns, ...dec.patterns },
        labels: { enc: labels(s.ids), dec: labels(tgt) },
      };
    }

    /** Exact match over `problems` ("a+b=sum" lines; the page's held-out sample by default) with heads off. */
    exactMatch(off, problems) {
      let right = 0;
      const lines = problems || this.sample;
      for (const line of lines) {
        const [sum, total] = line.split("=");
        if (this.solve(sum, off).answer === total) right++;
      }
      return { right, n: lines.length };
    }
  }

  // ------------------------------------------------------------------ the sortedness classifier
  const f = Math.fround; // float32 rounding, where PyTorch computes a position feature in float32

  /** positional.sinusoidal_table: float64 angles, rounded to float32 at the end. */
  function sinusoidal(pos, d) {
    const r = new Float64Array(d);
    for (let i = 0; i < d / 2; i++) {
      const a = pos * 10000 ** (-(2 * i) / d);
      r[2 * i] = f(Math.sin(a));
      r[2 * i + 1] = f(Math.cos(a));
    }
    return r;
  }

  /** positional.rotate (RoPE) on one head's vector at `pos`: float32 angles pos·ω_i, pairs (even, odd) turned. */
  function rotate(x, pos) {
    const dh = x.length, r = new Float64Array(dh);
    for (let i = 0; i < dh / 2; i++) {
      const angle = f(pos * f(10000 ** (-(2 * i) / dh))), c = f(Math.cos(angle)), s = f(Math.sin(angle));
      r[2 * i] = x[2 * i] * c - x[2 * i + 1] * s;
      r[2 * i + 1] = x[2 * i] * s + x[2 * i + 1] * c;
    }
    return r;
  }

  /** positional.alibi_bias, directional: even heads look left, odd heads right; the token itself -30. */
  function alibi(nHeads, directional) {
    const slope = (n, k) => 2 ** ((-8 * k) / n);
    return (h, i, j) => {
      const off = j - i;
      if (!directional) return -slope(nHeads, h + 1) * Math.abs(off);
      if (off === 0) return -30;
      if ((h % 2 === 0 && off > 0) || (h % 2 === 1 && off < 0)) return -Infinity;
      const m = f(slope(Math.floor(nHeads / 2) + (nHeads % 2), Math.floor(h / 2) + 1));
      return -m * (Math.abs(off) - 1);
    };
  }

  /** positional.RelativeBucketBias: offsets -n_exact … n_exact exact, then far left / far right; with
   * far_as_one each far key also gets - log(keys in its bucket). */
  function relative(w, cfg, n) {
    const table = w("pos.relative.bias.weight"), e = cfg.n_exact, scale = 8;
    return (h, i, j) => {
      const bucket = Math.max(-e - 1, Math.min(e + 1, j - i)) + e + 1;
      const b = f(scale * table[bucket * cfg.n_heads + h]);
      if (!cfg.far_as_one) return b;
      const count = j < i - e ? Math.max(i - e, 1) : j > i + e ? Math.max(n - 1 - i - e, 1) : 1;
      return f(b - f(Math.log(count)));
    };
  }

  class Sortedness {
    constructor(model) {
      this.cfg = model.config;
      this.w = model.tensor;
      this.maxLen = model.extra.max_len; // the page's longest sequence
    }

    /** data.validate for one sequence typed as text: {values} or {error} in words. */
    parse(text) {
      const parts = String(text).trim().split(/[\s,;]+/).filter(Boolean);
      if (!parts.length) return { error: "Type some whole numbers 0–99, e.g. 3 8 8 15 42." };
      const bad = parts.find((s) => !/^\d+$/.test(s) || +s > 99);
      if (bad !== undefined) return { error: `"${bad}" is not a whole number 0–99.` };
      if (parts.length > this.maxLen)
        return { error: `${parts.length} values: this page takes at most ${this.maxLen} (the longest test length).` };
      return { values: parts.map(Number) };
    }

    /** SortednessClassifier.forward for one unpadded row: {sorted, pSorted, logit, scores (per token)}. */
    classify(values) {
      const cfg = this.cfg, w = this.w, d = cfg.d_model, n = values.length;
      let x = values.map((v, i) => {
        const r = row(w("embed.weight"), v, d);
        if (cfg.value_feature) { // value_angle: θ from π/4 (0) to 3π/4 (99), float32 as in PyTorch
          const theta = f(f(Math.PI / 4) + f(f(f(Math.PI / 2) * v) / 99));
          const c = f(Math.cos(theta)), s = f(Math.sin(theta)), vd = w("value_dir.weight");
          for (let k = 0; k < d; k++) r[k] += vd[2 * k] * c + vd[2 * k + 1] * s;
        }
        if (cfg.encoding === "sinusoidal") return add(r, sinusoidal(i, d));
        if (cfg.encoding === "learned") return add(r, row(w("pos.learned.table"), i, d));
        return r;
      });
      const opts = {};
      if (cfg.encoding === "alibi") opts.bias = alibi(cfg.n_heads, cfg.alibi_directional);
      if (cfg.encoding === "relative") opts.bias = relative(w, cfg, n);
      if (cfg.encoding === "rope") opts.rotary = rotate;
      const patterns = [];
      for (let L = 0; L < cfg.n_layers; L++) {
        const r = encoderLayer(w, `layers.${L}.`, x, cfg.n_heads, opts);
        x = r.x;
        patterns.push(r.pattern);
      }
      // a violation score per token, pooled (max by default) into "unsorted"; its negative is "sorted"
      const scores = x.map((r) => linear(layerNorm(r, w("ln_f.weight"), w("ln_f.bias")), w("head.weight"), w("head.bias"))[0]);
      const pooled = cfg.readout === "max" ? Math.max(...scores)
        : cfg.readout === "mean" ? scores.reduce((a, b) => a + b, 0) / n : scores[0];
      const logit = -pooled, pSorted = f(1 / (1 + Math.exp(-f(logit)))); // torch.sigmoid in float32
      return { sorted: pSorted > 0.5, pSorted, logit, scores, patterns };
    }
  }

  global.attnkitLive = {
    addWeights, weights, erf, parseProblem, VOCAB,
    adder: () => weights("adder").then((m) => new Adder(m)),
    sortedness: (encoding) => weights(`sortedness-${encoding}`).then((m) => new Sortedness(m)),
  };
})(window);
