#!/usr/bin/env bash
# One call on the GPU machine: model fixtures, then kite-tiny training and its verification
# with transformers. Expects the training corpus at .carry/corpus/train.txt.xz (made here by
# extract_corpus.py; too large to commit) and the committed held-out text.
# Everything to bring back goes under $OUT (at most 8 files of 16 MiB).
set -u
export PYTHONUNBUFFERED=1
mkdir -p /tmp/corpus /tmp/fixtures
xz -dc .carry/corpus/train.txt.xz > /tmp/corpus/train.txt
cp models/kite-tiny/heldout.txt /tmp/corpus/heldout.txt

if [ "${SKIP_FIXTURES:-0}" != 1 ]; then
  python3 tools/fixtures/make_model_fixtures.py --out /tmp/fixtures/models > "$OUT/fixtures.log" 2>&1
  echo "fixtures rc=$?"; tail -5 "$OUT/fixtures.log"
  tar czf "$OUT/model_fixtures.tar.gz" -C /tmp/fixtures models
fi

python3 tools/train/train_kite_tiny.py --corpus /tmp/corpus --out /tmp/kite-tiny \
  --seconds "${TRAIN_SECONDS:-300}" --dropout "${TRAIN_DROPOUT:-0.1}" > "$OUT/train.log" 2>&1
echo "train rc=$?"; grep -E "ms/step|held-out|done|params|tokenizer|shipping" "$OUT/train.log" | tail -15

python3 tools/train/verify_with_transformers.py --model /tmp/kite-tiny \
  --heldout /tmp/corpus/heldout.txt --fixtures /tmp/kite_tiny_fixtures > "$OUT/verify.log" 2>&1
echo "verify rc=$?"; tail -15 "$OUT/verify.log"

cp /tmp/kite-tiny/model-*.safetensors "$OUT/" 2>/dev/null
tar czf "$OUT/kite_tiny_meta.tar.gz" -C /tmp --exclude='model-*.safetensors' kite-tiny kite_tiny_fixtures
ls -la "$OUT"
