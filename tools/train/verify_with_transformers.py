#!/usr/bin/env python3
"""Loads a trained kite-tiny folder with Hugging Face transformers (unchanged, as any user
would), measures held-out perplexity with it, and writes the fixtures kite is tested against:

    python3 tools/train/verify_with_transformers.py --model models/kite-tiny \
        --heldout models/kite-tiny/heldout.txt --fixtures tests/fixtures/kite_tiny

  FIXTURES/expected.json         prompts, their token ids (transformers' tokenizer, BOS added),
                                 32-token greedy continuations (plain argmax, fp32, no EOS stop)
  FIXTURES/expected.safetensors  fp32 logits of every prompt position for each prompt
  MODEL/verify.json              transformers' held-out loss/perplexity and sampled generations
"""
import argparse
import json
import math
import os

import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM, AutoTokenizer

PROMPTS = [
    "The meaning of life is",
    "In the beginning God created",
    "The kernel scheduler",
    "A dictionary is a book",
    "Once upon a time, there was a",
    "To configure the network interface, edit",
]
NEW_TOKENS = 32


def heldout_perplexity(model, tok, path, device, seq=512):
    with open(path, encoding="utf-8") as f:
        docs = [d for d in f.read().split("\n\n") if d.strip()]
    ids = []
    for d in docs:
        ids += [tok.bos_token_id] + tok(d, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    data = torch.tensor(ids)
    n = (len(data) - 1) // seq
    total, count = 0.0, 0
    with torch.no_grad():
        for b in range(0, n, 32):
            rows = range(b, min(n, b + 32))
            x = torch.stack([data[i * seq:(i + 1) * seq] for i in rows]).to(device)
            y = torch.stack([data[i * seq + 1:(i + 1) * seq + 1] for i in rows]).to(device)
            logits = model(x).logits.float()
            total += F.cross_entropy(logits.view(-1, logits.shape[-1]), y.view(-1), reduction="sum").item()
            count += y.numel()
    return total / count, count


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--heldout", required=True)
    ap.add_argument("--fixtures", required=True)
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    os.makedirs(args.fixtures, exist_ok=True)
    tok = AutoTokenizer.from_pretrained(args.model)
    device = "cuda" if torch.cuda.is_available() else "cpu"

    gpu_model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32,
                                                     attn_implementation="eager").to(device).eval()
    loss, count = heldout_perplexity(gpu_model, tok, args.heldout, device)
    print(f"transformers held-out loss {loss:.4f} ppl {math.exp(loss):.2f} over {count} tokens", flush=True)

    samples = []
    torch.manual_seed(0)
    for p in PROMPTS:
        enc = tok(p, return_tensors="pt").to(device)
        out = gpu_model.generate(**enc, max_new_tokens=60, do_sample=True, temperature=0.7,
                                 top_p=0.9, pad_token_id=tok.pad_token_id)
        samples.append({"prompt": p, "text": tok.decode(out[0, enc["input_ids"].shape[1]:],
                                                         skip_special_tokens=True)})
    chat = tok.apply_chat_template([{"role": "user", "content": "What is a kernel?"}],
                                   add_generation_prompt=True, tokenize=False)
    with open(os.path.join(args.model, "verify.json"), "w") as f:
        json.dump({"heldout_loss": loss, "heldout_perplexity": math.exp(loss),
                   "heldout_tokens": count, "samples": samples, "chat_rendered": chat}, f,
                  indent=1, ensure_ascii=False)

    # Fixtures: fp32 on the CPU, the same arithmetic kite's CPU backend does.
    cpu_model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32,
                                                     attn_implementation="eager").eval()
    expected, records = {}, []
    with torch.no_grad():
        for i, p in enumerate(PROMPTS):
            ids = tok(p)["input_ids"]
            expected[f"logits.{i}"] = cpu_model(torch.tensor([ids])).logits[0].float().contiguous()
            seq = list(ids)
            for _ in range(NEW_TOKENS):
                seq.append(int(torch.argmax(cpu_model(torch.tensor([seq])).logits[0, -1])))
            gen = seq[len(ids):]
            records.append({"prompt": p, "ids": ids, "greedy": gen,
                            "greedy_text": tok.decode(gen, skip_special_tokens=False)})
    save_file(expected, os.path.join(args.fixtures, "expected.safetensors"))
    with open(os.path.join(args.fixtures, "expected.json"), "w") as f:
        json.dump({"prompts": records, "new_tokens": NEW_TOKENS}, f, indent=1, ensure_ascii=False)
    for r in records:
        print(json.dumps(r["prompt"]), "->", json.dumps(r["greedy_text"]))
    for s in samples:
        print("SAMPLE", json.dumps(s, ensure_ascii=False))


if __name__ == "__main__":
    main()
