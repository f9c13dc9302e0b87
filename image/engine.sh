#!/usr/bin/env bash
# Which container engine this machine has, and what it needs to run a container. image/build.sh
# sources it; the image tests (tests/e2e/image/) run it, so both decide alike.
#
#   image/engine.sh          engine <command and global flags>
#   image/engine.sh IMAGE    the same, then: run <the flags `run` needs here>
#
# The engine is podman where `podman info` answers, else docker where `docker info` does
# (JOBWARDEN_CONTAINER_ENGINE=podman|docker chooses). What `run` needs is found by trying
# IMAGE's `--version` with no network, not assumed: first as the engine runs it by default;
# then with resource limits the runtime may set (podman asks for 1048576 open files and
# processes, which a runtime whose own hard limits are lower cannot grant: starting from this
# shell's hard limits, a limit the runtime refuses is lowered to the next power of two); then
# the same on runc, where podman's default runtime is another (a crun the machine refuses).

# Sets `engine` (an array: the command), or says why there is none.
engine_detect() {
  local candidates=(podman docker) c
  if [ -n "${JOBWARDEN_CONTAINER_ENGINE:-}" ]; then
    candidates=("$JOBWARDEN_CONTAINER_ENGINE")
  fi
  for c in "${candidates[@]}"; do
    if command -v "$c" >/dev/null 2>&1 && "$c" info >/dev/null 2>&1; then
      engine=("$c")
      return 0
    fi
  done
  echo "no usable container engine (tried: ${candidates[*]}): install podman (Debian: apt-get install podman runc) or start Docker" >&2
  return 1
}

# The largest power of two below $1, not under 1024; fails below that.
lower_limit() {
  local n=1024
  [ "$1" -gt 1024 ] || return 1
  while [ $((n * 2)) -lt "$1" ]; do n=$((n * 2)); done
  echo "$n"
}

# Sets `engine` (with its global flags) and `run_flags` (arrays) to the first way that runs
# IMAGE's --version here, or says why none does.
engine_probe() {
  local image=$1 out runtime nofile nproc
  engine_detect || return 1
  local base=("${engine[@]}") runtimes=("")
  if [ "${base[0]}" = podman ] && command -v runc >/dev/null 2>&1 &&
    [ "$(podman info --format '{{.Host.OCIRuntime.Name}}' 2>/dev/null)" != runc ]; then
    runtimes+=(--runtime=runc)
  fi
  for runtime in "${runtimes[@]}"; do
    engine=("${base[@]}" ${runtime:+"$runtime"})
    run_flags=()
    if out=$("${engine[@]}" run --rm --network=none "$image" --version 2>&1); then
      return 0
    fi
    nofile=$(ulimit -Hn) nproc=$(ulimit -Hu)
    [ "$nofile" != unlimited ] || nofile=1048576
    [ "$nproc" != unlimited ] || nproc=1048576
    for _ in 1 2 3 4 5 6 7 8 9 10 11 12; do
      run_flags=("--ulimit=nofile=$nofile:$nofile" "--ulimit=nproc=$nproc:$nproc")
      if out=$("${engine[@]}" run --rm --network=none "${run_flags[@]}" "$image" --version 2>&1); then
        return 0
      fi
      # runc names the limit by number (RLIMIT_NPROC is 6, RLIMIT_NOFILE 7), crun by name.
      case $out in
        *"rlimit type 7"* | *RLIMIT_NOFILE*) nofile=$(lower_limit "$nofile") || break ;;
        *"rlimit type 6"* | *RLIMIT_NPROC*) nproc=$(lower_limit "$nproc") || break ;;
        *) break ;;
      esac
    done
  done
  echo "cannot run $image --version with ${base[*]} (tried its default runtime and limits, lower limits${runtimes[1]:+, and runc}): $out" >&2
  return 1
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -euo pipefail
  if [ $# -eq 0 ]; then
    engine_detect
    echo "engine ${engine[*]}"
  else
    engine_probe "$1"
    echo "engine ${engine[*]}"
    echo "run ${run_flags[*]}"
  fi
fi
