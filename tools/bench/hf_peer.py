#!/usr/bin/env python3
"""Hugging Face transformers as the side-by-side peer of `kite bench latency` (issue 6).

Builds the model of a config.json with random BF16 weights directly on the GPU and times, with
CUDA events/synchronize, what `kite bench latency` reports for the same shapes:
  prefill  = one forward of batch x input_len tokens (TTFT of the batch);
  decode   = mean time of one step of batch tokens with the KV cache (output_len steps).
Modes: eager (DynamicCache) and, where it works, static cache + torch.compile
(mode="reduce-overhead"); a mode that fails or runs out of its time budget is reported as such.
Prints one JSON line per (mode, batch) and writes them all to --out.

    python3 tools/bench/hf_peer.py --config tools/bench/configs/llama3_8b --batch 1 64 \
        --input-len 512 --output-len 64 --out /tmp/hf_peer.json
"""
import argparse
import json
import time

import torch
from transformers import AutoConfig, AutoModelForCausalLM


def build(config_dir):
    cfg = AutoConfig.from_pretrained(config_dir)
    cfg._attn_implementation = "sdpa"
    with torch.device("cuda"):
        model = AutoModelForCausalLM.from_config(cfg, torch_dtype=torch.bfloat16)
    model.eval()
    return cfg, model


@torch.inference_mode()
def time_eager(model, vocab, batch, input_len, output_len):
    ids = torch.randint(0, vocab, (batch, input_len), device="cuda")
    # warm-up (allocator, kernels)
    out = model(ids[:, :16], use_cache=True)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    out = model(ids, use_cache=True)
    torch.cuda.synchronize()
    prefill = time.perf_counter() - t0
    pkv = out.past_key_values
    nxt = out.logits[:, -1:].argmax(-1)
    steps = []
    for _ in range(output_len):
        t = time.perf_counter()
        out = model(nxt, past_key_values=pkv, use_cache=True)
        nxt = out.logits[:, -1:].argmax(-1)
        torch.cuda.synchronize()
        steps.append(time.perf_counter() - t)
        pkv = out.past_key_values
    steps.sort()
    return {"prefill_ms": prefill * 1e3, "decode_ms_mean": sum(steps) / len(steps) * 1e3,
            "decode_ms_p50": steps[len(steps) // 2] * 1e3}


@torch.inference_mode()
def time_compiled(model, vocab, batch, input_len, output_len, budget_s):
    from transformers import StaticCache
    t_start = time.perf_counter()
    ids = torch.randint(0, vocab, (batch, input_len), device="cuda")
    cache = StaticCache(config=model.config, max_batch_size=batch,
                        max_cache_len=input_len + output_len + 8, device="cuda",
                        dtype=torch.bfloat16)
    step = torch.compile(model.forward, mode="reduce-overhead", fullgraph=False)
    pos = torch.arange(input_len, device="cuda")
    t0 = time.perf_counter()
    out = model(ids, past_key_values=cache, cache_position=pos, use_cache=True)
    torch.cuda.synchronize()
    prefill = time.perf_counter() - t0
    nxt = out.logits[:, -1:].argmax(-1)
    steps = []
    for i in range(output_len):
        if time.perf_counter() - t_start > budget_s:
            return {"error": f"over the {budget_s} s budget after {i} steps (compiling)"}
        p = torch.tensor([input_len + i], device="cuda")
        t = time.perf_counter()
        out = step(nxt, past_key_values=cache, cache_position=p, use_cache=True)
        nxt = out.logits[:, -1:].argmax(-1)
        torch.cuda.synchronize()
        steps.append(time.perf_counter() - t)
    steady = sorted(steps[len(steps) // 2:])  # the first steps compile and record the graph
    return {"prefill_ms": prefill * 1e3, "decode_ms_mean": sum(steady) / len(steady) * 1e3,
            "decode_ms_p50": steady[len(steady) // 2] * 1e3}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True)
    ap.add_argument("--batch", type=int, nargs="+", default=[1])
    ap.add_argument("--input-len", type=int, default=512)
    ap.add_argument("--output-len", type=int, default=64)
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--compile-budget-s", type=float, default=150)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    cfg, model = build(a.config)
    rows = []
    for b in a.batch:
        r = {"peer": "transformers", "mode": "eager", "config": a.config, "batch": b,
             "input_len": a.input_len, "output_len": a.output_len}
        try:
            r.update(time_eager(model, cfg.vocab_size, b, a.input_len, a.output_len))
        except Exception as e:  # noqa: BLE001 - report, keep going
            r["error"] = repr(e)[:300]
        print(json.dumps(r), flush=True)
        rows.append(r)
        torch.cuda.empty_cache()
    if a.compile:
        for b in a.batch[:1]:
            r = {"peer": "transformers", "mode": "static+compile", "config": a.config, "batch": b,
                 "input_len": a.input_len, "output_len": a.output_len}
            try:
                r.update(time_compiled(model, cfg.vocab_size, b, a.input_len, a.output_len,
                                       a.compile_budget_s))
            except Exception as e:  # noqa: BLE001
                r["error"] = repr(e)[:300]
            print(json.dumps(r), flush=True)
            rows.append(r)
    with open(a.out, "w") as f:
        json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
