#!/usr/bin/env bash
# The seed's code/train_pytorch.sh, reproduced for scripts/bench (not used by the image). Only changes: the
# seed's "–" (a typographic dash from the page) is "--", and "#@mark NAME" comment lines, which do nothing
# here; scripts/bench turns them into timestamps in an instrumented copy used only for the timeline plot.
set -euo pipefail
#@mark train_pytorch.sh
export JAX_PLATFORMS=cpu
# 数据集已预置到 CFS;lerobot 仍会查询 hub refs,放行镜像访问避免卡住
export HF_ENDPOINT=https://hf-mirror.com
unset HF_HUB_OFFLINE 2>/dev/null || true
export HF_LEROBOT_HOME=/home/tione/notebook/embodied-ai/openpi-assets/datasets
export TRANSFORMERS_OFFLINE=1
export NCCL_DEBUG=WARN
export NCCL_MIN_CTAS=1
export NCCL_NSOCKS_PERTHREAD=2
export NCCL_SOCKET_NTHREADS=2
export NCCL_P2P_DISABLE=0
export NCCL_SHM_DISABLE=0
export CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
export OMP_NUM_THREADS=1
export MY_CHECKPOINTS_PATH=/home/tione/notebook/embodied-ai/openpi-assets/checkpoints
export NPROC_PER_NODE=${NPROC_PER_NODE:-$(nvidia-smi -L | grep -c '^GPU')}
export NNODES=${NNODES:-1} NODE_RANK=${NODE_RANK:-0}
export MASTER_ADDR=${MASTER_ADDR:-127.0.0.1} MASTER_PORT=${MASTER_PORT:-29571}
cd /workspace/openpi
mkdir -p ./logs
#@mark exported
set -ex
exp_name=pi05_libero_pytorch
torchrun \
  --nnodes=$NNODES \
  --nproc_per_node=$NPROC_PER_NODE \
  --node_rank=$NODE_RANK \
  --master_addr=$MASTER_ADDR \
  --master_port=$MASTER_PORT \
  scripts/train_pytorch.py pi05_libero \
  --exp-name $exp_name \
  --pytorch-weight-path $MY_CHECKPOINTS_PATH/pi05_base_pytorch \
  --pytorch-training-precision bfloat16 \
  --batch-size 256 \
  --num-train-steps 50 \
  --log-interval 10 \
  --save-interval 25 \
  --no-wandb-enabled \
  2>&1 | tee "./logs/${exp_name}-node${NODE_RANK}-$(date +"%Y%m%d-%H%M%S").log"
