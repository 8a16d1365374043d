# Sourced by /opt/nvidia/nvidia_entrypoint.sh (stand-in for NGC's banner hook). Tests look for both effects.
echo "== NGC-style entrypoint hook ran ==" >&2
export NVIDIA_ENTRYPOINT_HOOK=ran
