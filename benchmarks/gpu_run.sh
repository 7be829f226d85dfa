#!/usr/bin/env bash
# GPU figures on a lent GPU machine (the `device` tool; issues 18 and 35): a random-weight
# judge of Qwen3-8B's shape (benchmarks/random_judge.py), built there in bf16, judged through
# the transformers backend on CUDA.
#
#   here, once:  make gpu-kit TOKENIZER=DIR [DATA=DIR]   (wheels, Qwen3's tokenizer, the dev
#                                               data into .gpu/; ~20 MB)
#   there:       bash benchmarks/gpu_run.sh all           with carry [".gpu"]
#                (or one stage: tests, constrained, e2e, loop, streaming)
#
# all:         tests, then one build of the judge, then constrained and e2e, sized to end
#              within one 10-minute call on an H100 or H200: BATCHES="16 64", REPEATS=1,
#              E2E_CASES=64 unless set. Expected on the H200 of issue 35: setup ~10 s, tests
#              ~50 s, build ~30 s, constrained ~65 + ~160 s, e2e ~70 + ~70 s: ~7.5 min; an
#              H100 (less memory bandwidth; batch 64 is GPU-bound) perhaps 1.2x that. Each
#              stage's time is printed and written to stages.txt as it ends.
# tests:       pytest tests/test_transformers_cuda.py (tiny-random on CUDA).
# constrained: constrained_vs_unconstrained.py --masking backend-prefetch (masks filled
#              during the forward pass, as the backend does on a GPU; inline fill; no
#              constraint) at each batch size in BATCHES (default "1 16 64"; cases =
#              max(batch, 4)), REPEATS (default 2) repeats.
# e2e:         `evaluator run` (the CLI, as a user runs it) of the dev set's trial cases at
#              each batch size in E2E_BATCHES (default "64 16"), E2E_CASES cases (default:
#              all, 109), then run_throughput.py: cases/s and generated tokens/s over the
#              batches' generation time and over the command's wall time, from the records.
# loop:        batched_vs_loop.py: evaluate() batched against a hand-written per-case loop
#              (CASES=8, BATCH=8, LOOP_CHUNK=4, RETRIES=0 by default: a random judge never
#              writes a verdict that parses unconstrained, so each loop attempt runs the whole
#              token budget, ~1,300 tokens for trial_eligibility; at ~25 ms a token for an 8B
#              model at batch 1 that is ~30 s a case, and one call may run 10 minutes).
# streaming:   streaming.py: the same cases streamed through vLLM's engine vs batches of the
#              same size (issue 27), at each slot count in SLOTS (default "16 64"), CASES
#              (default 128) cases, the random judge's vllm entry; needs vLLM on the host
#              (the lent machines have none).
#
# Runs from a copy of the project in any folder (paths relative to the project; no git).
# Each call builds the judge afresh (a lent machine starts bare; ~16 GB written to /tmp) and
# leaves its logs in $OUT (default /tmp/gpu-run). The cases are .gpu/data's (the shared dev
# data), else examples/. Other settings: PYTHON, SHAPE (qwen3-8b), DEVICE (cuda), TOKENIZER
# (.gpu/tokenizer), RUBRIC (trial_eligibility), NO_WHEELS=1 (use the host's packages), and
# JUDGE=NAME [MODELS=models.yaml]: judge with a judge of a models file instead of building
# one. Check the flow on a CPU first, in seconds:
#   NO_WHEELS=1 PYTHON=.venv/bin/python SHAPE=qwen3-small DEVICE=cpu BATCHES=2 \
#       TOKENIZER=DIR bash benchmarks/gpu_run.sh constrained
#   NO_WHEELS=1 PYTHON=.venv/bin/python JUDGE=tiny-random RUBRIC=drug_monograph_similarity \
#       E2E_BATCHES="2 1" E2E_CASES=2 bash benchmarks/gpu_run.sh e2e
# Counts and timings only: case text is never printed, and the results files stay in a
# temporary folder that is removed at the end. Output is written to $OUT line by line, so a
# call cut off by its time limit still returns what the finished stages measured.
set -euo pipefail
stage=${1:?usage: gpu_run.sh all|tests|constrained|e2e|loop|streaming}
case $stage in
    all|tests|constrained|e2e|loop|streaming) ;;
    *) echo "gpu_run.sh: unknown stage $stage (all, tests, constrained, e2e, loop or" \
            "streaming)" >&2; exit 2 ;;
esac
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/gpu-run}
py=${PYTHON:-python3}
shape=${SHAPE:-qwen3-8b}
device=${DEVICE:-cuda}
tokenizer=${TOKENIZER:-.gpu/tokenizer}
rubric=${RUBRIC:-trial_eligibility}
if [ "$stage" = all ]; then
    : "${BATCHES:=16 64}" "${REPEATS:=1}" "${E2E_CASES:=64}"
fi
mkdir -p "$out"
: > "$out/stages.txt"
started=$SECONDS
failed=()
stage_done() {  # stage_done NAME START: print and keep the stage's time
    echo "stage $1: $((SECONDS - $2)) s (total $((SECONDS - started)) s)" \
        | tee -a "$out/stages.txt"
}
if [ -z "${NO_WHEELS:-}" ]; then
    "$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .gpu/wheels/*.whl
    export PYTHONPATH=/tmp/site
fi
# This copy of the project first, whatever else PYTHONPATH names.
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
export EVALUATOR_CACHE=${EVALUATOR_CACHE:-/tmp/evaluator-cache}
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>/dev/null || true
  nproc
  "$py" -c 'import torch, transformers; print("torch", torch.__version__, "transformers",
transformers.__version__, "cuda", torch.cuda.is_available())'; } | tee "$out/machine.txt"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
stage_done setup "$started"

if [ "$stage" = tests ] || [ "$stage" = all ]; then
    since=$SECONDS
    "$py" -m pytest -q -p no:cacheprovider tests/test_transformers_cuda.py 2>&1 \
        | tee "$out/tests.txt" || failed+=("tests")
    stage_done tests "$since"
    if [ "$stage" = tests ]; then
        [ ${#failed[@]} -eq 0 ] || exit 1
        exit 0
    fi
fi

# The judge: built once for every stage that follows, or named (JUDGE, MODELS).
since=$SECONDS
models=()
if [ -n "${JUDGE:-}" ]; then
    judge=$JUDGE
    if [ -n "${MODELS:-}" ]; then models=(--models "$MODELS"); fi
else
    "$py" benchmarks/random_judge.py --shape "$shape" --tokenizer "$tokenizer" \
        --out "$work/judges" --device "$device" 2>&1 | grep --line-buffered -v "shards" \
        | tee "$out/build.txt"
    judge=random-$shape
    models=(--models "$work/judges/models.yaml")
    stage_done build "$since"
fi
data=()
if compgen -G ".gpu/data/*.jsonl" > /dev/null; then data=(--data .gpu/data); fi

if [ "$stage" = streaming ]; then
    if ! "$py" -c "import vllm" 2>/dev/null; then
        echo "gpu_run.sh: vLLM is not installed on this host: streaming not measured" \
            | tee "$out/streaming.txt"
        exit 0
    fi
    # shellcheck disable=SC2086  # SLOTS is a list of counts: split on purpose
    "$py" benchmarks/streaming.py "${models[@]}" --judge "$judge-vllm" "${data[@]}" \
        --cases "${CASES:-128}" --slots ${SLOTS:-16 64} 2>&1 | tee "$out/streaming.txt"
    exit 0
fi
if [ "$stage" = constrained ] || [ "$stage" = all ]; then
    for batch in ${BATCHES:-1 16 64}; do
        since=$SECONDS
        "$py" benchmarks/constrained_vs_unconstrained.py "${models[@]}" \
            --judge "$judge" --rubric "$rubric" "${data[@]}" \
            --cases $((batch < 4 ? 4 : batch)) --batch-size "$batch" \
            --repeats "${REPEATS:-2}" --threads 0 --masking backend-prefetch 2>&1 \
            | grep --line-buffered -v "Loading weights" \
            | tee "$out/constrained.batch$batch.txt" || failed+=("constrained batch $batch")
        stage_done "constrained batch $batch" "$since"
    done
fi
if [ "$stage" = e2e ] || [ "$stage" = all ]; then
    # The CLI reads --models-file where the scripts read --models.
    cli_models=("${models[@]/#--models/--models-file}")
    input=examples/$rubric.jsonl
    if [ "$rubric" = trial_eligibility ] && [ -f .gpu/data/trial_eligibility_sigir2014.jsonl ]
    then input=.gpu/data/trial_eligibility_sigir2014.jsonl; fi
    for batch in ${E2E_BATCHES:-64 16}; do
        since=$SECONDS
        results=$work/e2e.batch$batch.jsonl
        t0=$(date +%s.%N)
        rc=0
        "$py" -m evaluator run --rubric "$rubric" --input "$input" --output "$results" \
            "${cli_models[@]}" --model "$judge" --batch-size "$batch" \
            ${E2E_CASES:+--limit "$E2E_CASES"} --no-progress > "$out/e2e.batch$batch.log" \
            2>&1 || rc=$?
        wall=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
        { echo "evaluator run --batch-size $batch (${E2E_CASES:-all} cases of $input):" \
               "rc $rc, ${wall} s"
          "$py" benchmarks/run_throughput.py "$results" --wall "$wall" 2>&1; } \
            | tee "$out/e2e.batch$batch.txt" || failed+=("e2e batch $batch")
        # rc 1: some cases have no verdict (the records say why); anything else failed.
        if [ "$rc" -gt 1 ]; then failed+=("e2e batch $batch (rc $rc)"); fi
        stage_done "e2e batch $batch" "$since"
    done
fi
if [ "$stage" = loop ]; then
    "$py" benchmarks/batched_vs_loop.py "${models[@]}" --judge "$judge" \
        --rubric "$rubric" "${data[@]}" --cases "${CASES:-8}" \
        --batch-size "${BATCH:-8}" --loop-chunk "${LOOP_CHUNK:-4}" \
        --retries "${RETRIES:-0}" --threads 0 2>&1 \
        | grep --line-buffered -v "Loading weights" | tee "$out/batched_vs_loop.txt"
fi
if [ ${#failed[@]} -gt 0 ]; then
    printf 'gpu_run.sh: failed: %s\n' "${failed[@]}" | tee -a "$out/stages.txt" >&2
    exit 1
fi
