#!/usr/bin/env bash
# Environments for `poolq bench`'s optional baselines, sentence-transformers on ONNX Runtime and
# on OpenVINO, kept apart from the product's: optimum pins transformers 4.x (so sentence-transformers
# 5.x there), optimum-intel also brings torchvision. Both reuse this machine's torch 2.13.0 and
# poolq's editable install (--system-site-packages); nothing in the main environment changes.
#   bash infra/bench/st_backends_env.sh            # makes .poolq/bench-onnx and .poolq/bench-openvino
#   .poolq/bench-onnx/bin/python -m poolq.api bench --baselines torch,onnx
#   .poolq/bench-openvino/bin/python -m poolq.api bench --baselines torch,openvino
set -euo pipefail
cd "$(dirname "$0")/../.."
common=("torch==2.13.0" "transformers==4.57.6" "sentence-transformers>=5,<6")
python3 -m venv --system-site-packages .poolq/bench-onnx
.poolq/bench-onnx/bin/pip install -q "optimum[onnxruntime]" "${common[@]}"
python3 -m venv --system-site-packages .poolq/bench-openvino
.poolq/bench-openvino/bin/pip install -q "optimum-intel" "openvino" "${common[@]}"
# PyPI's torchvision (pulled in by optimum-intel) fails to import beside this torch build
# ("operator torchvision::nms does not exist") and breaks transformers' imports; nothing here needs it.
.poolq/bench-openvino/bin/pip uninstall -y -q torchvision
