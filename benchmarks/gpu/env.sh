# Sourced by run.sh and for stream_modes.py, on the lent GPU machine: installs the carried
# wheels into /tmp/site (once per machine), builds the random model of $SHAPE (once) and
# exports the settings every GPU run shares.
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
