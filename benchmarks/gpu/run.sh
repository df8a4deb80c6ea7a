#!/usr/bin/env bash
# On the lent GPU machine: install the carried wheels, build a Qwen2-7B-shaped random model,
# run `chatsum bench` on it; the report lands in $OUT. See README "Performance on a GPU".
set -euo pipefail
export PYTHONPATH=/tmp/site:$PWD VLLM_USE_FLASHINFER_SAMPLER=0 HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
if [ ! -d /tmp/site/vllm ]; then
  cat /tmp/payload/part* | tar x -C /tmp
  cat /tmp/payload/extra* | tar x -C /tmp
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site /tmp/wheels/*.whl /tmp/extra/*.whl
fi
SHAPE=${SHAPE:-qwen2-7b}
[ -f /tmp/model-$SHAPE/config.json ] || python3 benchmarks/gpu/make_random_qwen.py /tmp/model-$SHAPE --shape "$SHAPE"
export CHATSUM_MODEL=/tmp/model-$SHAPE CHATSUM_CACHE_DIR=/tmp/chatsum-cache
export CHATSUM_MAX_NUM_SEQS=${MAX_NUM_SEQS:-256} CHATSUM_MAX_INFLIGHT=${MAX_NUM_SEQS:-256} CHATSUM_GPU_MEMORY_UTILIZATION=0.85
python3 -m service.cli bench --conversations "${CONVERSATIONS:-256}" --levels "${LEVELS:-0.5,0.7,1.0}" \
  --duration "${DURATION:-40}" --fast-messages "${FAST:-5000}" --out "$OUT/bench-gpu-$SHAPE.json" "$@"
