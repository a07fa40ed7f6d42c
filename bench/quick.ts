// `npm run bench -- quick [--only a,b] [--skip a,b]`: every benchmark in its smallest form, one
// after another (raft and cli, which mostly wait, beside them), so that a change elsewhere cannot
// silently break one (CI runs it, test/run.sh).
// Each must finish within its time bound, exit 0 and pass its own checks: not its figures
// (a loaded CI machine moves those), but that it did what it measures: every write and read
// answered, every failover recovered, every download verified, every workflow succeeded and no
// action ran twice, no normal call failed under the flood. The figures are printed anyway.
// One JSON line per benchmark (name, seconds, pass, why not), then a summary; exit 1 when any
// failed. The list, with each one's time, is in bench/README.md ("Quick forms in CI").
import { spawn, spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { repoRoot } from './clusters.js';
import { round } from './stats.js';

export type Line = Record<string, unknown>;

interface QuickBench {
  readonly name: string;
  readonly args: readonly string[];
  /** Commands it needs on PATH (Debian packages, .ci/run installs them). */
  readonly needs: readonly string[];
  readonly root: boolean;
  /** Its own checks on its output lines: what failed, or undefined when they pass. */
  readonly check: (lines: readonly Line[]) => string | undefined;
  /** A bound on its wall time. */
  readonly timeoutS: number;
  /**
   * Runs beside the others rather than after them: it mostly waits (failover rounds, restarts),
   * and its checks are of answers, not of figures a busier machine moves.
   */
  readonly beside?: true;
}

const field = (o: unknown, ...path: string[]): unknown =>
  path.reduce<unknown>((v, k) => (typeof v === 'object' && v !== null ? (v as Line)[k] : undefined), o);

/** The first line of `bench`, or undefined. */
const lineOf = (lines: readonly Line[], bench: string): Line | undefined =>
  lines.find((l) => l['bench'] === bench);

/** raft: every put and read answered, every failover round recovered, no member exited on its own. */
function raftCheck(lines: readonly Line[]): string | undefined {
  if (lineOf(lines, 'done') === undefined) return 'no done line';
  if (lineOf(lines, 'error') !== undefined)
    return `a member exited: ${JSON.stringify(lineOf(lines, 'error'))}`;
  for (const l of lines.filter((x) => x['bench'] === 'put' || x['bench'] === 'linearizable_get')) {
    for (const system of ['slipway', 'etcd']) {
      const errors = field(l, system, 'errors');
      if (errors !== undefined && (errors !== 0 || field(l, system, 'truncated') === true))
        return `${system} ${String(l['bench'])} at ${String(l['concurrency'])}: ${JSON.stringify(errors)} errors`;
    }
  }
  for (const bench of ['failover_sigkill_leader', 'graceful_sigterm_leader']) {
    const l = lineOf(lines, bench);
    if (l === undefined) return `no ${bench} line`;
    if (field(l, 'recovered_ms_median', 'slipway') === null) return `${bench}: slipway did not recover`;
  }
  return undefined;
}

function stormCheck(lines: readonly Line[]): string | undefined {
  const l = lineOf(lines, 'storm');
  if (l === undefined) return 'no storm line';
  if (l['workflows_succeeded'] !== l['machines'] || l['machines_failed'] !== 0)
    return `${String(l['workflows_succeeded'])} of ${String(l['machines'])} workflows succeeded`;
  if (l['actions_run_twice'] !== 0 || l['actions_retried_in_state'] !== 0) return 'an action ran twice';
  return undefined;
}

function tftpCheck(lines: readonly Line[]): string | undefined {
  const configs = lines.filter((l) => l['bench'] === 'tftp' && l['config'] !== undefined);
  if (configs.length === 0) return 'no tftp line';
  for (const l of configs) {
    for (const system of ['slipway', 'tftpd_hpa']) {
      const failures = field(l, system, 'failures');
      if (typeof failures === 'number' && failures > 0)
        return `${system} ${String(l['config'])}: ${failures} failed downloads`;
    }
  }
  return undefined;
}

function floodCheck(lines: readonly Line[]): string | undefined {
  const l = lineOf(lines, 'flood');
  if (l === undefined) return 'no flood line';
  for (const phase of ['alone', 'during_flood']) {
    const failed = field(l, phase, 'failed');
    if (typeof failed !== 'object' || failed === null) return `no ${phase} figures`;
    if (Object.keys(failed).length > 0) return `normal calls failed ${phase}: ${JSON.stringify(failed)}`;
  }
  return undefined;
}

function cliCheck(lines: readonly Line[]): string | undefined {
  const l = lineOf(lines, 'cli');
  if (l === undefined) return 'no cli line';
  const failures = l['failures'];
  return typeof failures === 'object' && failures !== null && Object.keys(failures).length === 0
    ? undefined
    : `commands failed: ${JSON.stringify(failures)}`;
}

function dhcpCheck(lines: readonly Line[]): string | undefined {
  const runs = lines.filter((l) => l['bench'] === 'dhcp');
  if (runs.length === 0) return 'no dhcp line';
  const broken = runs.find((l) => l['error'] !== undefined || !(Number(l['best_per_s']) > 0));
  return broken === undefined
    ? undefined
    : `${String(broken['system'])}: ${JSON.stringify(broken['error'] ?? 'no passing step')}`;
}

const controlCheck = (lines: readonly Line[]): string | undefined =>
  lines.some((l) => l['bench'] === 'control' && l['metric'] === 'check' && l['pass'] === true)
    ? undefined
    : 'no passing check line';

/** Completed (its own checks throw, so exit 0 says they passed) and printed something. */
const printed = (lines: readonly Line[]): string | undefined =>
  lines.length > 0 ? undefined : 'no result line';

/** The benchmarks and their quick forms, cheapest first. */
export const quickBenches: readonly QuickBench[] = [
  { name: 'write-path', args: ['--quick'], needs: [], root: false, check: printed, timeoutS: 120 },
  {
    name: 'state',
    args: [
      '--quick',
      '--machines',
      '200',
      '--workflows',
      '2000',
      '--finished-max',
      '200',
      '--gc-every',
      '500',
    ],
    needs: [],
    root: false,
    check: printed,
    timeoutS: 120,
  },
  {
    name: 'control',
    args: [
      '--quick',
      '--workers',
      '30',
      '--active',
      '5',
      '--waves',
      '1',
      '--actions',
      '2',
      '--hold-ms',
      '100',
    ],
    needs: [],
    root: false,
    check: controlCheck,
    timeoutS: 240,
  },
  {
    name: 'raft',
    args: ['--quick', '--rounds', '1', '--only', 'put,get,failover', '--warmup', '100'],
    needs: ['etcd', 'etcdctl'],
    root: false,
    check: raftCheck,
    timeoutS: 300,
    beside: true,
  },
  {
    name: 'cli',
    args: ['--runs', '3'],
    needs: ['etcd', 'etcdctl'],
    root: false,
    check: cliCheck,
    timeoutS: 240,
    // It waits on each command's answer; after raft, the two lanes take about as long.
    beside: true,
  },
  { name: 'flood', args: ['--quick'], needs: [], root: false, check: floodCheck, timeoutS: 180 },
  {
    name: 'tftp',
    args: ['--quick', '--clients', '5'],
    needs: ['in.tftpd', 'atftp', 'curl'],
    root: true,
    check: tftpCheck,
    timeoutS: 240,
  },
  { name: 'storm', args: ['--quick'], needs: ['haproxy'], root: true, check: stormCheck, timeoutS: 300 },
  {
    name: 'dhcp',
    args: ['--quick', '--rates', '500', '--period', '1'],
    needs: ['perfdhcp', 'kea-dhcp4'],
    root: true,
    check: dhcpCheck,
    timeoutS: 300,
  },
];

function onPath(command: string): boolean {
  return spawnSync('sh', ['-c', `command -v ${command}`], { stdio: 'ignore' }).status === 0;
}

/** Runs one benchmark to its end (bounded): its exit code, output lines and wall seconds. */
const runOne = (
  b: QuickBench,
): Promise<{ code: number | null; lines: Line[]; seconds: number; tail: string }> =>
  runBenchChild(b.name, b.args, b.timeoutS);

/**
 * Runs `npm run bench -- NAME ARGS` as a child process, bounded by `timeoutS` (SIGINT, on which
 * every benchmark stops what it started; SIGKILL 30 s later): its exit code, its JSON result
 * lines, its wall seconds and the end of its stderr.
 */
export function runBenchChild(
  name: string,
  args: readonly string[],
  timeoutS: number,
): Promise<{ code: number | null; lines: Line[]; seconds: number; tail: string }> {
  const run = fileURLToPath(new URL('./run.ts', import.meta.url));
  const started = performance.now();
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', run, name, ...args], {
      cwd: repoRoot,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString('utf8')));
    child.stderr.on('data', (d: Buffer) => {
      err = (err + d.toString('utf8')).slice(-4000);
    });
    const timer = setTimeout(() => child.kill('SIGINT'), timeoutS * 1000);
    const hard = setTimeout(() => child.kill('SIGKILL'), (timeoutS + 30) * 1000);
    child.once('exit', (code) => {
      clearTimeout(timer);
      clearTimeout(hard);
      const lines = out
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as Line);
      resolve({ code, lines, seconds: (performance.now() - started) / 1000, tail: err });
    });
  });
}

export async function runQuickBench(argv: readonly string[]): Promise<void> {
  const { values } = parseArgs({
    args: [...argv],
    options: { only: { type: 'string' }, skip: { type: 'string', default: '' } },
    strict: true,
  });
  const only = values.only?.split(',').filter((s) => s !== '');
  const skip = values.skip.split(',').filter((s) => s !== '');
  for (const name of [...(only ?? []), ...skip]) {
    if (!quickBenches.some((b) => b.name === name))
      throw new Error(`unknown benchmark "${name}" (${quickBenches.map((b) => b.name).join(', ')})`);
  }
  const chosen = quickBenches.filter(
    (b) => (only === undefined || only.includes(b.name)) && !skip.includes(b.name),
  );
  const failed: string[] = [];
  let total = 0;
  const runLane = async (lane: readonly QuickBench[]): Promise<void> => {
    for (const b of lane) {
      const missing = b.needs.filter((c) => !onPath(c));
      const why =
        missing.length > 0
          ? `missing ${missing.join(', ')} (apt-get install: see bench/README.md)`
          : b.root && process.getuid?.() !== 0
            ? 'needs root'
            : undefined;
      if (why !== undefined) {
        failed.push(b.name);
        process.stdout.write(`${JSON.stringify({ bench: 'quick', name: b.name, pass: false, why })}\n`);
        continue;
      }
      process.stderr.write(`quick: ${b.name} ${b.args.join(' ')}\n`);
      const r = await runOne(b);
      total += r.seconds;
      const problem = r.code !== 0 ? `exit ${String(r.code)}: ${r.tail.slice(-600)}` : b.check(r.lines);
      if (problem !== undefined) failed.push(b.name);
      process.stdout.write(
        `${JSON.stringify({ bench: 'quick', name: b.name, args: b.args, seconds: round(r.seconds, 1), pass: problem === undefined, ...(problem === undefined ? {} : { why: problem }) })}\n`,
      );
    }
  };
  const started = performance.now();
  await Promise.all([
    runLane(chosen.filter((b) => b.beside === true)),
    runLane(chosen.filter((b) => b.beside !== true)),
  ]);
  const wallSeconds = (performance.now() - started) / 1000;
  process.stdout.write(
    `${JSON.stringify({ bench: 'quick_summary', ran: chosen.map((b) => b.name), failed, seconds: round(total, 1), wall_seconds: round(wallSeconds, 1) })}\n`,
  );
  if (failed.length > 0) throw new Error(`quick forms failed: ${failed.join(', ')}`);
}
