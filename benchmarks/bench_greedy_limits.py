"""How fast can greedy evaluation of the adder get on this CPU, in plain (eager) PyTorch?

The adder issue asks for greedy evaluation of the 10,000 held-out problems in <= 0.5 s on
2 CPU cores. This measures, in one run, on the committed checkpoint:

  * the package's `Seq2SeqTransformer.greedy` (what `evaluate` and `solve` use);
  * a hand-fused rewrite of the same decoding, written for speed rather than for reading: no
    module calls, one matrix product for Q, K and V, a preallocated key/value cache, the
    written-out softmax everywhere, attention summed over heads without reshaping copies.
    It must give the same 10,000 answers (checked), so it is the same model, only faster code;
  * the matrix products alone: every nn.Linear call of one evaluation, replayed on its own;
  * with --compile, also the package's greedy with encode and decode through torch.compile
    (Inductor: needs a C++ compiler; compiling takes minutes, and the growing key/value cache
    makes it recompile at each decoding step until dynamo's recompile limit, with warnings).

    python benchmarks/bench_greedy_limits.py [--compile]
"""

import argparse
import copy
import statistics
import time

import torch
import torch.nn.functional as F
from bench_adder import matrix_product_floor

from attnkit.adder import Adder
from attnkit.adder.data import BOS, encode_sources, load_test_set
from attnkit.core.attention import softmax_short_rows


def qkv_weights(attn) -> tuple[torch.Tensor, torch.Tensor]:
    """W_Q (scaled by 1/sqrt(d_head)), W_K, W_V stacked: one matrix product instead of three."""
    scale = attn.d_head**-0.5
    return (
        torch.cat([attn.W_Q.weight * scale, attn.W_K.weight, attn.W_V.weight]),
        torch.cat([attn.W_Q.bias * scale, attn.W_K.bias, attn.W_V.bias]),
    )


def layer_norm(ln, x):
    return F.layer_norm(x, ln.normalized_shape, ln.weight, ln.bias, ln.eps)


def feed_forward(ff, x):
    return F.linear(F.gelu(F.linear(x, ff[0].weight, ff[0].bias)), ff[2].weight, ff[2].bias)


@torch.no_grad()
def fused_greedy(model, src: torch.Tensor, chunk: int = 2048) -> torch.Tensor:
    """The committed adder's greedy decoding, fused by hand (zero-padded operands: no padding)."""
    cfg = model.cfg
    n_heads, d_head, steps = cfg.n_heads, cfg.d_model // cfg.n_heads, cfg.max_tgt_len - 1
    enc_qkv = [qkv_weights(layer.self_attn) for layer in model.encoder]
    dec_qkv = [qkv_weights(layer.self_attn) for layer in model.decoder]
    outs = []
    for s in src.split(chunk):
        batch, n_src = s.shape
        x = model.tok_embed(s) + model.src_pos.weight[:n_src]
        for layer, (w, bias) in zip(model.encoder, enc_qkv):
            qkv = F.linear(layer_norm(layer.ln_attn, x), w, bias).view(batch, n_src, 3, n_heads, d_head)
            q, k, v = qkv.permute(2, 0, 3, 1, 4)  # each (batch, heads, pos, d_head)
            z = softmax_short_rows(q @ k.transpose(-2, -1)) @ v
            x = x + layer.self_attn.W_O(z.transpose(1, 2).reshape(batch, n_src, cfg.d_model))
            x = x + feed_forward(layer.ff, layer_norm(layer.ln_ff, x))
        memory = layer_norm(model.ln_enc, x)
        cross = []
        for layer in model.decoder:
            k, v = (
                m(memory).view(batch, n_src, n_heads, d_head).transpose(1, 2).contiguous()
                for m in (layer.cross_attn.W_K, layer.cross_attn.W_V)
            )
            cross.append((k, v))
        cache = [torch.empty(2, batch, n_heads, steps, d_head) for _ in model.decoder]
        token, out = torch.full((batch,), BOS, dtype=torch.long), []
        for t in range(steps):
            y = model.tok_embed(token) + model.tgt_pos.weight[t]
            for layer, (w, bias), kv, (ck, cv) in zip(model.decoder, dec_qkv, cache, cross):
                q, k, v = F.linear(layer_norm(layer.ln_self, y), w, bias).view(batch, 3, n_heads, d_head).unbind(1)
                kv[0, :, :, t], kv[1, :, :, t] = k, v
                weights = softmax_short_rows((q.unsqueeze(2) * kv[0, :, :, : t + 1]).sum(-1))
                z = (weights.unsqueeze(-1) * kv[1, :, :, : t + 1]).sum(2)
                y = y + layer.self_attn.W_O(z.reshape(batch, cfg.d_model))
                q = layer.cross_attn.W_Q(layer_norm(layer.ln_cross, y)).view(batch, n_heads, 1, d_head)
                weights = softmax_short_rows(q @ ck.transpose(-2, -1) * d_head**-0.5)
                z = (weights.transpose(-2, -1) * cv).sum(2)
                y = y + layer.cross_attn.W_O(z.reshape(batch, cfg.d_model))
                y = y + feed_forward(layer.ff, layer_norm(layer.ln_ff, y))
            token = model.unembed(layer_norm(model.ln_dec, y)).argmax(-1)
            out.append(token)
        outs.append(torch.stack(out, dim=1))
    return torch.cat(outs)


def compiled_copy(model):
    """A copy of the model whose encode and decode go through torch.compile: its own greedy()
    loop then calls the compiled ones."""
    compiled = copy.deepcopy(model)
    compiled.encode, compiled.decode = torch.compile(compiled.encode), torch.compile(compiled.decode)
    return compiled


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--compile", action="store_true", help="also time torch.compile (slow to compile)")
    args = parser.parse_args()
    model = Adder.load(device="cpu").model
    a, b = load_test_set()
    src = encode_sources(a, b, model.cfg.n_digits, model.cfg.zero_pad)
    same = torch.equal(fused_greedy(model, src), model.greedy(src))
    print(f"torch threads: {torch.get_num_threads()}; the fused rewrite gives the same 10,000 answers: {same}")
    variants = {"package greedy": lambda: model.greedy(src), "hand-fused rewrite": lambda: fused_greedy(model, src)}
    if args.compile:
        compiled = compiled_copy(model)
        t = time.perf_counter()
        same = torch.equal(compiled.greedy(src), model.greedy(src))
        print(f"torch.compile: {time.perf_counter() - t:.0f} s to compile and run once; same answers: {same}")
        variants["torch.compile"] = lambda: compiled.greedy(src)
    times = {name: [] for name in variants}
    for _ in range(11):  # interleaved: this machine's speed drifts between runs
        for name, run in variants.items():
            t = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - t)
    floor, gflop = matrix_product_floor(model)
    base = statistics.median(times["package greedy"])
    for name, ts in times.items():
        print(
            f"{name:20s} median {statistics.median(ts):.3f} s (min {min(ts):.3f}), "
            f"ratio to the package {statistics.median(ts) / base:.2f}"
        )
    print(
        f"{'matrix products':20s} {floor:.3f} s for {gflop:.1f} GFLOP ({gflop / floor:.0f} GFLOP/s): "
        f"the floor for any float32 code that computes these products"
    )


if __name__ == "__main__":
    main()
