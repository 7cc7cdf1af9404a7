/* attnkit-live.js — the kit's two models run in the page, from the committed checkpoints.
 *
 * A plain-JavaScript mirror of the PyTorch code, to be read beside it:
 *   the adder      attnkit/adder/model.py (Seq2SeqTransformer), attnkit/adder/data.py (tokens),
 *                  attnkit/core/attention.py (MultiHeadAttention), attnkit/core/blocks.py (pre-LN layers);
 *   the classifier attnkit/sortedness/model.py (SortednessClassifier), attnkit/core/positional.py.
 * The weights come from docs/live_site.py, which writes each checkpoint's float32 tensors, base64, into a
 * script under _static/live/ that calls attnkitLive.addWeights (a script, not a fetch: a page opened from
 * file:// may not fetch). Activations are float64, a batch's rows in one Float64Array (see "building blocks");
 * the weights are the checkpoint's float32 values exactly. tests/test_site.py holds this file to PyTorch, and
 * benchmarks/bench_site.py times it.
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
  // An activation is a matrix of rows, row-major in one Float64Array: (batch·positions, width), PyTorch's
  // (batch, pos, d_model) tensor flattened. Each block writes into a buffer it is given and returns it, so that
  // a forward pass allocates nothing once its buffers exist (Workspace), and a batch of sums runs as one pass.

  /** Buffers kept from one forward pass to the next: get(name, size) returns the same Float64Array each time
   * (its first `size` values are the ones used), a larger one when a bigger batch needs it. */
  class Workspace {
    constructor() { this.buffers = {}; }
    get(name, size) {
      const b = this.buffers[name];
      return b && b.length >= size ? b : (this.buffers[name] = new Float64Array(size));
    }
  }

  /** nn.Linear's weights, looked up once: W stored (out, in) row-major as PyTorch keeps it, and b. */
  function linearOf(w, name) {
    const W = w(`${name}.weight`), b = w(`${name}.bias`);
    return { W, b, nIn: W.length / b.length, nOut: b.length };
  }

  /** nn.Linear on n rows: out[r] = W · x[r] + b. Four outputs at a time: each value of x is read once for four
   * rows of W (twice as fast in V8 as one output at a time); each output's sum runs in the same order either way. */
  function linear(out, x, n, { W, b, nIn, nOut }) {
    for (let r = 0; r < n; r++) {
      const xr = r * nIn, or = r * nOut;
      let i = 0;
      for (; i + 4 <= nOut; i += 4) {
        const w0 = i * nIn, w1 = w0 + nIn, w2 = w1 + nIn, w3 = w2 + nIn;
        let s0 = b[i], s1 = b[i + 1], s2 = b[i + 2], s3 = b[i + 3];
        for (let j = 0; j < nIn; j++) {
          const xj = x[xr + j];
          s0 += W[w0 + j] * xj;
          s1 += W[w1 + j] * xj;
          s2 += W[w2 + j] * xj;
          s3 += W[w3 + j] * xj;
        }
        out[or + i] = s0;
        out[or + i + 1] = s1;
        out[or + i + 2] = s2;
        out[or + i + 3] = s3;
      }
      for (; i < nOut; i++) { // the last nOut % 4 outputs (the adder's 14 logits, the classifier's one score)
        let s = b[i];
        for (let j = 0, wi = i * nIn; j < nIn; j++) s += W[wi + j] * x[xr + j];
        out[or + i] = s;
      }
    }
    return out;
  }

  const layerNormOf = (w, name) => ({ g: w(`${name}.weight`), b: w(`${name}.bias`) });

  /** nn.LayerNorm on n rows: biased variance, eps 1e-5. */
  function layerNorm(out, x, n, { g, b }) {
    const d = g.length;
    for (let r = 0; r < n; r++) {
      const o = r * d;
      let mean = 0, v = 0;
      for (let i = 0; i < d; i++) mean += x[o + i];
      mean /= d;
      for (let i = 0; i < d; i++) v += (x[o + i] - mean) ** 2;
      const inv = 1 / Math.sqrt(v / d + 1e-5);
      for (let i = 0; i < d; i++) out[o + i] = (x[o + i] - mean) * inv * g[i] + b[i];
    }
    return out;
  }

  /** x += y over the first `size` values: the residual stream. */
  function addInto(x, y, size) {
    for (let i = 0; i < size; i++) x[i] += y[i];
  }

  // erf's Taylor series, erf(a) = 2/√π · a · Σ c_n a^2n with c_n = (-1)^n / (n!·(2n+1)): its coefficients, once.
  const ERF_SERIES = [1];
  for (let n = 1; n < 46; n++) ERF_SERIES.push((ERF_SERIES[n - 1] * -(2 * n - 1)) / (n * (2 * n + 1)));

  /** erf to ~1e-14 (JS has no Math.erf): below 2.5 its Taylor series by Horner's rule, with as many terms as `a`
   * needs; further out the continued fraction of erfc. */
  function erf(x) {
    const a = Math.abs(x);
    if (a < 2.5) {
      const a2 = a * a, terms = a < 0.5 ? 12 : a < 1 ? 18 : a < 1.5 ? 26 : a < 2 ? 35 : 46;
      let sum = ERF_SERIES[terms - 1];
      for (let n = terms - 2; n >= 0; n--) sum = sum * a2 + ERF_SERIES[n];
      return Math.sign(x) * a * sum * (2 / Math.sqrt(Math.PI));
    }
    let f = a;
    for (let n = 60; n >= 1; n--) f = a + n / 2 / f; // erfc(a) = e^(-a²)/√π · 1/(a + (1/2)/(a + 1/(a + …)))
    return Math.sign(x) * (1 - Math.exp(-a * a) / Math.sqrt(Math.PI) / f);
  }

  /** nn.GELU() (exact, not the tanh approximation): x·Φ(x). */
  const gelu = (x) => 0.5 * x * (1 + erf(x / Math.SQRT2));

  const feedForwardOf = (w, p) => ({ up: linearOf(w, `${p}.0`), down: linearOf(w, `${p}.2`) });

  /** FeedForward (core/blocks.py) on n rows: Linear -> GELU -> Linear. */
  function feedForward(out, ws, x, n, { up, down }) {
    const hidden = linear(ws.get("ff.hidden", n * up.nOut), x, n, up);
    for (let i = 0; i < n * up.nOut; i++) hidden[i] = gelu(hidden[i]);
    return linear(out, hidden, n, down);
  }

  const attentionOf = (w, p, nHeads) => ({
    nHeads, W_Q: linearOf(w, `${p}.W_Q`), W_K: linearOf(w, `${p}.W_K`), W_V: linearOf(w, `${p}.W_V`),
    W_O: linearOf(w, `${p}.W_O`),
  });

  /**
   * scaled_dot_product_attention (core/attention.py) for `groups` sequences side by side (a batch): per group and
   * head (a slice of d_head along the width d), pattern = softmax(q/√d_head · kᵀ + bias), z = pattern · v. Group
   * g's nq query rows start at row g·nq of q and z, its nk key and value rows at row g·kStride of k and v. q is
   * scaled in place. opts: causal (query i, at position qStart + i, sees keys j ≤ qStart + i; the later ones get
   * weight 0), bias(h, i, j) (ALiBi, relative buckets), off (a Set of heads whose z stays 0: zero ablation, before
   * W_O), pattern (a Float64Array (groups, heads, nq, nk) to keep the weights in).
   */
  function attend(ws, z, q, k, v, { groups, nq, nk, kStride = nk, nHeads, d }, opts) {
    const { causal = false, qStart = 0, bias = null, off = null, pattern = null } = opts;
    const dh = d / nHeads, scale = Math.sqrt(dh), weights = ws.get("attend.weights", nk);
    for (let i = 0; i < groups * nq * d; i++) {
      q[i] /= scale;
      z[i] = 0;
    }
    for (let g = 0; g < groups; g++)
      for (let h = 0; h < nHeads; h++) {
        const ablated = off !== null && off.has(h);
        if (ablated && pattern === null) continue; // nothing to compute: its z stays 0
        for (let i = 0; i < nq; i++) {
          const qi = (g * nq + i) * d + h * dh, last = causal ? Math.min(nk - 1, qStart + i) : nk - 1;
          let top = -Infinity;
          for (let j = 0; j <= last; j++) {
            const kj = (g * kStride + j) * d + h * dh;
            let s = 0;
            for (let c = 0; c < dh; c++) s += q[qi + c] * k[kj + c];
            if (bias !== null) s += bias(h, qStart + i, j);
            weights[j] = s;
            if (s > top) top = s;
          }
          let total = 0; // softmax, shifted by the largest score
          for (let j = 0; j <= last; j++) total += (weights[j] = Math.exp(weights[j] - top));
          for (let j = 0; j <= last; j++) weights[j] /= total;
          if (pattern !== null) {
            const p = ((g * nHeads + h) * nq + i) * nk;
            for (let j = 0; j < nk; j++) pattern[p + j] = j <= last ? weights[j] : 0;
          }
          if (ablated) continue;
          for (let j = 0; j <= last; j++) { // z (same layout as q) += weight · v, one head's slice
            const vj = (g * kStride + j) * d + h * dh, wj = weights[j];
            for (let c = 0; c < dh; c++) z[qi + c] += wj * v[vj + c];
          }
        }
      }
    return z;
  }

  /**
   * MultiHeadAttention.forward (core/attention.py): the query rows x (groups·nq of them) through W_Q, attend over
   * keys and values k, v already projected (project_kv: the decoder keeps them), then W_O into out. shape and opts
   * as attend's; opts.rotary(rows, groups, nPos, nHeads, d) turns the queries as RoPE does (the keys were turned
   * by the caller).
   */
  function attention(out, ws, x, k, v, mha, shape, opts = {}) {
    const n = shape.groups * shape.nq, d = mha.W_Q.nOut;
    const q = linear(ws.get("attn.q", n * d), x, n, mha.W_Q);
    if (opts.rotary) opts.rotary(q, shape.groups, shape.nq, mha.nHeads, d);
    const z = attend(ws, ws.get("attn.z", n * d), q, k, v, { ...shape, nHeads: mha.nHeads, d }, opts);
    return linear(out, z, n, mha.W_O);
  }

  const encoderLayerOf = (w, p, nHeads) => ({
    ln_attn: layerNormOf(w, `${p}.ln_attn`), self_attn: attentionOf(w, `${p}.self_attn`, nHeads),
    ln_ff: layerNormOf(w, `${p}.ln_ff`), ff: feedForwardOf(w, `${p}.ff`),
  });

  /** EncoderLayer (core/blocks.py), pre-LayerNorm, on `groups` sequences of nPos rows: x += attention(LN(x)), then
   * x += FF(LN(x)), x updated in place. opts as attention's (off, pattern, bias, rotary). */
  function encoderLayer(ws, x, groups, nPos, layer, opts = {}) {
    const n = groups * nPos, d = layer.ln_attn.g.length, a = layer.self_attn, out = ws.get("enc.out", n * d);
    const h = layerNorm(ws.get("enc.ln", n * d), x, n, layer.ln_attn);
    const k = linear(ws.get("enc.k", n * d), h, n, a.W_K), v = linear(ws.get("enc.v", n * d), h, n, a.W_V);
    if (opts.rotary) opts.rotary(k, groups, nPos, a.nHeads, d);
    addInto(x, attention(out, ws, h, k, v, a, { groups, nq: nPos, nk: nPos }, opts), n * d);
    addInto(x, feedForward(out, ws, layerNorm(h, x, n, layer.ln_ff), n, layer.ff), n * d);
  }

  /** A kept pattern (heads, nq, nk), flat, as nested arrays pattern[head][q][k] (for the heatmap, and the tests). */
  const nested = (flat, nHeads, nq, nk) =>
    Array.from({ length: nHeads }, (_, h) =>
      Array.from({ length: nq }, (_, i) => Array.from(flat.subarray((h * nq + i) * nk, (h * nq + i + 1) * nk))));

  const range = (n) => [...Array(n).keys()];

  // ------------------------------------------------------------------ the adder (attnkit/adder)
  const PLUS = 10, BOS = 11, EOS = 12, PAD = 13; // adder/data.py: a digit's id is the digit
  const VOCAB = [..."0123456789+", "<s>", "</s>", "<pad>"];
  const BATCH = 50; // sums side by side in one pass (8 to 200 ran alike here; the explorer yields between slices)

  /** head ids as the kit names them: "enc.self.L.H", "dec.self.L.H", "dec.cross.L.H" (model.heads' order) */
  function adderHeads(cfg) {
    const ids = [], each = (kind, L) => range(cfg.n_heads).forEach((h) => ids.push(`${kind}.${L}.${h}`));
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
      const cfg = (this.cfg = model.config), w = model.tensor, H = cfg.n_heads;
      this.heads = adderHeads(cfg);
      this.sample = model.extra.sample || []; // held-out sums "a+b=sum" for the exact match
      this.srcLen = 2 * cfg.n_digits + 1; // "005+005"
      this.steps = cfg.n_digits + 2; // max_tgt_len - 1 greedy steps: the digits of the sum, then </s>
      this.tok_embed = w("tok_embed.weight");
      this.src_pos = w("src_pos.weight");
      this.tgt_pos = w("tgt_pos.weight");
      this.encoder = range(cfg.n_enc_layers).map((L) => encoderLayerOf(w, `encoder.${L}`, H));
      this.decoder = range(cfg.n_dec_layers).map((L) => ({
        ln_self: layerNormOf(w, `decoder.${L}.ln_self`), self_attn: attentionOf(w, `decoder.${L}.self_attn`, H),
        ln_cross: layerNormOf(w, `decoder.${L}.ln_cross`), cross_attn: attentionOf(w, `decoder.${L}.cross_attn`, H),
        ln_ff: layerNormOf(w, `decoder.${L}.ln_ff`), ff: feedForwardOf(w, `decoder.${L}.ff`),
      }));
      this.ln_enc = layerNormOf(w, "ln_enc");
      this.ln_dec = layerNormOf(w, "ln_dec");
      this.unembed = linearOf(w, "unembed");
      this.ws = new Workspace();
    }

    /** encode_sources with zero_pad: "5+5" is read as "005+005", 2·n_digits+1 tokens, no padding. */
    source(text) {
      const p = parseProblem(text, this.cfg.n_digits);
      if (p.error) return p;
      const n = this.cfg.n_digits;
      return { ids: [...`${p.a.padStart(n, "0")}+${p.b.padStart(n, "0")}`].map((c) => (c === "+" ? PLUS : +c)) };
    }

    /** tok_embed(ids) + pos(start + position) for `groups` sequences of nPos tokens, into out. */
    embed(out, pos, ids, groups, nPos, start) {
      const d = this.cfg.d_model;
      for (let r = 0; r < groups * nPos; r++)
        for (let c = 0, t = ids[r] * d, p = (start + (r % nPos)) * d; c < d; c++)
          out[r * d + c] = this.tok_embed[t + c] + pos[p + c];
      return out;
    }

    /** off: head ids -> {"enc.self.0": Set of head indices, …} */
    static offByModule(off) {
      const out = {};
      for (const id of off || []) {
        const at = id.lastIndexOf(".");
        (out[id.slice(0, at)] = out[id.slice(0, at)] || new Set()).add(+id.slice(at + 1));
      }
      return out;
    }

    /** Seq2SeqTransformer.encode for `groups` sources of srcLen tokens side by side: the memory rows (after ln_enc).
     * off: offByModule's; patterns: {"enc.self.L": Float64Array (groups, heads, q, k)} to fill, or null. */
    encode(src, groups, off, patterns) {
      const n = groups * this.srcLen, d = this.cfg.d_model, ws = this.ws;
      const x = this.embed(ws.get("enc.x", n * d), this.src_pos, src, groups, this.srcLen, 0);
      this.encoder.forEach((layer, L) => {
        const opts = { off: off[`enc.self.${L}`], pattern: patterns?.[`enc.self.${L}`] };
        encoderLayer(ws, x, groups, this.srcLen, layer, opts);
      });
      return layerNorm(ws.get("memory", n * d), x, n, this.ln_enc);
    }

    /**
     * Seq2SeqTransformer.decode for `groups` targets of nq tokens at positions start, start+1, …: each DecoderLayer
     * pre-LN (+ causal self-attention, + cross-attention over the memory, + feed-forward), then ln_dec and unembed;
     * returns the logits rows. Each layer keeps its keys and values as model.py's `state` does: of every position
     * decoded so far (so a greedy step feeds only the newest token), and of the memory, projected at start 0.
     */
    decode(tgt, groups, nq, start, memory, off, patterns) {
      const d = this.cfg.d_model, ws = this.ws, n = groups * nq, T = this.steps, S = this.srcLen;
      const y = this.embed(ws.get("dec.y", n * d), this.tgt_pos, tgt, groups, nq, start);
      const h = ws.get("dec.ln", n * d), out = ws.get("dec.out", n * d);
      const k = ws.get("dec.k", n * d), v = ws.get("dec.v", n * d);
      this.decoder.forEach((layer, L) => {
        const selfK = ws.get(`dec.self.k.${L}`, groups * T * d), selfV = ws.get(`dec.self.v.${L}`, groups * T * d);
        const crossK = ws.get(`dec.cross.k.${L}`, groups * S * d), crossV = ws.get(`dec.cross.v.${L}`, groups * S * d);
        layerNorm(h, y, n, layer.ln_self);
        linear(k, h, n, layer.self_attn.W_K);
        linear(v, h, n, layer.self_attn.W_V);
        for (let g = 0; g < groups; g++) // kept: group g's keys and values at rows g·T + start …
          for (let i = 0, from = g * nq * d, to = (g * T + start) * d; i < nq * d; i++) {
            selfK[to + i] = k[from + i];
            selfV[to + i] = v[from + i];
          }
        if (start === 0) { // the memory never changes: project it once
          linear(crossK, memory, groups * S, layer.cross_attn.W_K);
          linear(crossV, memory, groups * S, layer.cross_attn.W_V);
        }
        const self = { causal: true, qStart: start, off: off[`dec.self.${L}`], pattern: patterns?.[`dec.self.${L}`] };
        const seen = { groups, nq, nk: start + nq, kStride: T }; // the positions decoded so far
        addInto(y, attention(out, ws, h, selfK, selfV, layer.self_attn, seen, self), n * d);
        layerNorm(h, y, n, layer.ln_cross);
        const cross = { off: off[`dec.cross.${L}`], pattern: patterns?.[`dec.cross.${L}`] };
        addInto(y, attention(out, ws, h, crossK, crossV, layer.cross_attn, { groups, nq, nk: S }, cross), n * d);
        addInto(y, feedForward(out, ws, layerNorm(h, y, n, layer.ln_ff), n, layer.ff), n * d);
      });
      return linear(ws.get("dec.logits", n * this.unembed.nOut), layerNorm(h, y, n, this.ln_dec), n, this.unembed);
    }

    /** encode(src) with the heads `off`, kept: it depends on the encoder's heads only, so switching a decoder head
     * (16 of the 24) reuses it and recomputes only the decoder, half the work. Kept for one set of encoder heads. */
    memoryOf(src, groups, off) {
      const key = Object.keys(off).filter((m) => m.startsWith("enc.")).map((m) => `${m}:${[...off[m]]}`).join(" ");
      if (this.kept?.key !== key || this.kept.memories.size > 100) this.kept = { key, memories: new Map() };
      const sources = src.join(" ");
      if (!this.kept.memories.has(sources)) {
        const memory = this.encode(src, groups, off, null);
        this.kept.memories.set(sources, memory.slice(0, groups * this.srcLen * this.cfg.d_model));
      }
      return this.kept.memories.get(sources);
    }

    /** Seq2SeqTransformer.greedy for `groups` sources side by side: `steps` tokens each (no early stop), each the
     * argmax of the newest position's logits; an Int32Array (groups, steps). */
    greedy(src, groups, off) {
      const memory = this.memoryOf(src, groups, off), V = this.unembed.nOut, T = this.steps;
      const token = new Int32Array(groups).fill(BOS), out = new Int32Array(groups * T);
      for (let t = 0; t < T; t++) {
        const logits = this.decode(token, groups, 1, t, memory, off, null);
        for (let g = 0; g < groups; g++) {
          let best = 0; // torch's argmax: the first of equal maxima
          for (let c = 1; c < V; c++) if (logits[g * V + c] > logits[g * V + best]) best = c;
          token[g] = out[g * T + t] = best;
        }
      }
      return out;
    }

    /** data.decode_digits: the tokens up to </s> (or <pad>) as the answer string. */
    answerOf(tokens) {
      const out = Array.from(tokens), stop = out.findIndex((t) => t === EOS || t === PAD);
      const text = out.slice(0, stop < 0 ? out.length : stop).map((t) => VOCAB[t]).join("");
      return this.cfg.reverse_output ? [...text].reverse().join("") : text;
    }

    /** Adder.solve for many problems in one batched pass, BATCH at a time: [{answer} or {error}].
     * off: head ids switched off. */
    solveMany(texts, off) {
      const sources = texts.map((t) => this.source(t)), good = sources.filter((s) => !s.error);
      const byModule = Adder.offByModule(off), S = this.srcLen, T = this.steps, answers = [];
      for (let first = 0; first < good.length; first += BATCH) {
        const batch = good.slice(first, first + BATCH), src = new Int32Array(batch.length * S);
        batch.forEach((s, g) => src.set(s.ids, g * S));
        const out = this.greedy(src, batch.length, byModule);
        batch.forEach((_, g) => answers.push(this.answerOf(out.subarray(g * T, (g + 1) * T))));
      }
      let next = 0;
      return sources.map((s) => (s.error ? s : { answer: answers[next++] }));
    }

    /** Adder.solve for one problem: {answer} or {error}. */
    solve(text, off) {
      return this.solveMany([text], off)[0];
    }

    /**
     * Adder.run_with_cache's patterns: the decoder fed its own greedy output (<s> then the answer; from the
     * first </s> on, <pad>, as its code does), every layer's pattern[head][q][k] by module name, and the labels.
     */
    run(text, off) {
      const s = this.source(text);
      if (s.error) return s;
      const byModule = Adder.offByModule(off), src = Int32Array.from(s.ids), H = this.cfg.n_heads;
      const out = Array.from(this.greedy(src, 1, byModule));
      const tgt = [BOS, ...out.slice(0, -1)];
      const end = tgt.indexOf(EOS);
      if (end >= 0) tgt.fill(PAD, end);
      const S = this.srcLen, T = this.steps, shapes = {}, flat = {};
      for (let L = 0; L < this.cfg.n_enc_layers; L++) shapes[`enc.self.${L}`] = [S, S];
      for (let L = 0; L < this.cfg.n_dec_layers; L++) {
        shapes[`dec.self.${L}`] = [T, T];
        shapes[`dec.cross.${L}`] = [T, S];
      }
      for (const [name, [nq, nk]] of Object.entries(shapes)) flat[name] = new Float64Array(H * nq * nk);
      this.decode(Int32Array.from(tgt), 1, T, 0, this.encode(src, 1, byModule, flat), byModule, flat);
      const patterns = {}, labels = (ids) => ids.filter((t) => t !== PAD).map((t) => VOCAB[t]);
      for (const [name, [nq, nk]] of Object.entries(shapes)) patterns[name] = nested(flat[name], H, nq, nk);
      return { answer: this.answerOf(out), patterns, labels: { enc: labels(s.ids), dec: labels(tgt) } };
    }

    /** Exact match over `problems` ("a+b=sum" lines; the page's held-out sample by default) with heads off. */
    exactMatch(off, problems) {
      const lines = (problems || this.sample).map((line) => line.split("="));
      const answers = this.solveMany(lines.map(([sum]) => sum), off);
      return { right: answers.filter((a, i) => a.answer === lines[i][1]).length, n: lines.length };
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

  /** positional.rotate (RoPE), in place, on every head of `groups` sequences of nPos rows (row i at position i):
   * float32 angles pos·ω_i, each pair (even, odd) of a head's vector turned. */
  function rotate(x, groups, nPos, nHeads, d) {
    const dh = d / nHeads;
    for (let r = 0; r < groups * nPos; r++)
      for (let i = 0, pos = r % nPos; i < dh / 2; i++) {
        const angle = f(pos * f(10000 ** (-(2 * i) / dh))), c = f(Math.cos(angle)), s = f(Math.sin(angle));
        for (let h = 0; h < nHeads; h++) {
          const o = r * d + h * dh + 2 * i, even = x[o], odd = x[o + 1];
          x[o] = even * c - odd * s;
          x[o + 1] = even * s + odd * c;
        }
      }
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
      const cfg = (this.cfg = model.config), w = (this.w = model.tensor);
      this.maxLen = model.extra.max_len; // the page's longest sequence
      this.layers = range(cfg.n_layers).map((L) => encoderLayerOf(w, `layers.${L}`, cfg.n_heads));
      this.ln_f = layerNormOf(w, "ln_f");
      this.head = linearOf(w, "head");
      this.ws = new Workspace();
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

    /** SortednessClassifier.forward for one unpadded row: {sorted, pSorted, logit, scores (per token), patterns}. */
    classify(values) {
      const cfg = this.cfg, w = this.w, d = cfg.d_model, n = values.length, ws = this.ws, H = cfg.n_heads;
      const x = ws.get("x", n * d), embed = w("embed.weight");
      values.forEach((v, i) => {
        const r = i * d;
        for (let k = 0; k < d; k++) x[r + k] = embed[v * d + k];
        if (cfg.value_feature) { // value_angle: θ from π/4 (0) to 3π/4 (99), float32 as in PyTorch
          const theta = f(f(Math.PI / 4) + f(f(f(Math.PI / 2) * v) / 99));
          const c = f(Math.cos(theta)), s = f(Math.sin(theta)), vd = w("value_dir.weight");
          for (let k = 0; k < d; k++) x[r + k] += vd[2 * k] * c + vd[2 * k + 1] * s;
        }
        const pos = cfg.encoding === "sinusoidal" ? sinusoidal(i, d)
          : cfg.encoding === "learned" ? w("pos.learned.table").subarray(i * d, (i + 1) * d) : null;
        if (pos) for (let k = 0; k < d; k++) x[r + k] += pos[k];
      });
      const opts = {};
      if (cfg.encoding === "alibi") opts.bias = alibi(H, cfg.alibi_directional);
      if (cfg.encoding === "relative") opts.bias = relative(w, cfg, n);
      if (cfg.encoding === "rope") opts.rotary = rotate;
      const patterns = this.layers.map((layer) => {
        const pattern = new Float64Array(H * n * n);
        encoderLayer(ws, x, 1, n, layer, { ...opts, pattern });
        return nested(pattern, H, n, n);
      });
      // a violation score per token, pooled (max by default) into "unsorted"; its negative is "sorted"
      const ln = layerNorm(ws.get("ln", n * d), x, n, this.ln_f);
      const scores = Array.from(linear(ws.get("scores", n), ln, n, this.head).subarray(0, n));
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
