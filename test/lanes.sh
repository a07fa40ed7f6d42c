#!/usr/bin/env bash
# The test phase's two lanes, side by side (test/run.sh runs this under c8, so every process in
# both lanes reports coverage): the files that boot VMs one at a time, the others two at a time.
# Each lane writes its file times (test/support/file-times-reporter.mjs) to DIR/LANE.times; the
# other lane's TAP goes to stdout as it runs, the VM lane's to DIR/vm.tap, printed once both end.
# Then, under c8, the coverage files are merged ahead of c8's report.
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
# Under c8 (NODE_V8_COVERAGE set), the coverage files merged two ways side by side before c8's
# report reads them (test/support/coverage-premerge.mjs says why); the merge itself uncovered. It
# keeps the folders test/run.sh names for c8 (COVERAGE_PREMERGE_FOLDERS and _GENERATED).
if [ -n "${NODE_V8_COVERAGE:-}" ]; then
  merge_status=0
  env -u NODE_V8_COVERAGE node test/support/coverage-premerge.mjs "$NODE_V8_COVERAGE" 0 2 &
  first=$!
  env -u NODE_V8_COVERAGE node test/support/coverage-premerge.mjs "$NODE_V8_COVERAGE" 1 2 || merge_status=$?
  wait "$first" || merge_status=$?
  [ "$merge_status" -eq 0 ] || echo "the coverage files' merge failed (exit $merge_status): c8 reads what is left"
fi
[ "$other_status" -eq 0 ] || exit "$other_status"
exit "$vm_status"
