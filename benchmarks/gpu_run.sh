#!/usr/bin/env bash
# Issue 18's GPU figures on a lent GPU machine (the `device` tool): a random-weight judge of
# Qwen3-8B's shape (benchmarks/random_judge.py), built there in bf16, judged through the
# transformers backend on CUDA.
#
#   here, once:  make gpu-kit TOKENIZER=DIR     (wheels, Qwen3's tokenizer, the dev data
#                                               into .gpu/)
#   there:       bash benchmarks/gpu_run.sh constrained   with carry [".gpu"]
#                bash benchmarks/gpu_run.sh loop          with carry [".gpu"]
#                (or `all`: both after one build, if one call's 10 minutes allow it)
#                bash benchmarks/gpu_run.sh streaming     with carry [".gpu"]; needs vLLM on
#                                               the host (the lent machines have none)
#
# constrained: constrained_vs_unconstrained.py --masking backend-prefetch (masks filled during
#              the forward pass, as the backend does on a GPU; inline fill; no constraint) at
#              each batch size in BATCHES (default "1 16 64"; cases = max(batch, 4)).
# loop:        batched_vs_loop.py: evaluate() batched against a hand-written per-case loop
#              (CASES=8, BATCH=8, LOOP_CHUNK=4, RETRIES=0 by default: a random judge never
#              writes a verdict that parses unconstrained, so each loop attempt runs the whole
#              token budget, ~1,300 tokens for trial_eligibility; at ~25 ms a token for an 8B
#              model at batch 1 that is ~30 s a case, and one call may run 10 minutes).
# streaming:   streaming.py: the same cases streamed through vLLM's engine vs batches of the
#              same size (issue 27), at each slot count in SLOTS (default "16 64"), CASES
#              (default 128) cases, the random judge's vllm entry.
# Each call builds the judge afresh (a lent machine starts bare; ~16 GB written to /tmp) and
# leaves its logs in $OUT. The cases are .gpu/data's (the shared dev data), else examples/. Check the flow on a CPU first, in seconds:
#   NO_WHEELS=1 PYTHON=.venv/bin/python SHAPE=qwen3-small DEVICE=cpu BATCHES=2 \
#       TOKENIZER=DIR bash benchmarks/gpu_run.sh constrained
# Counts and timings only: case text is never printed.
set -euo pipefail
stage=${1:?usage: gpu_run.sh constrained|loop|all|streaming}
case $stage in
    constrained|loop|all|streaming) ;;
    *) echo "gpu_run.sh: unknown stage $stage (constrained, loop, all or streaming)" >&2; exit 2 ;;
esac
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/gpu-run}
py=${PYTHON:-python3}
shape=${SHAPE:-qwen3-8b}
device=${DEVICE:-cuda}
tokenizer=${TOKENIZER:-.gpu/tokenizer}
mkdir -p "$out"
if [ -z "${NO_WHEELS:-}" ]; then
    "$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .gpu/wheels/*.whl
    export PYTHONPATH=/tmp/site
fi
export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
export EVALUATOR_CACHE=${EVALUATOR_CACHE:-/tmp/evaluator-cache}
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>/dev/null || true
  "$py" -c 'import torch, transformers; print("torch", torch.__version__, "transformers",
transformers.__version__, "cuda", torch.cuda.is_available())'; } | tee "$out/machine.txt"
judges=$(mktemp -d)
trap 'rm -rf "$judges"' EXIT
"$py" benchmarks/random_judge.py --shape "$shape" --tokenizer "$tokenizer" --out "$judges" \
    --device "$device" 2>&1 | grep -v "shards" | tee "$out/build.txt"
models=$judges/models.yaml
judge=random-$shape
data=()
if compgen -G ".gpu/data/*.jsonl" > /dev/null; then data=(--data .gpu/data); fi
if [ "$stage" = streaming ]; then
    if ! "$py" -c "import vllm" 2>/dev/null; then
        echo "gpu_run.sh: vLLM is not installed on this host: streaming not measured" \
            | tee "$out/streaming.txt"
        exit 0
    fi
    "$py" benchmarks/streaming.py --models "$models" --judge "$judge-vllm" "${data[@]}" \
        --cases "${CASES:-128}" --slots ${SLOTS:-16 64} 2>&1 | tee "$out/streaming.txt"
    exit 0
fi
if [ "$stage" != loop ]; then
    for batch in ${BATCHES:-1 16 64}; do
        "$py" benchmarks/constrained_vs_unconstrained.py --models "$models" \
            --judge "$judge" --rubric "${RUBRIC:-trial_eligibility}" "${data[@]}" \
            --cases $((batch < 4 ? 4 : batch)) --batch-size "$batch" \
            --repeats "${REPEATS:-2}" --threads 0 --masking backend-prefetch 2>&1 \
            | grep -v "Loading weights" | tee "$out/constrained.batch$batch.txt"
    done
fi
if [ "$stage" != constrained ]; then
    "$py" benchmarks/batched_vs_loop.py --models "$models" --judge "$judge" \
        --rubric "${RUBRIC:-trial_eligibility}" "${data[@]}" --cases "${CASES:-8}" \
        --batch-size "${BATCH:-8}" --loop-chunk "${LOOP_CHUNK:-4}" \
        --retries "${RETRIES:-0}" --threads 0 2>&1 \
        | grep -v "Loading weights" | tee "$out/batched_vs_loop.txt"
fi
