"""A compact PyTorch DeepSeek-V3 (MLA + MoE) used only to train kite-tiny fast.

It computes exactly what transformers' DeepseekV3ForCausalLM computes (sigmoid noaux_tc routing,
interleaved RoPE on the rope dims, q/kv LoRA with RMSNorm), but keeps the routed experts as
stacked tensors and evaluates every expert densely with a routing-weight mask, which is faster
for 8 small experts on a GPU than gathering tokens. `checkpoint_state()` writes the weights
under the names of the published DeepSeek-V3 checkpoints (one tensor per expert), so
transformers and kite load them unchanged; tools/train/verify_with_transformers.py proves it.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        dtype = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)


def rope_interleaved(x, cos, sin):
    # x [..., T, d] with pairs (x0,x1),(x2,x3)...; output de-interleaved as transformers does.
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


class MLA(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.h = c["num_attention_heads"]
        self.nope, self.rope = c["qk_nope_head_dim"], c["qk_rope_head_dim"]
        self.vdim, self.kv_rank = c["v_head_dim"], c["kv_lora_rank"]
        d = c["hidden_size"]
        self.q_a_proj = nn.Linear(d, c["q_lora_rank"], bias=False)
        self.q_a_layernorm = RMSNorm(c["q_lora_rank"], c["rms_norm_eps"])
        self.q_b_proj = nn.Linear(c["q_lora_rank"], self.h * (self.nope + self.rope), bias=False)
        self.kv_a_proj_with_mqa = nn.Linear(d, self.kv_rank + self.rope, bias=False)
        self.kv_a_layernorm = RMSNorm(self.kv_rank, c["rms_norm_eps"])
        self.kv_b_proj = nn.Linear(self.kv_rank, self.h * (self.nope + self.vdim), bias=False)
        self.o_proj = nn.Linear(self.h * self.vdim, d, bias=False)
        self.scale = (self.nope + self.rope) ** -0.5

    def forward(self, x, cos, sin):
        B, T, _ = x.shape
        q = self.q_b_proj(self.q_a_layernorm(self.q_a_proj(x))).view(B, T, self.h, -1).transpose(1, 2)
        q_nope, q_rot = q.split([self.nope, self.rope], dim=-1)
        kv = self.kv_a_proj_with_mqa(x)
        kv_nope, k_rot = kv.split([self.kv_rank, self.rope], dim=-1)
        kv_nope = self.kv_a_layernorm(kv_nope)
        k_rot = k_rot.view(B, 1, T, self.rope)
        q_rot = rope_interleaved(q_rot, cos, sin)
        k_rot = rope_interleaved(k_rot, cos, sin)
        kvb = self.kv_b_proj(kv_nope).view(B, T, self.h, -1).transpose(1, 2)
        k_nope, v = kvb.split([self.nope, self.vdim], dim=-1)
        k = torch.cat([k_nope, k_rot.expand(B, self.h, T, self.rope)], dim=-1)
        q = torch.cat([q_nope, q_rot], dim=-1)
        if hasattr(F, "scaled_dot_product_attention"):
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=self.scale)
        else:  # old PyTorch (CPU smoke runs only)
            att = (q @ k.transpose(-1, -2)) * self.scale
            mask = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)
            o = att.masked_fill(mask, float("-inf")).softmax(-1) @ v
        return self.o_proj(o.transpose(1, 2).reshape(B, T, -1))


class MLP(nn.Module):
    def __init__(self, d, inter):
        super().__init__()
        self.gate_proj = nn.Linear(d, inter, bias=False)
        self.up_proj = nn.Linear(d, inter, bias=False)
        self.down_proj = nn.Linear(inter, d, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class MoE(nn.Module):
    def __init__(self, c):
        super().__init__()
        d, i, e = c["hidden_size"], c["moe_intermediate_size"], c["n_routed_experts"]
        self.e, self.k = e, c["num_experts_per_tok"]
        self.n_group, self.topk_group = c["n_group"], c["topk_group"]
        self.scale, self.norm = c["routed_scaling_factor"], c["norm_topk_prob"]
        std = 1.0 / math.sqrt(d)
        self.gate_weight = nn.Parameter(torch.randn(e, d) * std)
        self.register_buffer("bias", torch.zeros(e))
        self.w_gate = nn.Parameter(torch.randn(e, i, d) * std)
        self.w_up = nn.Parameter(torch.randn(e, i, d) * std)
        self.w_down = nn.Parameter(torch.randn(e, d, i) / math.sqrt(i))
        self.shared_experts = MLP(d, i * c["n_shared_experts"])
        self.last_load = None

    def route(self, x):
        scores = F.linear(x.float(), self.gate_weight.float()).sigmoid()
        choice = scores + self.bias
        n = choice.shape[0]
        group = choice.view(n, self.n_group, -1).topk(2, dim=-1)[0].sum(-1)
        gidx = group.topk(self.topk_group, dim=-1, sorted=False)[1]
        gmask = torch.zeros_like(group).scatter_(1, gidx, 1.0)
        emask = gmask.unsqueeze(-1).expand(n, self.n_group, self.e // self.n_group).reshape(n, -1)
        choice = choice.masked_fill(emask == 0, float("-inf"))
        idx = choice.topk(self.k, dim=-1, sorted=False)[1]
        w = scores.gather(1, idx)
        if self.norm:
            w = w / (w.sum(-1, keepdim=True) + 1e-20)
        return idx, w * self.scale

    def forward(self, x):
        shape = x.shape
        h = x.reshape(-1, shape[-1])
        idx, w = self.route(h)
        dense_w = torch.zeros(h.shape[0], self.e, device=h.device, dtype=w.dtype).scatter(1, idx, w)
        with torch.no_grad():
            self.last_load = F.one_hot(idx.flatten(), self.e).sum(0).float()
        g = torch.einsum("nd,eid->eni", h, self.w_gate)
        u = torch.einsum("nd,eid->eni", h, self.w_up)
        y = torch.einsum("eni,edi->end", F.silu(g) * u, self.w_down)
        out = torch.einsum("end,ne->nd", y, dense_w.to(y.dtype))
        return out.view(shape) + self.shared_experts(x)


class Layer(nn.Module):
    def __init__(self, c, idx):
        super().__init__()
        self.input_layernorm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])
        self.post_attention_layernorm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])
        self.self_attn = MLA(c)
        self.is_moe = idx >= c["first_k_dense_replace"]
        self.mlp = MoE(c) if self.is_moe else MLP(c["hidden_size"], c["intermediate_size"])
        self.dropout = c.get("train_dropout", 0.0)

    def forward(self, x, cos, sin):
        # Residual dropout is a training-time regulariser only; inference is unchanged.
        p = self.dropout if self.training else 0.0
        x = x + F.dropout(self.self_attn(self.input_layernorm(x), cos, sin), p)
        return x + F.dropout(self.mlp(self.post_attention_layernorm(x)), p)


class TinyDeepseekV3(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.embed_tokens = nn.Embedding(c["vocab_size"], c["hidden_size"])
        nn.init.normal_(self.embed_tokens.weight, std=0.02)
        self.layers = nn.ModuleList(Layer(c, i) for i in range(c["num_hidden_layers"]))
        self.norm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])
        self.lm_head = nn.Linear(c["hidden_size"], c["vocab_size"], bias=False)
        rd = c["qk_rope_head_dim"]
        inv_freq = 1.0 / (c["rope_theta"] ** (torch.arange(0, rd, 2, dtype=torch.float) / rd))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, ids):
        T = ids.shape[1]
        pos = torch.arange(T, device=ids.device, dtype=torch.float)
        freqs = torch.outer(pos, self.inv_freq)
        cos, sin = freqs.cos(), freqs.sin()
        x = self.embed_tokens(ids)
        for layer in self.layers:
            x = layer(x, cos.to(x.dtype), sin.to(x.dtype))
        return self.lm_head(self.norm(x))

    def moe_layers(self):
        return [l.mlp for l in self.layers if l.is_moe]

    @torch.no_grad()
    def update_routing_bias(self, rate):
        """DeepSeek-V3's auxiliary-loss-free balancing: nudge each expert's bias towards the
        mean load (up if under-used, down if over-used)."""
        for moe in self.moe_layers():
            if moe.last_load is not None:
                load = moe.last_load
                moe.bias += rate * torch.sign(load.mean() - load)

    def checkpoint_state(self):
        """State dict under DeepSeek-V3's published tensor names."""
        out = {}
        for name, t in self.state_dict().items():
            if name == "inv_freq":
                continue
            if ".mlp." in name and name.split(".mlp.")[1] in ("gate_weight", "bias", "w_gate",
                                                              "w_up", "w_down"):
                prefix, leaf = name.split(".mlp.")
                p = "model." + prefix + ".mlp."
                if leaf == "gate_weight":
                    out[p + "gate.weight"] = t
                elif leaf == "bias":
                    out[p + "gate.e_score_correction_bias"] = t.float()
                else:
                    proj = {"w_gate": "gate_proj", "w_up": "up_proj", "w_down": "down_proj"}[leaf]
                    for e in range(t.shape[0]):
                        out[f"{p}experts.{e}.{proj}.weight"] = t[e]
            elif name.startswith("lm_head"):
                out[name] = t
            else:
                out["model." + name] = t
        return {k: v.contiguous() for k, v in out.items()}
