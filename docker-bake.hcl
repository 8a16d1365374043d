# Build matrix for the vla-entrypoint image (buildx 0.13+). Build with `scripts/build-image [target]`, which fills the
# provenance labels from git and runs `docker buildx bake` (target openpi by default).
# Stand-in targets are for tests and the demo only. Pushes with attestations and registry cache use the
# `*-push` targets, never local or test builds. `docker buildx bake --print` resolves without a daemon.

variable "REGISTRY" {
  default = "ccr.ccs.tencentyun.com"  # TCR personal edition; enterprise: <instance>.tencentcloudcr.com
}
variable "NAMESPACE" {
  default = "vla"
}
variable "IMAGE" {
  default = "vla-openpi"
}
variable "TAG" {
  default = "dev"  # scripts/build-image sets it from `git describe --tags --always --dirty`
}
variable "REVISION" {
  default = "unknown"  # scripts/build-image sets it from `git rev-parse HEAD` (+ -dirty)
}
variable "CREATED" {
  default = "unknown"  # scripts/build-image sets it from the commit time
}
variable "VERSION" {
  default = "0.1.0"
}
variable "BASE_IMAGE" {
  default = "ccr.ccs.tencentyun.com/tione-public-images/ngc-vla:ngc26.02-ofed5.8-hccgc50s-vla-v1.0"
}
variable "STANDIN_BASE" {
  default = "vla-entrypoint/standin-base:latest"
}
variable "TACO_WHEEL_DIR" {
  default = "./taco-wheel"  # a folder holding exactly one taco_train-*.whl, for the openpi-taco targets
}
variable "STANDIN_ROOTFS" {
  default = ""  # set by scripts/build-standin-base to the imported Debian rootfs
}

# Filled by docker/metadata-action in CI (tags, labels); every published target inherits it.
target "docker-metadata-action" {}

target "_common" {
  inherits   = ["docker-metadata-action"]
  context    = "."
  dockerfile = "Dockerfile"
  args = {
    BASE_IMAGE = BASE_IMAGE
    VERSION    = VERSION
    REVISION   = REVISION
    CREATED    = CREATED
  }
}

group "default" {
  targets = ["openpi"]
}

target "openpi" {
  inherits = ["_common"]
  target   = "openpi"
  tags     = ["${REGISTRY}/${NAMESPACE}/${IMAGE}:${TAG}"]
}

target "openpi-push" {
  inherits   = ["openpi"]
  platforms  = ["linux/amd64"]
  attest     = ["type=provenance,mode=max", "type=sbom"]
  cache-from = ["type=registry,ref=${REGISTRY}/${NAMESPACE}/${IMAGE}:buildcache"]
  cache-to   = ["type=registry,ref=${REGISTRY}/${NAMESPACE}/${IMAGE}:buildcache,mode=max"]
  output     = ["type=registry"]
}

# openpi plus the TACO wheel from TACO_WHEEL_DIR, installed at build time (the job then installs nothing at start).
# The named context replaces the Dockerfile's `taco` stage; it needs BuildKit >= 0.10 (Docker >= 23 or a
# docker-container builder).
target "openpi-taco" {
  inherits = ["openpi"]
  target   = "openpi-taco"
  contexts = { taco = TACO_WHEEL_DIR }
  tags     = ["${REGISTRY}/${NAMESPACE}/${IMAGE}:${TAG}-taco"]
}

# ---- stand-ins: tests and the demo only ----
target "standin-base" {
  context = "tests/standin"
  args    = { ROOTFS_IMAGE = STANDIN_ROOTFS }
  tags    = ["${STANDIN_BASE}"]
  output  = ["type=docker"]
}

target "openpi-standin" {
  inherits = ["_common"]
  target   = "openpi"
  args     = { BASE_IMAGE = STANDIN_BASE }
  tags     = ["vla-entrypoint/openpi-standin:test"]
  output   = ["type=docker"]
}

# Docker 20.10's built-in BuildKit (0.8) has no named contexts, so the stand-in takes the wheel from a local image:
# `docker buildx bake taco-wheel-standin` (TACO_WHEEL_DIR -> an image holding the folder), then openpi-taco-standin.
target "taco-wheel-standin" {
  context           = TACO_WHEEL_DIR
  dockerfile-inline = "FROM scratch\nCOPY . /\n"
  tags              = ["vla-entrypoint/taco-wheel-standin:test"]
  output            = ["type=docker"]
}

target "openpi-taco-standin" {
  inherits = ["openpi-standin"]
  target   = "openpi-taco"
  args     = { TACO_WHEEL_IMAGE = "vla-entrypoint/taco-wheel-standin:test" }
  tags     = ["vla-entrypoint/openpi-taco-standin:test"]
  output   = ["type=docker"]
}
