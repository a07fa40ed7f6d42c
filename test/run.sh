#!/usr/bin/env bash
# The whole suite: its set-up (test/setup.sh), then every test under c8 coverage, with the
# type-check, the lint and the formatting check beside them.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "== set-up ($(date +%T))"; bash test/setup.sh
# Every `slipway` a test starts runs dist/ (bin/slipway.js) instead of compiling its sources
# through tsx at each start, which cost about 2.5 times the CPU in the CLI-heavy tests; dist/ is
# made by tsx's own transform (test/build-dist.ts), so coverage reads as before. The test files
# run from it too (test/support/dist-loader.mjs): about a quarter of a second of CPU less each
# than tsx compiling them at their start.
echo "== build for the tests ($(date +%T))"; node --import tsx test/build-dist.ts
# The type-check, the lint and the formatting check take about 100 s of CPU: run first, they
# kept both cores busy for a minute before any test; beside the tests, at the lowest priority
# (nice 19), they take the CPU the tests leave (the cores were 93-95 % busy) and barely slow
# them. A check that fails says so at once; the run goes on and fails after the tests.
checks="$(mktemp -d)"
check() {
  local name=$1 status=0
  shift
  nice -n 19 "$@" >"$checks/$name" 2>&1 || status=$?
  echo "$status" >"$checks/$name.status"
  [ "$status" -eq 0 ] || echo "== the $name failed ($(date +%T)): the tests go on, the run fails after them"
}
echo "== type-check, lint and formatting check, beside the tests at the lowest priority ($(date +%T))"
{
  check type-check npx tsc --noEmit
  check formatting-check npx prettier --check .
} &
typecheck_and_format=$!
check lint npx eslint . &
lint=$!
# The unit files run in one process, test/unit-group.ts, but for those that say they must not.
mapfile -t files < <(
  {
    find test -name '*.test.ts' ! -path 'test/unit/*'
    grep -l '^// Runs in a process of its own:' test/unit/*.test.ts
  } | sort
)
# Two lanes side by side. The files that boot QEMU VMs (named *-qemu.test.ts) run one at a time:
# a VM under TCG keeps a core busy while its firmware and iPXE poll the network, so two VMs that
# starve each other, and the nodes they wait for, only burn more CPU (three files at a time with
# VMs side by side: the cores 97 % busy but 1,684 s of CPU against 1,424 with two, and no
# faster). Every other file runs two at a time in the other lane. The unit group, about a minute
# of one core's work, follows the VMs: that lane ended some two minutes before the other, and
# node:test runs a lane's files in the order of their names, which put the group last and alone
# in the other (the cores 90 % busy in the rehearsal at d26073e).
vm_files=()
other_files=()
for f in "${files[@]}"; do
  if [[ $f == *-qemu.test.ts ]]; then vm_files+=("$f"); else other_files+=("$f"); fi
done
vm_count=${#vm_files[@]}
vm_files+=(test/unit-group.ts)
echo "== tests ($((${#files[@]} + 1)) files, the unit files grouped in test/unit-group.ts: $vm_count with VMs one at a time, then the unit group; the rest two at a time; $(date +%T))"
# Coverage of src/ and lb/ (child processes included: they and the test processes run dist/,
# mapped back to src/ and lb/ through its source maps); below the floor (the level
# reached when it was set: 93.3 to 93.5 % of lines in its runs) the run fails.
# Beside the TAP output, each file's time is written to a file, and the ten slowest are printed
# after the run, passed or failed, then the failed tests (test/README.md, "Where the time goes").
# The other lane's TAP goes to the output as it runs; the VM lane's follows it.
# The folders counted and the generated ones left out, written once: c8's globs, and the merge
# of the coverage files ahead of c8's report (test/lanes.sh, test/support/coverage-premerge.mjs),
# which keeps only these.
covered_folders=(src lb dist/src dist/lb)
generated_folders=(src/gen dist/src/gen)
coverage_globs=()
for folder in "${covered_folders[@]}"; do coverage_globs+=(--include "$folder/**"); done
for folder in "${generated_folders[@]}"; do coverage_globs+=(--exclude "$folder/**"); done
lanes="$(mktemp -d)"
status=0
cpu_before="$(head -n 1 /proc/stat)"
started=$SECONDS
COVERAGE_PREMERGE_FOLDERS="${covered_folders[*]}" COVERAGE_PREMERGE_GENERATED="${generated_folders[*]}" \
  npx c8 --reporter=text-summary "${coverage_globs[@]}" --check-coverage --lines 93 \
  bash test/lanes.sh "$lanes" "${#vm_files[@]}" "${vm_files[@]}" "${other_files[@]}" || status=$?
# How busy the cores were: whether running more files at once could gain anything. The checks'
# CPU counts as busy too, and apart (/proc/stat's "nice": at the lowest priority).
read -r _ u1 n1 s1 i1 w1 _ <<<"$cpu_before"
read -r _ u2 n2 s2 i2 w2 _ < <(head -n 1 /proc/stat)
busy=$(((u2 + n2 + s2) - (u1 + n1 + s1)))
idle=$(((i2 + w2) - (i1 + w1)))
echo "== tests took $((SECONDS - started)) s; the $(nproc) cores were busy $((100 * busy / (busy + idle + 1))) % of it ($((busy / 100)) s of CPU, $(((n2 - n1) / 100)) s of it the checks')"
echo "== the ten slowest test files ($(date +%T)), seconds of their top-level tests"
cat "$lanes"/*.times | grep '"seconds"' | sort -t: -k3 -rn | head -n 10 || true
# The failed tests last, where a log cut to its end still shows them.
if cat "$lanes"/*.times | grep -q '"failed"'; then
  echo "== the failed tests"
  cat "$lanes"/*.times | grep '"failed"'
fi
rm -rf "$lanes"
wait "$typecheck_and_format" "$lint" || true
echo "== type-check, lint and formatting check ($(date +%T))"
cat "$checks/type-check" "$checks/lint" "$checks/formatting-check"
checks_status=0
for name in type-check lint formatting-check; do
  if [ "$(cat "$checks/$name.status")" != 0 ]; then
    checks_status=1
    case $name in
      formatting-check) echo "formatting differs: run npm run format" ;;
      *) echo "the $name failed" ;;
    esac
  fi
done
rm -rf "$checks"
[ "$status" -eq 0 ] || exit "$status"
[ "$checks_status" -eq 0 ] || exit 1
# The production build (tsc), as operators and the benchmarks run it; then, side by side, since
# each leaves a core mostly idle (the quick forms alone kept the cores 38 % busy): Node 24 LTS,
# running the tests that start real nodes, workers and the balancer again on Node 24 (from this
# build), followed by the performance guard; and every benchmark in its quick form
# (bench/README.md). The guard reads CPU time per write and per action result, which a busy
# machine moves far less than wall time (its budgets leave room: bench/README.md, "The guard").
# `npm run build` but for its type-check, done above: tsc emits the same files with --noCheck
# (compared byte for byte), in 4.4 s instead of 10.5.
echo "== build ($(date +%T))"
{ rm -rf dist && npx tsc -p tsconfig.build.json --noCheck && touch dist/.built; } || {
  echo "the build failed"
  exit 1
}
tail_dir="$(mktemp -d)"
echo "== Node 24 then the performance guard, beside the benchmarks' quick forms ($(date +%T)); Node 24's and the guard's output follow the benchmarks'"
{
  node24_status=0
  bash test/node24.sh >"$tail_dir/node24" 2>&1 || node24_status=$?
  # The guard: CPU per committed write and per action result against the budgets in
  # bench/budgets.json; fails when one is more than 30 % over.
  echo "== performance guard ($(date +%T))" >"$tail_dir/guard"
  guard_status=0
  npm run -s bench -- guard >>"$tail_dir/guard" 2>&1 || guard_status=$?
  echo "$node24_status $guard_status" >"$tail_dir/statuses"
} &
node24_and_guard=$!
quick_status=0
npm run -s bench -- quick || quick_status=$?
wait "$node24_and_guard" || true
echo "== Node 24 ($(date +%T))"
cat "$tail_dir/node24"
cat "$tail_dir/guard"
read -r node24_status guard_status <"$tail_dir/statuses" || {
  echo "Node 24 and the guard did not report how they ended"
  exit 1
}
rm -rf "$tail_dir"
[ "$node24_status" -eq 0 ] || { echo "the tests on Node 24 failed"; exit "$node24_status"; }
[ "$quick_status" -eq 0 ] || { echo "a benchmark's quick form failed"; exit "$quick_status"; }
[ "$guard_status" -eq 0 ] || { echo "the performance guard failed"; exit "$guard_status"; }
echo "== done ($(date +%T))"
