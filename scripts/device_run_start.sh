# Sourced first by every background device run (device_*_run.sh, device_env_ab.sh,
# device_token_profile.sh), after it sets W (its state and log directory):
#   W=${W:-/tmp/x_run}
#   . "$(dirname "$0")/device_run_start.sh" LINES "$@"
# With "poll SECONDS" the script becomes scripts/device_poll.sh (wait for $W/finished,
# then print the log's last LINES lines). Otherwise: set -u, everything after goes to
# $W/log.txt, the carried libraries are set up (device_env.sh), and log() prints a
# timestamped step.
_lines=$1
shift
[ "${1:-}" = poll ] && exec bash "$(dirname "$0")/device_poll.sh" "$W" "${2:-500}" "$_lines"
set -u
mkdir -p "$W"
exec >> "$W/log.txt" 2>&1
. scripts/device_env.sh
log() { echo "=== $* ($(date +%T))"; }
