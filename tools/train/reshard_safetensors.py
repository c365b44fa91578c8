#!/usr/bin/env python3
"""Re-splits a safetensors checkpoint into shards of at most --max-bytes each (whole files,
headers included), rewriting model.safetensors.index.json. Tensor bytes are copied unchanged.
Standard library only, so it runs anywhere:
    python3 tools/train/reshard_safetensors.py models/kite-tiny --max-bytes 14000000
"""
import argparse
import glob
import json
import os
import struct


def read_all(model_dir):
    tensors = {}
    for path in sorted(glob.glob(os.path.join(model_dir, "*.safetensors"))):
        with open(path, "rb") as f:
            n = struct.unpack("<Q", f.read(8))[0]
            header = json.loads(f.read(n))
            data = f.read()
        for name, info in header.items():
            if name == "__metadata__":
                continue
            b, e = info["data_offsets"]
            tensors[name] = (info["dtype"], info["shape"], data[b:e])
    return tensors


def write_shard(path, items):
    header, offset, blobs = {"__metadata__": {"format": "pt"}}, 0, []
    for name, (dtype, shape, blob) in items:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(blob)]}
        offset += len(blob)
        blobs.append(blob)
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * ((8 - len(raw) % 8) % 8)  # keep tensor data 8-byte aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)
        for blob in blobs:
            f.write(blob)
    return 8 + len(raw) + offset


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model_dir")
    ap.add_argument("--max-bytes", type=int, default=14_000_000)
    args = ap.parse_args()
    tensors = read_all(args.model_dir)
    shards, cur, size = [], [], 0
    for name in sorted(tensors):
        blob_len = len(tensors[name][2])
        est = blob_len + 200  # header entry
        if cur and size + est > args.max_bytes - 4096:
            shards.append(cur)
            cur, size = [], 0
        cur.append(name)
        size += est
    shards.append(cur)
    for old in glob.glob(os.path.join(args.model_dir, "*.safetensors")):
        os.remove(old)
    weight_map, total = {}, 0
    for i, names in enumerate(shards):
        fname = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        nbytes = write_shard(os.path.join(args.model_dir, fname), [(n, tensors[n]) for n in names])
        assert nbytes <= args.max_bytes, (fname, nbytes)
        weight_map.update({n: fname for n in names})
        total += sum(len(tensors[n][2]) for n in names)
        print(f"{fname}: {len(names)} tensors, {nbytes} bytes")
    with open(os.path.join(args.model_dir, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=1)


if __name__ == "__main__":
    main()
