#!/usr/bin/env python3
"""Trains kite-tiny: tokenizer (byte-level BPE, 16k) and a ~16M-parameter DeepSeek-V3-architecture
model on the corpus made by extract_corpus.py. Run on the GPU machine:

    python3 tools/train/train_kite_tiny.py --corpus DIR --out models/kite-tiny --seconds 420

Writes a Hugging Face folder: config.json, model-0000N-of-0000M.safetensors (bf16, shards
under 15 MB) + index, tokenizer.json, tokenizer_config.json, generation_config.json,
train_log.json (loss curve, held-out loss, tokens seen, time) and loss_curve.png.
The learning-rate schedule runs on a fixed step count computed from --seconds after a
timed warm-up, so the run ends inside its time budget.
"""
import argparse
import contextlib
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(__file__))
from tiny_deepseek import TinyDeepseekV3  # noqa: E402

BOS, EOS, PAD, USER, ASSISTANT = ("<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>",
                                  "<｜▁pad▁｜>", "<｜User｜>", "<｜Assistant｜>")
SPECIALS = [BOS, EOS, PAD, USER, ASSISTANT]

CHAT_TEMPLATE = (
    "{% if not add_generation_prompt is defined %}{% set add_generation_prompt = false %}{% endif %}"
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{% if message['role'] == 'system' %}{{ message['content'] + '\\n\\n' }}"
    "{% elif message['role'] == 'user' %}{{ '<｜User｜>' + message['content'] }}"
    "{% elif message['role'] == 'assistant' %}{{ '<｜Assistant｜>' + message['content'] + eos_token }}"
    "{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<｜Assistant｜>' }}{% endif %}")

MODEL_CONFIG = dict(
    architectures=["DeepseekV3ForCausalLM"], model_type="deepseek_v3", vocab_size=16384,
    hidden_size=256, intermediate_size=768, moe_intermediate_size=192, num_hidden_layers=6,
    num_attention_heads=4, num_key_value_heads=4, n_shared_experts=1, n_routed_experts=8,
    num_experts_per_tok=2, first_k_dense_replace=1, moe_layer_freq=1, routed_scaling_factor=2.5,
    scoring_func="sigmoid", topk_method="noaux_tc", n_group=4, topk_group=2, norm_topk_prob=True,
    q_lora_rank=128, kv_lora_rank=64, qk_nope_head_dim=32, qk_rope_head_dim=16, v_head_dim=32,
    max_position_embeddings=2048, rms_norm_eps=1e-6, rope_theta=10000.0, rope_scaling=None,
    rope_interleave=True, tie_word_embeddings=False, attention_bias=False, attention_dropout=0.0,
    hidden_act="silu", initializer_range=0.02, bos_token_id=0, eos_token_id=1, pad_token_id=2,
    torch_dtype="bfloat16", use_cache=True)


def autocast(device):
    if device == "cuda":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def train_tokenizer(train_path, out_dir, vocab_size):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIALS, min_frequency=2,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train([train_path], trainer)
    tok.post_processor = processors.TemplateProcessing(single=f"{BOS} $A",
                                                       pair=f"{BOS} $A {BOS} $B",
                                                       special_tokens=[(BOS, 0)])
    tok.save(os.path.join(out_dir, "tokenizer.json"))
    added = {str(i): {"content": s, "lstrip": False, "normalized": False, "rstrip": False,
                      "single_word": False, "special": True} for i, s in enumerate(SPECIALS)}
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w") as f:
        json.dump({"add_bos_token": True, "add_eos_token": False, "bos_token": BOS,
                   "eos_token": EOS, "pad_token": PAD, "unk_token": None,
                   "clean_up_tokenization_spaces": False, "model_max_length": 2048,
                   "tokenizer_class": "PreTrainedTokenizerFast", "added_tokens_decoder": added,
                   "chat_template": CHAT_TEMPLATE}, f, indent=2, ensure_ascii=False)
    return tok


def encode_docs(tok, path):
    """Each document becomes BOS + tokens + EOS; documents are concatenated."""
    with open(path, encoding="utf-8") as f:
        docs = [d for d in f.read().split("\n\n") if d.strip()]
    # Group lines of a document back: extract_corpus separates documents by one blank line.
    encs = tok.encode_batch(docs, add_special_tokens=False)
    total = sum(len(e.ids) + 2 for e in encs)
    arr = np.empty(total, dtype=np.uint16)
    pos = 0
    for e in encs:
        n = len(e.ids)
        arr[pos] = 0
        arr[pos + 1:pos + 1 + n] = e.ids
        arr[pos + 1 + n] = 1
        pos += n + 2
    return arr


@torch.no_grad()
def heldout_loss(model, data, seq, device, batch=64):
    model.eval()
    n = (len(data) - 1) // seq
    total, count = 0.0, 0
    for b in range(0, n, batch):
        idx = np.arange(b, min(n, b + batch))
        x = torch.from_numpy(np.stack([data[i * seq:(i + 1) * seq] for i in idx]).astype(np.int64)).to(device)
        y = torch.from_numpy(np.stack([data[i * seq + 1:(i + 1) * seq + 1] for i in idx]).astype(np.int64)).to(device)
        with autocast(device):
            logits = model(x)
        loss = F.cross_entropy(logits.float().view(-1, logits.shape[-1]), y.view(-1), reduction="sum")
        total += loss.item()
        count += y.numel()
    model.train()
    return total / count


def save_checkpoint(model, out_dir, max_shard_bytes=14 * 1000 * 1000):  # files stay < 15 MB
    from safetensors.torch import save_file
    state = {k: (v.to(torch.bfloat16) if "e_score_correction_bias" not in k else v.float()).cpu()
             for k, v in model.checkpoint_state().items()}
    shards, cur, size = [], {}, 0
    for k in sorted(state):
        nbytes = state[k].numel() * state[k].element_size()
        if cur and size + nbytes > max_shard_bytes:
            shards.append(cur)
            cur, size = {}, 0
        cur[k] = state[k]
        size += nbytes
    shards.append(cur)
    weight_map = {}
    for i, shard in enumerate(shards):
        name = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        save_file(shard, os.path.join(out_dir, name), metadata={"format": "pt"})
        weight_map.update({k: name for k in shard})
    total = sum(v.numel() * v.element_size() for v in state.values())
    with open(os.path.join(out_dir, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=1)
    return sum(v.numel() for v in state.values())


def plot(log, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot([p[0] / 1e6 for p in log["train"]], [p[1] for p in log["train"]], label="train")
    ax.plot([p[0] / 1e6 for p in log["heldout"]], [p[1] for p in log["heldout"]], "o-", label="held-out")
    ax.set_xlabel("tokens seen (millions)")
    ax.set_ylabel("cross-entropy (nats/token)")
    ax.set_title("kite-tiny training loss")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--seconds", type=float, default=420)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dropout", type=float, default=0.1, help="residual dropout while training")
    ap.add_argument("--smoke", action="store_true", help="tiny CPU run to check the script")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    t_start = time.time()
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    cfg = dict(MODEL_CONFIG)
    if args.smoke:
        cfg.update(vocab_size=300, hidden_size=32, intermediate_size=64, moe_intermediate_size=16,
                   num_hidden_layers=2, q_lora_rank=16, kv_lora_rank=16)

    if args.smoke:
        tok = None
        with open(os.path.join(args.corpus, "train.txt"), "rb") as f:
            train = np.frombuffer(f.read(200000), dtype=np.uint8).astype(np.uint16)
        with open(os.path.join(args.corpus, "heldout.txt"), "rb") as f:
            held = np.frombuffer(f.read(20000), dtype=np.uint8).astype(np.uint16)
    else:
        tok = train_tokenizer(os.path.join(args.corpus, "train.txt"), args.out, cfg["vocab_size"])
        train = encode_docs(tok, os.path.join(args.corpus, "train.txt"))
        held = encode_docs(tok, os.path.join(args.corpus, "heldout.txt"))
    t_tok = time.time() - t_start
    print(f"tokenizer+encode {t_tok:.1f}s: train {len(train)/1e6:.2f}M tokens, held-out {len(held)/1e3:.1f}k", flush=True)

    model = TinyDeepseekV3(dict(cfg, train_dropout=args.dropout)).to(device)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"params {n_params/1e6:.2f}M", flush=True)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2 and "embed" not in n]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2 or "embed" in n]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), **({"fused": True} if device == "cuda" else {}))
    step_fn = model
    if device == "cuda":
        try:
            step_fn = torch.compile(model)
        except Exception as e:  # compile is an optimisation only
            print("torch.compile unavailable:", e)

    rng = np.random.default_rng(args.seed)
    seq, batch = args.seq, args.batch
    warmup, total_steps = 100, None
    log = {"train": [], "heldout": []}
    budget = args.seconds if not args.smoke else 20
    t0 = time.time()
    step = 0
    tokens = 0
    best = (float("inf"), 0, 0, None)  # held-out loss, tokens, step, state: early stopping
    while True:
        if total_steps is None and step == 30:
            per_step = (time.time() - t_calib) / 20
            total_steps = 30 + int((budget - (time.time() - t0)) / per_step)
            print(f"{per_step*1000:.1f} ms/step -> {total_steps} steps", flush=True)
        if step == 10:
            if device == "cuda":
                torch.cuda.synchronize()
            t_calib = time.time()
        if total_steps is not None and step >= total_steps:
            break
        horizon = total_steps or 10**9
        if step < warmup:
            lr = args.lr * (step + 1) / warmup
        else:
            prog = min(1.0, (step - warmup) / max(1, horizon - warmup))
            lr = args.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * prog)))
        for g in opt.param_groups:
            g["lr"] = lr
        starts = rng.integers(0, len(train) - seq - 1, size=batch)
        xy = np.stack([train[s:s + seq + 1] for s in starts]).astype(np.int64)
        xy = torch.from_numpy(xy).to(device, non_blocking=True)
        x, y = xy[:, :-1], xy[:, 1:]
        with autocast(device):
            try:
                logits = step_fn(x)
            except Exception as e:  # torch.compile is an optimisation: fall back to eager
                if step_fn is model:
                    raise
                print("compiled step failed, running eager:", repr(e)[:300], flush=True)
                step_fn = model
                logits = model(x)
        loss = F.cross_entropy(logits.float().view(-1, logits.shape[-1]), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        model.update_routing_bias(1e-3)
        step += 1
        tokens += batch * seq
        if step % 50 == 0 or step == 1:
            log["train"].append((tokens, loss.item()))
            print(f"step {step} tokens {tokens/1e6:.1f}M loss {loss.item():.3f} lr {lr:.2e} "
                  f"t {time.time()-t0:.0f}s", flush=True)
        if total_steps and step % max(1, total_steps // 12) == 0:
            log["heldout"].append((tokens, heldout_loss(model, held, seq, device)))
            print(f"  held-out loss {log['heldout'][-1][1]:.3f}", flush=True)
            if log["heldout"][-1][1] < best[0]:
                best = (log["heldout"][-1][1], tokens, step,
                        {k: v.detach().clone() for k, v in model.state_dict().items()})
        if args.smoke and step >= 40:
            break

    train_seconds = time.time() - t0
    final = heldout_loss(model, held, seq, device)
    log["heldout"].append((tokens, final))
    shipped_tokens, shipped_step = tokens, step
    if best[3] is not None and best[0] < final:  # ship the checkpoint that generalised best
        model.load_state_dict(best[3])
        final, shipped_tokens, shipped_step = best[0], best[1], best[2]
        print(f"shipping the step-{shipped_step} checkpoint (held-out {final:.3f})", flush=True)
    loads = [m.last_load.tolist() for m in model.moe_layers()]
    n_saved = save_checkpoint(model, args.out)
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    with open(os.path.join(args.out, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": 0, "eos_token_id": 1, "do_sample": True, "temperature": 0.7,
                   "top_p": 0.9}, f, indent=2)
    summary = dict(params=n_saved, steps=step, tokens_seen=tokens, shipped_step=shipped_step,
                   shipped_tokens_seen=shipped_tokens, dropout=args.dropout, batch=batch, seq=seq,
                   train_seconds=round(train_seconds, 1), tokenizer_seconds=round(t_tok, 1),
                   train_tokens=int(len(train)), heldout_tokens=int(len(held)),
                   heldout_loss=final, heldout_perplexity=math.exp(final),
                   expert_load_last_step=loads, gpu=torch.cuda.get_device_name() if device == "cuda" else "cpu",
                   torch=torch.__version__, log=log)
    with open(os.path.join(args.out, "train_log.json"), "w") as f:
        json.dump(summary, f, indent=1)
    try:
        plot(log, os.path.join(args.out, "loss_curve.png"))
    except Exception as e:
        print("plot failed:", e)
    print(f"done: {step} steps, {tokens/1e6:.1f}M tokens, {train_seconds:.0f}s, held-out ppl {math.exp(final):.2f}")


if __name__ == "__main__":
    main()
