#!/usr/bin/env bash
# Every CPU measurement behind README's "Compute dtypes", in one run and one dated report: the
# CPU's flags and the dtype `auto` picks, `poolq bench` against sentence-transformers (torch fp32,
# and ONNX Runtime / OpenVINO where their environments exist), nDCG@10 on the Python FAQ per
# dtype, the torch.compile probe, the bf16 attention probe, the bf16 profile, and the precision
# tests (int8's 8-bit activations need VNNI or AMX-INT8; they skip elsewhere, and the report says so).
# Run it alone on the machine: anything else running skews every ratio.
#   bash infra/bench/st_backends_env.sh     # once, for the ONNX Runtime and OpenVINO baselines
#   bash infra/bench/cpu_report.sh          # writes .poolq/reports/cpu-<date>-<host>.md
#   bash infra/bench/cpu_report.sh --quick  # few texts, one round: checks the script, not for quoting
#   bash infra/bench/cpu_report.sh --dry-run  # prints the commands only
set -euo pipefail
cd "$(dirname "$0")/../.."
mode="${1:-full}"
texts=200 rounds=3
if [[ "$mode" == "--quick" ]]; then texts=16 rounds=1; fi
report=".poolq/reports/cpu-$(date -u +%Y-%m-%d)-$(hostname -s 2>/dev/null || echo host).md"

step() {  # step TITLE COMMAND...: run COMMAND, its output in the report under TITLE
  local title="$1"; shift
  if [[ "$mode" == "--dry-run" ]]; then printf '%q ' "$@"; echo; return; fi
  echo "== $title" >&2
  { printf '\n## %s\n\n`%s`\n\n```\n' "$title" "$*"; "$@" 2>&1 || echo "(exit $?)"; printf '```\n'; } >> "$report"
}

if [[ "$mode" != "--dry-run" ]]; then
  mkdir -p "$(dirname "$report")"
  printf '# CPU report, %s\n' "$(date -u '+%Y-%m-%d %H:%M UTC')" > "$report"
fi
step "machine" python3 -c "import os; from poolq.engine.device.hardware import cpu_model, noted_flags, resolve_dtype; \
print(cpu_model(), '|', os.cpu_count(), 'cores | flags:', ' '.join(noted_flags()), '| auto:', resolve_dtype('auto', 'cpu'))"
bench=(-m poolq.api bench --dtypes auto,auto+fused,float32,bfloat16,int8 --texts "$texts" --rounds "$rounds")
step "poolq bench (ST torch)" python3 "${bench[@]}" --baselines torch
for backend in openvino onnx; do
  if [[ -x ".poolq/bench-$backend/bin/python" || "$mode" == "--dry-run" ]]; then
    step "poolq bench (ST $backend)" ".poolq/bench-$backend/bin/python" "${bench[@]}" --baselines "torch,$backend"
  else
    step "poolq bench (ST $backend)" echo "no .poolq/bench-$backend: run infra/bench/st_backends_env.sh first"
  fi
done
step "nDCG@10 on the Python FAQ" python3 infra/bench/faq_retrieval.py --dtypes float32,bfloat16,int8
step "torch.compile probe" python3 infra/bench/compile_probe.py --dtypes float32,bfloat16 --texts "$texts" --rounds "$rounds"
step "bf16 attention: two GEMMs + softmax vs SDPA" python3 infra/bench/attention_probe.py --texts "$texts" --rounds "$rounds"
step "bf16 profile" python3 infra/bench/engine_profile.py --dtypes bfloat16
step "jobs keep engine speed (job vs engine, marginal tokens/s)" python3 infra/bench/job_vs_engine.py --profile --rounds "$rounds"
step "precision tests" python3 -m pytest -q -rs -p no:cacheprovider tests/engine/models
if [[ "$mode" != "--dry-run" ]]; then echo "report: $report" >&2; fi
