// `slipway import -f FILE|DIR [--dry-run] [--skip-unknown]`: Tinkerbell's Hardware, Template,
// Workflow and Rufio Machine (with its Secret) made Slipway's hardware, templates and workflows
// (src/tinkerbell/, docs/decisions/0039-tinkerbell-import.md). Everything is read and checked
// before the cluster is asked anything; each object is then one create call, so it comes in
// whole or not at all, and a second run finds everything imported and changes nothing.
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { Command } from '@commander-js/extra-typings';
import type { ClusterClient } from '../client.js';
import type { OutputFormat, Row } from '../output.js';
import { render, UsageError } from '../output.js';
import { listPages } from '../pages.js';
import { readInput } from './hardware.js';
import type { ClusterView, ImportPlan, ImportStep, InputFile } from '../../tinkerbell/index.js';

type Connect = () => { client: ClusterClient; output: OutputFormat };

const yamlFile = /\.(ya?ml|json)$/;

export function importCommand(program: Command, connect: Connect): void {
  program
    .command('import')
    .description(
      "bring Tinkerbell's objects in: Hardware (with its Rufio Machine and Secret), Template and Workflow YAML",
    )
    .requiredOption(
      '-f, --file <path>',
      'a YAML file (many documents, Lists too), a directory of them, or "-" for stdin',
    )
    .option(
      '--dry-run',
      'print what would be created and every field that does not carry over; change nothing',
    )
    .option(
      '--skip-unknown',
      'list and skip objects of kinds Slipway does not import, instead of refusing them',
    )
    .addHelpText(
      'after',
      '\nHardware keeps what Slipway has no field for in metadata.tinkerbell (and spec.metadata at the\n' +
        'top of its metadata), so templates reading it still render. A second run changes nothing.\n',
    )
    .action(async (o) => {
      const files = inputFiles(o.file);
      const { readObjects, ImportInputError, planImport, reconcile } =
        await import('../../tinkerbell/index.js');
      const checked = <T>(f: () => T): T => {
        try {
          return f();
        } catch (err) {
          if (err instanceof ImportInputError) throw new UsageError(`nothing imported:\n${err.message}`);
          throw err;
        }
      };
      const plan = checked(() => planImport(readObjects(files), { skipUnknown: o.skipUnknown === true }));
      const { client, output } = connect();
      const view = await clusterView(client);
      const steps = checked(() => reconcile(plan, view));
      const done = o.dryRun === true ? dryRun(steps) : await run(client, steps, output);
      report(output, plan, done, o.dryRun === true);
    });
}

/** The files -f names: the file, stdin, or a directory's YAML and JSON files in name order. */
function inputFiles(path: string): InputFile[] {
  if (path === '-') return [{ path: 'stdin', text: readInput('-') }];
  let isDirectory: boolean;
  try {
    isDirectory = statSync(path).isDirectory();
  } catch (err) {
    throw new UsageError(`cannot read ${path}: ${(err as Error).message}`);
  }
  if (!isDirectory) return [{ path, text: readInput(path) }];
  const names = readdirSync(path)
    .filter((name) => yamlFile.test(name))
    .sort();
  if (names.length === 0) throw new UsageError(`${path} holds no .yaml, .yml or .json file`);
  return names.map((name) => ({ path: join(path, name), text: readInput(join(path, name)) }));
}

async function clusterView(client: ClusterClient): Promise<ClusterView> {
  const all = { limit: undefined, from: '' };
  const hw = await listPages(
    all,
    (req) => client.control('hardwareList', { local: false, ...req }),
    (p) => p.hardwareJson.length,
  );
  const tpl = await listPages(
    all,
    (req) => client.control('templateList', { local: false, ...req }),
    (p) => p.templates.length,
  );
  const wf = await listPages(
    all,
    (req) => client.control('workflowList', { local: false, hardwareId: '', ...req }),
    (p) => p.workflows.length,
  );
  return {
    hardware: hw.pages.flatMap((p) => p.hardwareJson).map((j) => JSON.parse(j) as Record<string, unknown>),
    templates: tpl.pages
      .flatMap((p) => p.templates)
      .map((t) => ({ name: t.name, source: t.source, version: t.version })),
    workflows: wf.pages
      .flatMap((p) => p.workflows)
      .map((w) => ({ id: w.id, template: w.template, hardwareId: w.hardwareId })),
  };
}

interface Outcome {
  readonly kind: string;
  readonly name: string;
  readonly action: 'would create' | 'created' | 'unchanged';
  /** The workflow's id, or what the unchanged object is in the cluster. */
  readonly detail: string;
}

function dryRun(steps: readonly ImportStep[]): Outcome[] {
  return steps.map((step) => ({
    kind: step.kind,
    name: step.name,
    action: isImported(step) ? 'unchanged' : 'would create',
    detail: detailOf(step, step.kind === 'workflow' ? (step.existing ?? '') : ''),
  }));
}

function isImported(step: ImportStep): boolean {
  return step.kind === 'workflow' ? step.existing !== undefined : step.exists;
}

function detailOf(step: ImportStep, id: string): string {
  if (step.kind !== 'workflow') return '';
  const on = `template ${step.workflow.template} on ${step.workflow.hardwareId}${step.workflow.netboot ? ', netboot' : ''}`;
  return id === '' ? on : `${id}: ${on}`;
}

/** Creates what is not imported yet, in order; a table prints each line as it is done. */
async function run(
  client: ClusterClient,
  steps: readonly ImportStep[],
  output: OutputFormat,
): Promise<Outcome[]> {
  const outcomes: Outcome[] = [];
  for (const step of steps) {
    let id = step.kind === 'workflow' ? (step.existing ?? '') : '';
    if (!isImported(step)) {
      try {
        id = await create(client, step);
      } catch (err) {
        const done = outcomes.filter((o) => o.action === 'created').length;
        process.stderr.write(
          `slipway: import stopped at ${step.kind} ${step.name}, ${done} created before it; ` +
            'once the cause below is fixed, a second run creates the rest and skips those\n',
        );
        throw err;
      }
    }
    const outcome: Outcome = {
      kind: step.kind,
      name: step.name,
      action: isImported(step) ? 'unchanged' : 'created',
      detail: detailOf(step, id),
    };
    outcomes.push(outcome);
    if (output === 'table') process.stdout.write(`${line(outcome)}\n`);
  }
  return outcomes;
}

/** One create call; for a workflow, the id it was given. */
async function create(client: ClusterClient, step: ImportStep): Promise<string> {
  switch (step.kind) {
    case 'template':
      await client.control('templateCreate', { source: step.template.source, replace: false });
      return '';
    case 'hardware':
      await client.control('hardwareCreate', {
        documentJson: JSON.stringify(step.hardware.input),
        replace: false,
      });
      return '';
    case 'workflow': {
      const { template, hardwareId, hardwareMap, netboot } = step.workflow;
      const res = await client.control('workflowCreate', {
        template,
        hardwareId,
        hardwareMap: { ...hardwareMap },
        netboot,
      });
      return res.workflow?.id ?? '';
    }
  }
}

function line(o: Outcome): string {
  return `${o.kind} ${o.name}: ${o.action}${o.detail === '' ? '' : ` (${o.detail})`}`;
}

function report(output: OutputFormat, plan: ImportPlan, outcomes: readonly Outcome[], dry: boolean): void {
  const changed = outcomes.some((o) => o.action !== 'unchanged');
  if (output !== 'table') {
    const doc = { dryRun: dry, changed, objects: outcomes, notes: plan.notes, skipped: plan.skipped };
    process.stdout.write(`${render(output, doc, outcomes as unknown as Row[])}\n`);
    return;
  }
  if (dry) for (const o of outcomes) process.stdout.write(`${line(o)}\n`);
  for (const s of plan.skipped) process.stdout.write(`skipped ${s.object}: ${s.reason}\n`);
  if (plan.notes.length > 0) process.stdout.write('fields that do not carry over as they are:\n');
  for (const n of plan.notes) process.stdout.write(`  ${n.object} ${n.field}: ${n.outcome}: ${n.reason}\n`);
  if (outcomes.length === 0)
    process.stdout.write('nothing to import: the input holds no Hardware, Template or Workflow\n');
  else if (!changed)
    process.stdout.write(`nothing to change: all ${outcomes.length} objects are imported already\n`);
  else if (dry) process.stdout.write('dry run: nothing was changed\n');
}
