// The storm benchmark's QEMU figures (`npm run bench -- storm --qemu`): one real machine of the
// machine lab (cluster/machine-lab.ts: 3 nodes, the VIP, HAProxy, a QEMU VM under TCG behind
// OpenIPMI's BMC simulator) provisioned with the storm's template of short actions by
// `workflow create --netboot`, as an operator does. Times from the create: the BMC powers the VM
// on (the power job's "on" step), iPXE fetches its script, the boot OS's worker connects, and the
// workflow succeeds. The first three come from the nodes' logs, which every node writes to its
// own output.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MachineLab, type Firmware } from '../cluster/machine-lab.js';
import { round } from './stats.js';

const workflowDeadlineMs = 600_000;

interface LogLine {
  readonly time?: number;
  readonly msg?: string;
  readonly step?: string;
}

/** The earliest time, over every node's output, of a log line that `match` accepts. */
function firstLogTime(lab: MachineLab, match: (line: LogLine) => boolean, sinceMs: number): number | null {
  let first: number | null = null;
  for (const node of lab.nodes) {
    for (const text of node.process.output.split('\n')) {
      if (!text.startsWith('{')) continue;
      let line: LogLine;
      try {
        line = JSON.parse(text) as LogLine;
      } catch {
        continue;
      }
      const time = line.time;
      if (time === undefined || time < sinceMs || !match(line)) continue;
      if (first === null || time < first) first = time;
    }
  }
  return first;
}

export async function measureVmProvision(
  firmware: Firmware,
  actions: number,
  bootOsDir: string | undefined,
): Promise<Record<string, unknown>> {
  const say = (line: string): void => void process.stderr.write(`storm --qemu: ${line}\n`);
  const dir = await mkdtemp(join(tmpdir(), 'slipway-storm-vm-'));
  const lab = await MachineLab.up({
    machines: 1,
    firmware,
    ...(bootOsDir === undefined ? {} : { bootOsDir }),
    progress: say,
  });
  try {
    const machine = lab.machines[0];
    if (machine === undefined) throw new Error('the lab has no machine');
    const steps = Array.from(
      { length: actions },
      (_, i) => `      - name: step-${String(i + 1)}\n        command: ["true"]\n        timeout: 120`,
    ).join('\n');
    const templateFile = join(dir, 'storm.yaml');
    await writeFile(
      templateFile,
      `version: "0.1"\nname: storm-vm\nglobal_timeout: 1200\ntasks:\n  - name: provision\n    actions:\n${steps}\n`,
    );
    await lab.slipway(['template', 'create', '-f', templateFile]);
    const created = Date.now();
    const workflowId = (
      await lab.slipway([
        'workflow',
        'create',
        '--template',
        'storm-vm',
        '--hardware',
        machine.id,
        '--netboot',
      ])
    ).trim();
    say(`workflow ${workflowId} created with --netboot: waiting for the VM`);
    let state = '';
    while (Date.now() - created < workflowDeadlineMs) {
      const record = JSON.parse(await lab.slipway(['-o', 'json', 'workflow', 'get', workflowId])) as {
        state?: string;
        finishedMs?: number;
      };
      state = record.state ?? '';
      if (state !== 'PENDING' && state !== 'RUNNING') {
        const done = record.finishedMs ?? Date.now();
        const since = (t: number | null): number | null =>
          t === null ? null : round((t - created) / 1000, 1);
        return {
          firmware,
          state,
          power_on_s: since(
            firstLogTime(lab, (l) => l.msg === 'power step done' && l.step === 'on', created),
          ),
          script_s: since(firstLogTime(lab, (l) => l.msg === 'iPXE script served', created)),
          worker_connected_s: since(firstLogTime(lab, (l) => l.msg === 'worker connected', created)),
          workflow_done_s: since(done),
        };
      }
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
    throw new Error(`the VM's workflow was still ${state} after ${String(workflowDeadlineMs / 1000)} s`);
  } finally {
    await lab.down();
    await rm(dir, { recursive: true, force: true });
  }
}
