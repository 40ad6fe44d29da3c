#!/bin/sh
# tests/layers.sh - arrows point one way inside device/: check that no file of
# a room includes a header of a room above it. One line per room: the room,
# then the rooms its files may include (itself first). The rooms, bottom up:
#   link    what both sides of the NVMe link share: the command set, the
#           backend interface, queue pairs, counters, options, messages
#   format  values and encodings both sides read: SQLite's value rules,
#           vectors, checksums, chunks, the program format and its verifier
#   engine  the program executor, the program types and slots it runs in, SLM
#   emu     the emulated device, its media and faults   (a backend)
#   nvme    a real NVMe namespace through passthrough    (a backend)
#   tcp     the NVMe/TCP transport both ends share: PDUs, digests, data lengths
#   target  csq-target: the emulated device served over NVMe/TCP
#   initiator  the nvme-tcp backend: a device reached over NVMe/TCP (a backend)
#   driver  the host driver: devices, queues, commands, timeouts
#   store   the on-media store: catalog, superblocks, space, transactions
#   host    the host half of pushdown: device scans and the partial merge
# Nothing in device/ includes vtab/, planner/ or ext/ (the layers above it).
# Prints one line, PASS or FAIL (with the offending includes); exit 0 or 1.
# Run from the repository root.
rules='
link    link
format  format
engine  engine format link
emu     emu engine format link
nvme    nvme tcp engine format link
tcp     tcp format link
target  target tcp emu engine format link
initiator initiator tcp format link
driver  driver link
store   store driver format link
host    host store driver engine format link
'
bad=$(echo "$rules" | while read -r room allowed; do
  [ -n "$room" ] || continue
  [ -d "device/$room" ] || { echo "device/$room: no such room"; continue; }
  grep -Hn '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' device/"$room"/*.[ch] |
  while IFS= read -r line; do
    inc=$(echo "$line" | sed -E 's/.*#[[:space:]]*include[[:space:]]*"([^"]*)".*/\1/')
    case "$inc" in
    device/*/*)
      to=$(echo "$inc" | cut -d/ -f2)
      case " $allowed " in *" $to "*) ;; *) echo "$line  ($room may not include $to)" ;; esac ;;
    vtab/* | planner/* | ext/* | csq.h) echo "$line  (device/ may not include the layers above it)" ;;
    *) echo "$line  (include from the repository root: \"device/<room>/...\")" ;;
    esac
  done
done
# a file directly in device/ or in a room the rules do not name
for f in device/*.[ch] device/*/*.[ch]; do
  [ -e "$f" ] || continue
  room=$(echo "$f" | cut -d/ -f2)
  case "$f" in device/*/*) ;; *) echo "$f: outside every room"; continue ;; esac
  echo "$rules" | grep -q "^$room " || echo "$f: room $room has no rule in tests/layers.sh"
done)
if [ -z "$bad" ]; then
  echo "PASS layers: no device/ file includes a higher room"
  exit 0
fi
echo "FAIL layers"
echo "$bad" | sed 's/^/    /'
exit 1
