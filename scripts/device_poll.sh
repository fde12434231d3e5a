#!/usr/bin/env bash
# The poll half of a background device run (device_run_start.sh hands "poll" here): waits
# up to SECONDS for $W/finished, archiving $W into the call's $OUT as run.tgz every 10 s
# (the device returns a few files only, and a call cut short still returns logs), then
# prints the last LINES lines of $W/log.txt.
#   scripts/device_poll.sh W SECONDS [LINES]
W=$1
for i in $(seq 1 "${2:-500}"); do
  [ -f "$W/finished" ] && break
  [ $((i % 10)) = 0 ] && tar czf "${OUT:-.}/run.tgz" -C "$W" . 2>/dev/null
  sleep 1
done
tar czf "${OUT:-.}/run.tgz" -C "$W" . 2>/dev/null
tail -"${3:-60}" "$W/log.txt" 2>/dev/null
exit 0
