#!/usr/bin/env bash
# The test phase's two lanes, side by side (test/run.sh runs this under c8, so every process in
# both lanes reports coverage): the files that boot VMs one at a time, the others two at a time.
# Each lane writes its file times (test/support/file-times-reporter.mjs) to DIR/LANE.times; the
# other lane's TAP goes to stdout as it runs, the VM lane's to DIR/vm.tap, printed once both end.
# Usage: bash test/lanes.sh DIR N VM_FILE... (N of them) OTHER_FILE...
set -uo pipefail
cd "$(dirname "$0")/.."
dir=$1
count=$2
shift 2
vm_files=("${@:1:count}")
other_files=("${@:count+1}")
lane() {
  local name=$1 concurrency=$2 tap=$3
  shift 3
  node --import ./test/support/dist-loader.mjs --test --test-concurrency="$concurrency" \
    --test-reporter=tap --test-reporter-destination="$tap" \
    --test-reporter=./test/support/file-times-reporter.mjs --test-reporter-destination="$dir/$name.times" \
    "$@"
}
vm_status=0
if [ "${#vm_files[@]}" -gt 0 ]; then
  lane vm 1 "$dir/vm.tap" "${vm_files[@]}" &
  vm=$!
fi
other_status=0
lane other 2 stdout "${other_files[@]}" || other_status=$?
if [ "${#vm_files[@]}" -gt 0 ]; then
  wait "$vm" || vm_status=$?
  echo "# the files that boot VMs, one at a time:"
  cat "$dir/vm.tap"
fi
[ "$other_status" -eq 0 ] || exit "$other_status"
exit "$vm_status"
