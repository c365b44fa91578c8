#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets into tests/fuzz/corpus/<target>/ (committed).

Each seed is a small, mostly valid input so that libFuzzer starts from inputs that reach deep
into the parser; a few are already broken in typical ways. Run from the repository root:
  python3 tests/fuzz/make_corpus.py
"""
import json
import os
import struct

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def write(target, name, data):
    d = os.path.join(ROOT, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogatepass")
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def openai_request():
    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    chat = [
        {"messages": msgs},
        {"messages": msgs, "stream": True, "stream_options": {"include_usage": True},
         "max_tokens": 8, "temperature": 0.7, "top_p": 0.9, "top_k": 40, "seed": 3},
        {"messages": [{"role": "user", "content": [{"type": "text", "text": "a"},
                                                   {"type": "text", "text": "b"}]}],
         "logprobs": True, "top_logprobs": 5, "n": 2},
        {"messages": msgs, "stop": ["\n", "END"], "stop_token_ids": [1, 2],
         "presence_penalty": 0.5, "frequency_penalty": -0.5, "repetition_penalty": 1.1},
        {"messages": msgs, "tools": [{"type": "function", "function": {"name": "f"}}],
         "priority": -2, "ignore_eos": True, "max_completion_tokens": 16, "min_p": 0.05},
        {"messages": []},
        {"messages": [{"content": "no role"}]},
        {"messages": msgs, "top_logprobs": 2},
    ]
    completion = [
        {"prompt": "Once upon a time", "max_tokens": 16},
        {"prompt": ["a", "b"], "n": 3, "logprobs": 2, "echo": False},
        {"prompt": [1, 2, 3], "best_of": 1, "stream": True},
        {"prompt": [[1, 2], [3]], "seed": -1, "temperature": 0},
        {"prompt": "x", "max_tokens": 5.0, "stop": "y", "suffix": None},
        {"prompt": "x", "max_tokens": 1e300},
        {"prompt": "x", "n": 18446744073709551615},
        {"prompt": "x", "temperature": "hot"},
        {"prompt": "x", "logprobs": True},
    ]
    for i, body in enumerate(chat):
        write("openai_request", f"chat_{i:02d}", "\x01" + json.dumps(body))
    for i, body in enumerate(completion):
        write("openai_request", f"completion_{i:02d}", "\x00" + json.dumps(body))
    write("openai_request", "not_json", "\x00{\"prompt\": [")
    write("openai_request", "array", "\x01[1, 2, 3]")
    write("openai_request", "deep", "\x01" + "[" * 200 + "]" * 200)


def tokenizer():
    texts = [
        "Hello world", "Once upon a time, there was a kernel.\n\n  indented\ttab",
        "numbers 1234567890 3.14159 -42", "caf\u00e9 na\u0308ive \u00c5ngstr\u00f6m",
        "\u4f60\u597d\uff0c\u4e16\u754c \u3053\u3093\u306b\u3061\u306f \ud55c\uad6d\uc5b4",
        "emoji \U0001F600\U0001F680 \u200d zwj", "<\uff5cUser\uff5c>hi<\uff5cAssistant\uff5c>",
        "<\uff5cbegin\u2581of\u2581sentence\uff5c>x<\uff5cend\u2581of\u2581sentence\uff5c>",
        "   leading and trailing   ", "don't can't I'm we'll they've", "a" * 300,
        "\u0645\u0631\u062d\u0628\u0627 \u05e9\u05dc\u05d5\u05dd", "code: if (x) { return y; }",
    ]
    for i, t in enumerate(texts):
        write("tokenizer", f"text_{i:02d}", t)
    write("tokenizer", "invalid_utf8", b"ab\xff\xfe\xc3(\xe2\x82\xf0\x9f\x98")
    write("tokenizer", "nul_bytes", b"a\x00b\x00\x00c")
    write("tokenizer", "ids", struct.pack("<8i", 1, 44, 574, 83, 2056, 16383, 16384, -5))
    write("tokenizer", "ids_special", struct.pack("<6i", 0, 1, 2, 3, 4, 100))


def chat_template():
    cfg = json.load(open(os.path.join(ROOT, "..", "..", "..", "models", "kite-tiny",
                                      "tokenizer_config.json")))
    templates = [
        cfg["chat_template"],
        "{% for m in messages %}{{ m.role | upper }}: {{ m.content | trim }}\n{% endfor %}",
        "{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}"
        "{% endfor %}{{ ns.n }}{{ messages | length }}",
        "{% macro f(x, y=2) %}{{ x * y }}{% endmacro %}{{ f(3) }}{{ f(x=1, y='a') }}",
        "{{ tools | tojson(indent=2) }}{{ messages[0]['content'].split(' ') | join(',') }}",
        "{% if messages[0].role == 'system' %}{{ raise_exception('no system') }}{% endif %}",
        "{{ 'x' * 10 }}{% for i in range(3) %}{{ loop.index }}{{ loop.last }}{% endfor %}",
        "{{ messages[-1].content[1:3] }}{{ 7 // 2 }}{{ 7 % 3 }}{{ 2 ** 8 }}{{ none is none }}",
        "{%- for m in messages if m.role != 'tool' -%}{{ m.content|replace('a','b') }}"
        "{%- else %}empty{% endfor -%}",
        "{% for i in range(1000000000) %}x{% endfor %}",
        "{% macro r(n) %}{{ r(n + 1) }}{% endmacro %}{{ r(0) }}",
        "{{ unclosed", "{% for %}", "{{ {'a': [1, 2.5, true, none]} | items | list }}",
    ]
    for i, t in enumerate(templates):
        write("chat_template", f"template_{i:02d}", "\x00" + t)
    messages = [
        [{"role": "user", "content": "Hi"}],
        [{"role": "system", "content": "S"}, {"role": "user", "content": "U"},
         {"role": "assistant", "content": "A"}, {"role": "user", "content": "\u00e9\U0001F600"}],
        [{"role": "tool", "content": None}, {"role": 3}],
        [{"role": "user", "content": [{"type": "text", "text": "parts"}]}],
        {"not": "a list"}, "string", [],
    ]
    for i, m in enumerate(messages):
        write("chat_template", f"messages_{i:02d}", "\x01" + json.dumps(m))


def safetensors_bytes(tensors, metadata=None, data=None, header_len=None):
    header = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    offset = 0
    blob = b""
    sizes = {"F32": 4, "F16": 2, "BF16": 2, "F64": 8, "F8_E4M3": 1, "I32": 4}
    for name, dtype, shape in tensors:
        n = sizes.get(dtype, 1)
        for d in shape:
            n *= d
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + n]}
        blob += bytes((i * 37 + 11) & 0xFF for i in range(n))
        offset += n
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", header_len if header_len is not None else len(h)) + h + (
        data if data is not None else blob)


def safetensors():
    ok = [("a.weight", "F32", [2, 3]), ("b", "BF16", [4]), ("c", "F16", [1, 1, 2])]
    write("safetensors", "valid", safetensors_bytes(ok, {"format": "pt"}))
    write("safetensors", "fp8", safetensors_bytes(
        [("w", "F8_E4M3", [4, 8]), ("w_scale_inv", "F32", [1, 1])]))
    write("safetensors", "scalar_and_empty", safetensors_bytes(
        [("s", "F32", []), ("e", "F32", [0, 5]), ("d", "F64", [2])]))
    write("safetensors", "empty_header", safetensors_bytes([]))
    v = safetensors_bytes(ok)
    write("safetensors", "truncated_data", v[:-5])
    write("safetensors", "truncated_header", v[:20])
    write("safetensors", "header_len_huge", safetensors_bytes(ok, header_len=1 << 40))
    write("safetensors", "unknown_dtype", safetensors_bytes([("x", "Q4", [4])]))
    bad = json.dumps({"x": {"dtype": "F32", "shape": [2], "data_offsets": [4, 0]}}).encode()
    write("safetensors", "reversed_offsets", struct.pack("<Q", len(bad)) + bad + b"\0" * 8)
    bad = json.dumps({"x": {"dtype": "F32", "shape": [-1, 2], "data_offsets": [0, 8]}}).encode()
    write("safetensors", "negative_dim", struct.pack("<Q", len(bad)) + bad + b"\0" * 8)
    bad = json.dumps({"x": {"dtype": "F32", "shape": [4611686018427387904, 4],
                            "data_offsets": [0, 0]}}).encode()
    write("safetensors", "overflow_shape", struct.pack("<Q", len(bad)) + bad)
    write("safetensors", "short", b"\x08\x00\x00")


def model_config():
    base = os.path.join(ROOT, "..", "..", "..")
    paths = ["models/kite-tiny/config.json"] + [
        f"tests/fixtures/models/{m}/config.json"
        for m in ("deepseek_v2", "deepseek_v3", "llama3", "qwen2")]
    for p in paths:
        name = p.split("/")[-2]
        with open(os.path.join(base, p), "rb") as f:
            write("model_config", name, f.read())
    write("model_config", "minimal_llama", json.dumps({
        "model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "vocab_size": 100, "rope_scaling": {"rope_type": "llama3", "factor": 8.0,
                                            "low_freq_factor": 1, "high_freq_factor": 4,
                                            "original_max_position_embeddings": 64}}))
    write("model_config", "yarn", json.dumps({
        "model_type": "deepseek_v2", "hidden_size": 64, "num_hidden_layers": 1,
        "num_attention_heads": 0, "vocab_size": 10,
        "rope_scaling": {"type": "yarn", "factor": 40, "mscale": 0.707}}))
    write("model_config", "not_object", "[1, 2]")
    write("model_config", "broken", "{\"model_type\": \"llama\", ")


if __name__ == "__main__":
    openai_request()
    tokenizer()
    chat_template()
    safetensors()
    model_config()
