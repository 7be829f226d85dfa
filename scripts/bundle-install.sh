#!/usr/bin/env bash
# install.sh — install an evaluator bundle on an air-gapped host (docs/airgapped.md).
#
#   bash install.sh [--prefix DIR] [--allowed-signers FILE] [--python PYTHON]
#                   [--verify-only] [--no-self-test] [--insecure-allow-unsigned]
#
# In this order, and nothing is created before 1 and 2 pass:
#   1. SHA256SUMS.sig must be a good signature (namespace evaluator-bundle) by a key listed
#      in the allowed-signers file installed on this host beforehand; the log names the key.
#   2. Every file of the bundle must be listed in SHA256SUMS and match its hash; a file that
#      differs, is missing or is not listed is named and the install refused.
#   3. A venv at PREFIX/venv, installed with pip --no-index --require-hashes from wheels/.
#   4. The judges, rubrics, examples and models.yaml (paths -> PREFIX/judges/NAME) copied to
#      PREFIX; every judge checked against its weight list (evaluator models --verify).
#   5. evaluator validate; a GPU bundle (BUNDLE.json engine vllm): torch and vllm import, and
#      evaluator doctor's checks go to the log; then one example case judged by the default
#      judge: status ok.
# Nothing here opens a network connection: pip runs with --no-index and no config files.
#
# Exit status: 0 installed; 2 usage; 3 refused (signature, hashes, python, prefix);
# 4 an install step failed (what was created is removed).
set -euo pipefail
umask 022

NAMESPACE=evaluator-bundle
BUNDLE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PREFIX=/opt/evaluator
ALLOWED_SIGNERS=/etc/evaluator/allowed_signers
PYTHON=python3
VERIFY_ONLY=0
SELF_TEST=1
ALLOW_UNSIGNED=0

usage() { sed -n '2,21p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
    case "$1" in
        --prefix) PREFIX=${2:?--prefix needs a folder}; shift 2 ;;
        --allowed-signers) ALLOWED_SIGNERS=${2:?--allowed-signers needs a file}; shift 2 ;;
        --python) PYTHON=${2:?--python needs a command}; shift 2 ;;
        --verify-only) VERIFY_ONLY=1; shift ;;
        --no-self-test) SELF_TEST=0; shift ;;
        --insecure-allow-unsigned) ALLOW_UNSIGNED=1; shift ;;
        -h|--help) usage; exit 0 ;;
        *) echo "install.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done
case "$PREFIX" in /*) ;; *) PREFIX="$PWD/$PREFIX" ;; esac

LOG=$(mktemp "${TMPDIR:-/tmp}/evaluator-install.XXXXXX.log")
say() { printf '[install] %s\n' "$*" | tee -a "$LOG"; }
refuse() { printf '[install] REFUSED: %s\n' "$*" | tee -a "$LOG" >&2; exit 3; }
say "bundle $BUNDLE -> prefix $PREFIX ($(date -u +%Y-%m-%dT%H:%M:%SZ), user $(id -un))"
cd "$BUNDLE"

# ---------------------------------------------------------------- 1. the signature
unsigned() {  # why: refuse, or (with --insecure-allow-unsigned) warn and go on
    if [ "$ALLOW_UNSIGNED" = 1 ]; then
        say "WARNING: $1"
        say "WARNING: going on WITHOUT A VALID SIGNATURE (--insecure-allow-unsigned): the hashes" \
            "below prove only that the files match SHA256SUMS, not who wrote it"
    else
        refuse "$1 (pass --insecure-allow-unsigned to install anyway)"
    fi
}
[ -f SHA256SUMS ] || refuse "SHA256SUMS is missing from $BUNDLE"
if [ ! -f SHA256SUMS.sig ]; then
    unsigned "the bundle is not signed (no SHA256SUMS.sig)"
elif ! command -v ssh-keygen >/dev/null; then
    unsigned "ssh-keygen (OpenSSH 8.1 or later) is not installed: cannot check the signature"
elif [ ! -f "$ALLOWED_SIGNERS" ]; then
    unsigned "no allowed-signers file at $ALLOWED_SIGNERS (install the site's public key" \
             "there first, or pass --allowed-signers FILE)"
else
    principal=$(ssh-keygen -Y find-principals -f "$ALLOWED_SIGNERS" -s SHA256SUMS.sig \
                2>/dev/null | head -n 1 || true)
    if [ -z "$principal" ]; then
        unsigned "SHA256SUMS.sig was made by a key that is not in $ALLOWED_SIGNERS"
    elif verdict=$(ssh-keygen -Y verify -f "$ALLOWED_SIGNERS" -I "$principal" -n "$NAMESPACE" \
                   -s SHA256SUMS.sig < SHA256SUMS 2>&1); then
        say "signature: $verdict (allowed signers: $ALLOWED_SIGNERS)"
    else
        unsigned "SHA256SUMS does not match its signature by $principal (changed after" \
                 "signing?): $verdict"
    fi
fi

# ---------------------------------------------------------------- 2. every file's hash
# SHA256SUMS lines are "<64 hex>  <relative path>"; anything else (absolute paths, .., odd
# names) is refused before sha256sum reads a single file.
name='[A-Za-z0-9_.][A-Za-z0-9_.+=@,-]*'
bad_line=$(grep -nvE "^[0-9a-f]{64}  $name(/$name)*\$" SHA256SUMS | head -n 1 || true)
[ -z "$bad_line" ] || refuse "SHA256SUMS line ${bad_line%%:*} is not '<sha256>  <relative path>'"
if cut -c67- SHA256SUMS | grep -qE '(^|/)\.{1,2}(/|$)'; then
    refuse "SHA256SUMS names a path with a . or .. part"
fi
odd=$(find . ! -type f ! -type d | head -n 1)
[ -z "$odd" ] || refuse "${odd#./} is not a regular file (links are not allowed in a bundle)"
unlisted=$(LC_ALL=C comm -23 <(find . -type f ! -path ./SHA256SUMS ! -path ./SHA256SUMS.sig \
                      | sed 's|^\./||' | LC_ALL=C sort) \
                    <(cut -c67- SHA256SUMS | LC_ALL=C sort) | head -n 5)
[ -z "$unlisted" ] || refuse "not listed in SHA256SUMS: $(echo "$unlisted" | paste -sd ' ')"
say "checking the SHA-256 of $(wc -l < SHA256SUMS) files ($(du -sh . | cut -f1)) ..."
if ! failed=$(sha256sum --check --strict --quiet SHA256SUMS 2>&1); then
    refuse "hash check failed: $(echo "$failed" | grep -v '^sha256sum: WARNING' | head -n 5 \
            | paste -sd ';')"
fi
say "hashes: all $(wc -l < SHA256SUMS) files match SHA256SUMS"

# ---------------------------------------------------------------- 3. python, prefix
meta() { "$PYTHON" -c 'import json,sys; print(json.load(open("BUNDLE.json"))[sys.argv[1]])' "$1"; }
command -v "$PYTHON" >/dev/null || refuse "$PYTHON not found (pass --python)"
want=$(meta python)
have=$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
[ "$want" = "$have" ] || refuse "the bundle's wheels are for Python $want, $PYTHON is $have"
"$PYTHON" -c 'import venv, ensurepip' 2>/dev/null \
    || refuse "$PYTHON cannot create venvs (Debian/Ubuntu: install python3-venv)"
if [ "$VERIFY_ONLY" = 1 ]; then say "verified (--verify-only): nothing installed"; exit 0; fi
if [ -e "$PREFIX" ] && [ -n "$(ls -A "$PREFIX" 2>/dev/null)" ]; then
    refuse "$PREFIX exists and is not empty (install into a new --prefix, or remove it)"
fi

# ---------------------------------------------------------------- 4. install
created=0
cleanup() {
    status=$?
    if [ $status -ne 0 ] && [ "$created" = 1 ]; then
        tail -n 15 "$LOG" >&2
        say "FAILED (exit $status): removing $PREFIX; the whole log is kept at $LOG"
        rm -rf "$PREFIX"
        exit 4
    fi
}
trap cleanup EXIT
mkdir -p "$PREFIX"
created=1
# pip: no index, no config files, no environment settings, no version check.
for var in $(compgen -e | grep '^PIP_' || true); do unset "$var"; done
export PIP_CONFIG_FILE=/dev/null PIP_NO_INPUT=1 PIP_DISABLE_PIP_VERSION_CHECK=1
say "venv: $PREFIX/venv ($("$PYTHON" --version 2>&1))"
"$PYTHON" -m venv "$PREFIX/venv"
say "pip install --no-index --require-hashes ($(grep -c '^[A-Za-z0-9].*==' requirements.txt)" \
    "packages from wheels/) ..."
"$PREFIX/venv/bin/python" -m pip install --quiet --no-index --find-links "$BUNDLE/wheels" \
    --require-hashes --only-binary=:all: -r requirements.txt >>"$LOG" 2>&1
say "installed $("$PREFIX/venv/bin/python" -m pip list --format=freeze 2>/dev/null | wc -l) packages"

mkdir -p "$PREFIX/bundle"
cp -R judges prompts examples models.yaml "$PREFIX/"
cp BUNDLE.json sbom.cdx.json SHA256SUMS requirements.txt "$PREFIX/bundle/"
[ ! -f SHA256SUMS.sig ] || cp SHA256SUMS.sig "$PREFIX/bundle/"
cat > "$PREFIX/evaluator" <<EOF
#!/bin/sh
# The evaluator installed from a bundle, with this install's models.yaml and rubrics.
EVALUATOR_MODELS_FILE=\${EVALUATOR_MODELS_FILE:-$PREFIX/models.yaml}
EVALUATOR_RUBRICS_DIR=\${EVALUATOR_RUBRICS_DIR:-$PREFIX/prompts}
EVALUATOR_CACHE=\${EVALUATOR_CACHE:-$PREFIX/cache}
export EVALUATOR_MODELS_FILE EVALUATOR_RUBRICS_DIR EVALUATOR_CACHE
exec "$PREFIX/venv/bin/evaluator" "\$@"
EOF
chmod 755 "$PREFIX/evaluator"
EV=("$PREFIX/evaluator")
for judge in judges/*/; do
    judge=$(basename "$judge")
    say "$("${EV[@]}" models --verify "$judge" 2>>"$LOG" | tail -n 1)"
done

# ---------------------------------------------------------------- 5. validate, one case
"${EV[@]}" validate >>"$LOG" 2>&1
say "evaluator validate: all rubrics and models.yaml are valid"
if [ "$(meta engine 2>/dev/null || true)" = vllm ]; then
    # A GPU bundle: vLLM and the CUDA build of torch must import, GPU or not (CUDA is only
    # loaded when a GPU is used), with the offline switches set as the evaluator sets them.
    imported=$(HF_HUB_OFFLINE=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 \
        "$PREFIX/venv/bin/python" -c 'import torch, vllm
print("torch %s (CUDA %s), vllm %s" % (torch.__version__, torch.version.cuda, vllm.__version__))' \
        2>>"$LOG" | tail -n 1) || imported=""
    [ -n "$imported" ] || { say "import torch, vllm failed (see the log)"; exit 1; }
    say "imports: $imported"
    doctor_ok=1
    checks=$("${EV[@]}" doctor 2>&1) || doctor_ok=0
    printf '%s\n' "$checks" >>"$LOG"
    if [ "$doctor_ok" = 1 ]; then
        say "evaluator doctor: no check failed ($(printf '%s\n' "$checks" | tail -n 1);" \
            "the checks are in the log)"
    else
        say "evaluator doctor: some checks failed on this host: run $PREFIX/evaluator" \
            "doctor before the first run (the checks are in the log)"
    fi
fi
if [ "$SELF_TEST" = 1 ]; then
    mkdir -p "$PREFIX/self-test"
    head -n 1 examples/trial_eligibility.jsonl > "$PREFIX/self-test/case.jsonl"
    started=$(date +%s)
    "${EV[@]}" run --rubric trial_eligibility --input "$PREFIX/self-test/case.jsonl" \
        --output "$PREFIX/self-test/results.jsonl" >>"$LOG" 2>&1
    status=$("$PREFIX/venv/bin/python" -c 'import json,sys
print(json.loads(open(sys.argv[1]).readline())["status"])' "$PREFIX/self-test/results.jsonl")
    say "self-test: one trial_eligibility case, default judge: status $status" \
        "($(( $(date +%s) - started )) s)"
    [ "$status" = ok ]
fi
say "done in $SECONDS s: run $PREFIX/evaluator --help (log: $PREFIX/install.log)"
cp "$LOG" "$PREFIX/install.log"
