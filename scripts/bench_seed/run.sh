#!/usr/bin/env bash
# The seed's code/run.sh (the TI-ONE job's start command), reproduced for scripts/bench (not used by the image),
# with the seed appendix's taco-train snippet where the appendix puts it: before train_pytorch.sh. Only changes:
# the seed's "–" is "--", and "#@mark NAME" comment lines, which do nothing here (see train_pytorch.sh).
# scripts/bench points TACO_WHL at a wheel served from this machine, never at the object storage.
# TI-ONE 任务式建模入口:环境准备 -> 资产校验 -> DDP 训练
set -euo pipefail
#@mark run.sh
ASSETS=/home/tione/notebook/embodied-ai/openpi-assets
cd /workspace/openpi
# 1. 环境准备:patch 作用于容器内 Python 环境,每次任务都需执行
bash install_transformers_replace.sh
#@mark patched
# 2. 资产校验:缺失时立即失败,避免训练启动后才报错
NORM_STATS=/workspace/openpi/assets/pi05_libero/physical-intelligence/libero/norm_stats.json
[ -f "$NORM_STATS" ] || { echo "[error] 未找到 $NORM_STATS,请检查步骤二物料与存储挂载配置"; exit 1; }
[ -d "$ASSETS/checkpoints/pi05_base_pytorch" ] \
|| { echo "[error] 未找到 $ASSETS/checkpoints/pi05_base_pytorch,请检查步骤二物料与存储挂载配置"; exit 1; }
#@mark checked
# ===== taco-train 加速接入 =====
TACO_WHL="https://taco-train-data-1251001002.cos.ap-shanghai.myqcloud.com/taco-train/taco_train-0.1.0%2Bnv-cp312-cp312-linux_x86_64.whl"
TACO_SP=/tmp/taco_train/site-packages
mkdir -p "$TACO_SP"
pip install -q --target "$TACO_SP" "$TACO_WHL"
export PYTHONPATH=$TACO_SP:$TACO_SP/taco_train/prelude:$PYTHONPATH
export TACO_TRAIN_FEATURES=openpi_skip_outer_checkpoint,openpi_compile,tf32
export TACO_TRAIN_REPORT=1
echo "[taco] prelude=$TACO_SP/taco_train/prelude"
#@mark wheel-installed
# 3. 启动训练(分布式参数由 TI-ONE 注入)
cd /workspace/openpi/code
NPROC_PER_NODE=$GPU_NUM_PER_NODE NNODES=$WORLD_SIZE NODE_RANK=$RANK bash train_pytorch.sh
