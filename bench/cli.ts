// `npm run bench -- cli [--runs N] [--slipway-only] [--keep]`
// How fast the `slipway` command starts and answers, beside a bare `node -e ''` and etcd's
// `etcdctl get` on the same machine in the same run: `slipway --version`, `slipway kv get KEY`
// and `slipway workflow list` against a running 3-node cluster (the compiled build, through
// bin/slipway.js as an operator runs it), and `etcdctl get KEY` (API v3) against a 3-member etcd
// 3.4. Each process is timed from spawn to exit (spawnSync and hrtime), N rounds, the commands
// interleaved in each round so load on the machine falls on all of them alike. Before the timed
// rounds, each slipway command runs once with a module trace (a loader hook and require.cache)
// that counts the files it loads. Prints one JSON line: p50/p90 per command, the ratios to the
// bare node start (and kv get's to etcdctl's), the targets, and the module counts.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { EtcdCluster, etcdVersion, repoRoot, SlipwayCluster } from './clusters.js';
import { machineFacts } from './machine.js';
import { percentile, ratio, round } from './stats.js';

interface Options {
  readonly runs: number;
  readonly slipwayOnly: boolean;
  readonly keep: boolean;
}

function parseOptions(argv: readonly string[]): Options {
  const { values } = parseArgs({
    args: [...argv],
    options: {
      runs: { type: 'string', default: '20' },
      'slipway-only': { type: 'boolean', default: false },
      keep: { type: 'boolean', default: false },
    },
    strict: true,
  });
  if (!/^\d+$/.test(values.runs) || Number(values.runs) < 3 || Number(values.runs) > 200)
    throw new Error('--runs must be a whole number from 3 to 200');
  return { runs: Number(values.runs), slipwayOnly: values['slipway-only'], keep: values.keep };
}

/** The targets of the issue: p50 wall time over the bare node start's p50. */
const targets = { version_vs_node: 1.5, kv_get_vs_node: 3 } as const;

const slipwayBin = fileURLToPath(new URL('../bin/slipway.js', import.meta.url));
const key = 'bench/cli';
const value = 'slipway-cli-bench';

interface Probe {
  readonly name: string;
  readonly file: string;
  readonly args: readonly string[];
  readonly env: NodeJS.ProcessEnv;
  /** What a successful run prints on stdout. */
  readonly expect: (stdout: string) => boolean;
}

function progress(msg: string): void {
  process.stderr.write(`cli: ${msg}\n`);
}

/** The environment of every timed process: no NODE_OPTIONS, so none loads more than it asks for. */
function childEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, ...extra };
  delete env['NODE_OPTIONS'];
  delete env['SLIPWAY_SERVER'];
  delete env['SLIPWAY_TOKEN'];
  delete env['SLIPWAY_CA'];
  return env;
}

/** Runs `p` once: its wall time in ms, or why it failed. */
function runOnce(p: Probe): { ms: number } | { error: string } {
  const t0 = process.hrtime.bigint();
  const r = spawnSync(p.file, [...p.args], { env: p.env, encoding: 'utf8', timeout: 30_000 });
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  if (r.error !== undefined) return { error: r.error.message };
  if (r.status !== 0) return { error: `exit ${String(r.status ?? r.signal)}: ${r.stderr.trim()}` };
  if (!p.expect(r.stdout)) return { error: `unexpected output: ${r.stdout.trim().slice(0, 200)}` };
  return { ms };
}

/** A CLI run that must succeed (setup): its stdout. */
function must(args: readonly string[], env: NodeJS.ProcessEnv): string {
  const r = spawnSync(process.execPath, [slipwayBin, ...args], { env, encoding: 'utf8', timeout: 60_000 });
  if (r.status !== 0)
    throw new Error(`slipway ${args.join(' ')} failed (${String(r.status ?? r.signal)}): ${r.stderr}`);
  return r.stdout;
}

/**
 * The files one run of `slipway ARGS` loads: ES modules through a loader hook, CommonJS ones from
 * require.cache at exit. Also whether bin/slipway.js ran the compiled build (dist/).
 */
function traceModules(
  dir: string,
  args: readonly string[],
  env: NodeJS.ProcessEnv,
): { files: number; slipway: number; node_modules: number; compiled: boolean } {
  const list = join(dir, `modules-${String(process.hrtime.bigint())}.txt`);
  const hooks = join(dir, 'trace-hooks.mjs');
  const preload = join(dir, 'trace-preload.mjs');
  writeFileSync(
    hooks,
    "import { appendFileSync } from 'node:fs';\n" +
      'export async function load(url, context, next) {\n' +
      '  const r = await next(url, context);\n' +
      "  if (url.startsWith('file:')) appendFileSync(process.env.SLIPWAY_BENCH_MODULES, url + '\\n');\n" +
      '  return r;\n' +
      '}\n',
  );
  writeFileSync(
    preload,
    "import { appendFileSync } from 'node:fs';\n" +
      "import { createRequire, register } from 'node:module';\n" +
      "import { pathToFileURL } from 'node:url';\n" +
      `register(${JSON.stringify(pathToFileURL(hooks).href)});\n` +
      'const cache = createRequire(import.meta.url).cache;\n' +
      "process.on('exit', () => {\n" +
      '  const urls = Object.keys(cache).map((f) => pathToFileURL(f).href);\n' +
      "  if (urls.length > 0) appendFileSync(process.env.SLIPWAY_BENCH_MODULES, urls.join('\\n') + '\\n');\n" +
      '});\n',
  );
  writeFileSync(list, '');
  const r = spawnSync(process.execPath, ['--import', pathToFileURL(preload).href, slipwayBin, ...args], {
    env: { ...env, SLIPWAY_BENCH_MODULES: list },
    encoding: 'utf8',
    timeout: 60_000,
  });
  if (r.status !== 0) throw new Error(`traced slipway ${args.join(' ')} failed: ${r.stderr}`);
  const files = new Set(
    readFileSync(list, 'utf8')
      .split('\n')
      .filter((u) => u !== '')
      .map((u) => fileURLToPath(u)),
  );
  // The trace's own preload is not the command's.
  files.delete(preload);
  const root = join(repoRoot, '/');
  const all = [...files];
  const ours = all.filter((f) => f.startsWith(root) && !f.includes('/node_modules/'));
  return {
    files: files.size,
    slipway: ours.length,
    node_modules: all.filter((f) => f.includes('/node_modules/')).length,
    compiled: files.has(join(root, 'dist', 'src', 'cli', 'main.js')),
  };
}

function latency(ms: readonly number[]): { n: number; p50_ms: number; p90_ms: number; min_ms: number } {
  const xs = [...ms].sort((a, b) => a - b);
  return {
    n: xs.length,
    p50_ms: round(percentile(xs, 0.5), 1),
    p90_ms: round(percentile(xs, 0.9), 1),
    min_ms: round(xs[0] ?? Number.NaN, 1),
  };
}

export async function runCliBench(argv: readonly string[]): Promise<void> {
  const o = parseOptions(argv);
  const etcd = etcdVersion();
  const etcdctl = spawnSync('etcdctl', ['version'], {
    encoding: 'utf8',
    env: childEnv({ ETCDCTL_API: '3' }),
  });
  if (!o.slipwayOnly && (!etcd.ok || etcdctl.status !== 0)) {
    process.stderr.write(
      `${etcd.ok ? 'etcdctl is not installed.' : etcd.message}\n` +
        'The cli benchmark runs etcdctl beside slipway: apt-get install -y etcd-server etcd-client, or --slipway-only\n',
    );
    process.exitCode = 2;
    return;
  }
  const { bench: _machineLine, ...machine } = machineFacts();
  const loadBefore = round(loadavg()[0] ?? 0);
  const dir = mkdtempSync(join(tmpdir(), 'slipway-cli-bench-'));
  const slipway = await SlipwayCluster.create();
  const etcdCluster = o.slipwayOnly ? undefined : await EtcdCluster.create();
  const stopAll = async (): Promise<void> => {
    await Promise.all([slipway.stop(o.keep), etcdCluster?.stop(o.keep)]);
    if (!o.keep) rmSync(dir, { recursive: true, force: true });
  };
  const onSignal = (): void => {
    progress('interrupted: stopping every process this benchmark started');
    void stopAll().then(() => process.exit(130));
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    // SlipwayCluster runs `npm run build` first: bin/slipway.js then runs that build (dist/).
    progress('starting 3 slipway nodes (compiled build)' + (etcdCluster ? ' and 3 etcd members' : ''));
    // One system after the other: six servers starting at once on 2 busy cores could take
    // longer than the wait for a leader.
    await slipway.start();
    await etcdCluster?.start();
    const env = childEnv();
    const server = ['--server', slipway.endpoints.join(',')];
    const etcdctlTarget =
      etcdCluster === undefined
        ? undefined
        : {
            env: childEnv({ ETCDCTL_API: '3' }),
            endpoints: ['--endpoints', etcdCluster.endpoints.join(',')],
          };

    const workflowId = seedClusters(dir, server, env, etcdctlTarget);
    const probes = cliProbes(server, env, workflowId, etcdctlTarget);
    const modules = traceSlipwayModules(dir, probes, env);
    const { samples, failures } = timeProbes(probes, o.runs);

    const figures = Object.fromEntries(probes.map((p) => [p.name, latency(samples.get(p.name)!)]));
    process.stdout.write(
      `${JSON.stringify({
        bench: 'cli',
        runs: o.runs,
        ...comparedFigures(figures),
        failures,
        modules,
        etcd: etcd.ok ? etcd.version : null,
        machine: { ...machine, load_avg_1m: { before: loadBefore, after: round(loadavg()[0] ?? 0) } },
      })}\n`,
    );
  } finally {
    await stopAll();
    if (o.keep) progress(`kept ${dir}, ${slipway.dir}${etcdCluster ? `, ${etcdCluster.dir}` : ''}`);
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}

/** How etcdctl reaches the etcd members. */
interface EtcdctlTarget {
  readonly env: NodeJS.ProcessEnv;
  readonly endpoints: readonly string[];
}

/** Writes the key (in both systems) and one workflow for the commands to read; returns its id. */
function seedClusters(
  dir: string,
  server: readonly string[],
  env: NodeJS.ProcessEnv,
  etcdctl: EtcdctlTarget | undefined,
): string {
  progress('writing the key and one workflow');
  must([...server, 'kv', 'put', key, value], env);
  const templateFile = join(dir, 'template.yaml');
  writeFileSync(
    templateFile,
    'version: "0.1"\nname: cli-bench\nglobal_timeout: 3600\ntasks:\n  - name: t\n    actions:\n' +
      '      - name: a\n        command: ["true"]\n        timeout: 60\n',
  );
  must([...server, 'template', 'create', '-f', templateFile], env);
  must(
    [
      ...server,
      'hardware',
      'create',
      '--id',
      'cli-bench',
      '--mac',
      '02:00:00:00:c1:01',
      '--ip',
      '10.99.0.11/24',
    ],
    env,
  );
  const workflowId = must(
    [...server, 'workflow', 'create', '--template', 'cli-bench', '--hardware', 'cli-bench'],
    env,
  ).trim();
  if (etcdctl !== undefined) {
    const put = spawnSync('etcdctl', [...etcdctl.endpoints, 'put', key, value], {
      env: etcdctl.env,
      encoding: 'utf8',
    });
    if (put.status !== 0) throw new Error(`etcdctl put failed: ${put.stderr}`);
  }
  return workflowId;
}

/** The commands timed: a bare node start, three slipway commands, and etcdctl get when etcd runs. */
function cliProbes(
  server: readonly string[],
  env: NodeJS.ProcessEnv,
  workflowId: string,
  etcdctl: EtcdctlTarget | undefined,
): Probe[] {
  const probes: Probe[] = [
    { name: 'node_bare', file: process.execPath, args: ['-e', ''], env, expect: (s) => s === '' },
    {
      name: 'slipway_version',
      file: process.execPath,
      args: [slipwayBin, '--version'],
      env,
      expect: (s) => /^\d+\.\d+\.\d+/.test(s),
    },
    {
      name: 'slipway_kv_get',
      file: process.execPath,
      args: [slipwayBin, ...server, 'kv', 'get', key],
      env,
      expect: (s) => s === `${value}\n`,
    },
    {
      name: 'slipway_workflow_list',
      file: process.execPath,
      args: [slipwayBin, ...server, 'workflow', 'list'],
      env,
      expect: (s) => s.includes(workflowId),
    },
  ];
  if (etcdctl !== undefined) {
    probes.push({
      name: 'etcdctl_get',
      file: 'etcdctl',
      args: [...etcdctl.endpoints, 'get', key, '--print-value-only'],
      env: etcdctl.env,
      expect: (s) => s === `${value}\n`,
    });
  }
  return probes;
}

/** The modules each slipway command loads; refuses a run where bin/slipway.js ran the sources. */
function traceSlipwayModules(
  dir: string,
  probes: readonly Probe[],
  env: NodeJS.ProcessEnv,
): Record<string, ReturnType<typeof traceModules>> {
  progress('tracing the modules each slipway command loads');
  const modules: Record<string, ReturnType<typeof traceModules>> = {};
  for (const p of probes.filter((x) => x.name.startsWith('slipway_')))
    modules[p.name] = traceModules(dir, p.args.slice(1), env);
  if (Object.values(modules).some((m) => !m.compiled))
    throw new Error(
      'bin/slipway.js ran the sources, not the compiled build: src/ or lb/ changed after the build',
    );
  return modules;
}

/** `runs` timed rounds of every probe after one warm-up round: each one's times, and its failures. */
function timeProbes(
  probes: readonly Probe[],
  runs: number,
): { samples: Map<string, number[]>; failures: Record<string, string[]> } {
  progress(`${String(runs)} rounds of ${probes.map((p) => p.name).join(', ')} (one warm-up round first)`);
  const samples = new Map<string, number[]>(probes.map((p) => [p.name, []]));
  const failures: Record<string, string[]> = {};
  for (let pass = -1; pass < runs; pass++) {
    // Each round starts at the next command, so none always runs right after another.
    for (let i = 0; i < probes.length; i++) {
      const p = probes[(i + Math.max(pass, 0)) % probes.length]!;
      const r = runOnce(p);
      if (pass < 0) continue;
      if ('ms' in r) samples.get(p.name)!.push(r.ms);
      else (failures[p.name] ??= []).push(r.error);
    }
  }
  return { samples, failures };
}

/** The p50s and p90s, their ratios to the bare node start (and kv get's to etcdctl's), the targets. */
function comparedFigures(figures: Record<string, ReturnType<typeof latency>>): Record<string, unknown> {
  const p50 = (name: string): number | undefined => figures[name]?.p50_ms;
  const ratios = {
    version_vs_node: ratio(p50('slipway_version'), p50('node_bare')),
    kv_get_vs_node: ratio(p50('slipway_kv_get'), p50('node_bare')),
    workflow_list_vs_node: ratio(p50('slipway_workflow_list'), p50('node_bare')),
    kv_get_vs_etcdctl: ratio(p50('slipway_kv_get'), p50('etcdctl_get')),
  };
  const met = (r: number | null, t: number): boolean | null => (r === null ? null : r <= t);
  return {
    p50_ms: Object.fromEntries(Object.entries(figures).map(([k, v]) => [k, v.p50_ms])),
    p90_ms: Object.fromEntries(Object.entries(figures).map(([k, v]) => [k, v.p90_ms])),
    ratios_p50: ratios,
    targets,
    target_met: {
      version_vs_node: met(ratios.version_vs_node, targets.version_vs_node),
      kv_get_vs_node: met(ratios.kv_get_vs_node, targets.kv_get_vs_node),
    },
    commands: figures,
  };
}
