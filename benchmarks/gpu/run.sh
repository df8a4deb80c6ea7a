#!/usr/bin/env bash
# On the lent GPU machine: install the carried wheels, build a Qwen2-7B-shaped random model,
# run `chatsum bench` on it; the report lands in $OUT. See README "Performance on a GPU".
set -euo pipefail
source benchmarks/gpu/env.sh
python3 -m service.cli bench --conversations "${CONVERSATIONS:-256}" --levels "${LEVELS:-0.5,0.7,1.0}" \
  --duration "${DURATION:-40}" --fast-messages "${FAST:-5000}" --out "$OUT/bench-gpu-$SHAPE.json" "$@"
