# Sourced by the shell tests that run tern under mpirun (after `TERN=...`): CMake passes mpirun as TERN_MPIEXEC
# when the build has MPI; without it the test exits 77, which CTest reports as skipped. Sets MPI (the mpirun
# command as an array), sources lib.sh, and points Open MPI's session directories at a private TMPDIR: a stale
# or concurrent session's directory once failed a launch ("File exists") under load.
if [ -z "${TERN_MPIEXEC:-}" ]; then
    echo "skipped: this build has no MPI (install libopenmpi-dev and openmpi-bin, scripts/install-deps.sh)"
    exit 77
fi
# timeout: a launch that hangs (mpirun once stayed after both of its processes had exited, its test waiting 43 minutes)
# fails its test after 10 minutes instead of holding the suite
MPI=(timeout -k 10 600 "$TERN_MPIEXEC" --allow-run-as-root --oversubscribe)
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
mkdir -p "$tmp/ompi" && export TMPDIR="$tmp/ompi"
