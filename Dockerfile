# vla-entrypoint image: the vendor VLA base (openpi, PyTorch, OFED) plus the launcher as the default command.
# Build with `docker buildx bake` (see docker-bake.hcl); a TI-ONE job using this image leaves its start
# command empty. Layers go from rarely to often changed; the package layer is last and small.

# The TI-ONE VLA preset image (NGC PyTorch 26.02 + OFED 5.8, openpi in /workspace/openpi, Python 3.12).
ARG BASE_IMAGE=ccr.ccs.tencentyun.com/tione-public-images/ngc-vla:ngc26.02-ofed5.8-hccgc50s-vla-v1.0
# Only for openpi-taco: an image holding the TACO wheel, where named build contexts are unavailable (see below).
ARG TACO_WHEEL_IMAGE=scratch

FROM ${BASE_IMAGE} AS openpi
ARG BASE_IMAGE
ARG VERSION=0.1.0
ARG REVISION=unknown
ARG CREATED=unknown
ARG SOURCE=https://github.com/vla-entrypoint/vla-entrypoint

# tini reaps zombies and forwards signals as PID 1; the NGC bases do not ship it.
RUN command -v tini >/dev/null 2>&1 || { \
      apt-get update && apt-get install -y --no-install-recommends tini && rm -rf /var/lib/apt/lists/*; }

# openpi's transformers patch, once at build time instead of at every job start.
RUN if [ -f /workspace/openpi/install_transformers_replace.sh ]; then \
      cd /workspace/openpi && bash install_transformers_replace.sh && echo "transformers_replace baked into the image"; \
    fi

# Chain through NGC's entrypoint when the base has one, so its entrypoint.d hooks still run; `env` otherwise.
RUN mkdir -p /usr/local/lib/vla-entrypoint \
 && if [ -x /opt/nvidia/nvidia_entrypoint.sh ]; then target=/opt/nvidia/nvidia_entrypoint.sh; else target=/usr/bin/env; fi \
 && ln -sf "$target" /usr/local/lib/vla-entrypoint/base-entrypoint

# py-spy: the stall watchdog reads stuck workers' Python stacks with it, without stopping them. The wheel comes
# from docker/tools (scripts/setup-tools fetches it), else from the package index; without it the watchdog falls
# back to faulthandler dumps.
RUN --mount=type=bind,source=docker/tools,target=/tmp/tools \
    export PIP_BREAK_SYSTEM_PACKAGES=1 PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1; \
    python3 -m pip install -q --no-cache-dir --no-index --find-links /tmp/tools py-spy \
 || python3 -m pip install -q --no-cache-dir --timeout 20 --retries 1 py-spy \
 || echo "py-spy unavailable: stall diagnosis will use faulthandler dumps" >&2

# tensorboardX (with protobuf, when the base lacks it) and nvidia-ml-py: the launcher's TensorBoard event files and GPU
# samples. Wheels from docker/tools (scripts/setup-tools fetches them), else the package index; a requirement the
# base already meets (NGC's numpy, protobuf, pynvml) is kept as it is. Without them the launcher says once that it
# writes no event files, and training is unchanged.
RUN --mount=type=bind,source=docker/tools,target=/tmp/tools \
    export PIP_BREAK_SYSTEM_PACKAGES=1 PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1; \
    python3 -m pip install -q --no-cache-dir --no-index --find-links /tmp/tools tensorboardX nvidia-ml-py \
 || python3 -m pip install -q --no-cache-dir --timeout 20 --retries 1 tensorboardX nvidia-ml-py \
 || echo "tensorboardX unavailable: the launcher will write no TensorBoard event files" >&2

COPY entrypoint/data/job.yaml /etc/vla-entrypoint/job.yaml

# The launcher itself, without dependencies (pyyaml and packaging come with the base, tensorboardX and nvidia-ml-py
# with the layer above; NGC's torch must not be replaced) and without a pip cache. The source is bind-mounted, so no copy of it stays in a layer.
RUN --mount=type=bind,source=.,target=/tmp/vla-src,rw \
    python3 -c "import yaml, packaging" \
 || { echo "vla-entrypoint needs pyyaml and packaging in the base image's python3" >&2; exit 1; }; \
    cd /tmp/vla-src && PIP_BREAK_SYSTEM_PACKAGES=1 PIP_ROOT_USER_ACTION=ignore python3 -m pip install \
      --no-deps --no-cache-dir --no-build-isolation --disable-pip-version-check . \
 && vla-entrypoint --version

LABEL org.opencontainers.image.title="vla-entrypoint" \
      org.opencontainers.image.description="openpi training on TI-ONE with a verified torchrun launch as the default command" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.base.name="${BASE_IMAGE}"

ENTRYPOINT ["tini", "-g", "--", "/usr/local/lib/vla-entrypoint/base-entrypoint", "vla-entrypoint"]
CMD ["run"]

# ---- openpi-taco: the same image with the TACO acceleration wheel baked in (bake target openpi-taco) ----
# The wheel comes from the stage `taco`: bake's openpi-taco target replaces it with the named build context `taco`
# (bake variable TACO_WHEEL_DIR, a folder holding exactly one taco_train-*.whl; needs BuildKit >= 0.10). Builders
# without named contexts (Docker 20.10's built-in BuildKit, used by the stand-in tests) pass TACO_WHEEL_IMAGE, an
# image holding the wheel (bake target taco-wheel-standin); with neither, the stage is empty and the build says so.
FROM ${TACO_WHEEL_IMAGE} AS taco

# entrypoint.taco.bake refuses, with a clear message, a missing wheel or one whose tags this image's python3 cannot
# load (cp312 for the VLA base); otherwise it runs `pip install --no-deps --no-cache-dir --target /opt/taco-train`,
# records the wheel's file name and sha256 in /opt/taco-train/WHEEL.json and prints the layer's size. The wheel is
# bind-mounted, so it never lands in a layer; at start the launcher uses this prefix directly and installs nothing.
FROM openpi AS openpi-taco
RUN --mount=type=bind,from=taco,target=/tmp/taco \
    PIP_ROOT_USER_ACTION=ignore python3 -m entrypoint.taco.bake /tmp/taco /opt/taco-train
