// `slipway pool create|get|list|scale|taint|resume|delete`: pools of machines kept at a size by the
// leader (docs/decisions/0035-pools.md, 0036, 0040).
import type { Command } from '@commander-js/extra-typings';
import type { PoolRecord } from '../../gen/control.js';
import type { ClusterClient } from '../client.js';
import type { OutputFormat, Row } from '../output.js';
import { render, table, UsageError } from '../output.js';
import { wholeNumber } from '../flags.js';
import { selectorFlag, selectorHelp } from './selector-flag.js';
import { continueHelp, limitHelp, localHelp, printList, readList } from '../pages.js';
import { alternateAttemptsMax } from '../../model/limits.js';

/** The pool failure policies (docs/decisions/0040); alternate is the default. */
const policies = ['alternate', 'retry', 'race'] as const;
const poolAttemptsDefault = 3;

type Connect = () => { client: ClusterClient; output: OutputFormat };

/** Sizes, spares and budgets: whole numbers from 0 to 4096 (the state's poolSizeMax). */
const countMax = 4096;

function count(text: string, flag: string): number {
  const n = wholeNumber(text, flag);
  if (n > countMax) throw new UsageError(`${flag} must be 0 to ${countMax}, got ${text}`);
  return n;
}

interface CreateOptions {
  selector: string;
  template: string;
  size: string;
  spares?: string;
  spreadBy?: string;
  releaseTemplate?: string;
  image?: string;
  maxUnavailable?: string;
  onFailure?: string;
  attempts?: string;
}

export function poolCommand(program: Command, connect: Connect): void {
  const p = program
    .command('pool')
    .description('pools: N machines matching a selector, deployed with one template, kept at N');
  p.command('create')
    .description(
      'create a pool: the leader keeps --size machines matching --selector deployed with --template, ' +
        'spread across the values of --spread-by as evenly as it can, with --spares more ready and ' +
        'reserved for the pool; a member that fails, is retired or quarantined is replaced at once, ' +
        'from the spares first. After --attempts failed installations for each slot in a row, none ' +
        'deployed between, the pool holds until `pool resume`',
    )
    .argument('<name>', 'a DNS label: lower-case letters, digits and -')
    .requiredOption('--selector <selector>', `the machines it may take: ${selectorHelp}`)
    .requiredOption('--template <template>', 'the template each member is deployed with')
    .requiredOption('--size <n>', `members kept provisioning or deployed (0 to ${countMax})`)
    .option('--spares <k>', 'ready machines kept reserved for the pool besides (default 0)')
    .option('--spread-by <label>', 'a label (rack, zone) whose values the members are spread across')
    .option(
      '--release-template <template>',
      'run on a member leaving the pool (delete, scale down, taint) before it is ready again; ' +
        'without one a member leaving stays deployed (a tainted one is released at once)',
    )
    .option('--image <artifact>', 'a registered artifact the template writes, as {{ pool.image.url }}')
    .option('--max-unavailable <m>', '`pool taint`: members unavailable at once (default 1)')
    .option(
      '--on-failure <policy>',
      'where a slot goes after a failed installation: alternate (another matching machine, the ' +
        'default), retry (the same machine again, as long as it is not quarantined) or race (each ' +
        'slot started on two machines, the first to deploy kept, the other released)',
    )
    .option(
      '--attempts <n>',
      `machines (retry: installations) each slot may try while none in the pool deploys; then the ` +
        `pool holds (1 to ${alternateAttemptsMax}, default ${poolAttemptsDefault})`,
    )
    .action((name: string, o: CreateOptions) => create(connect, name, o));
  readCommands(p, connect);
  changeCommands(p, connect);
}

async function create(connect: Connect, name: string, o: CreateOptions): Promise<void> {
  const size = count(o.size, '--size');
  const spares = o.spares === undefined ? 0 : count(o.spares, '--spares');
  const maxUnavailable =
    o.maxUnavailable === undefined ? undefined : count(o.maxUnavailable, '--max-unavailable');
  const policy = o.onFailure ?? 'alternate';
  if (!(policies as readonly string[]).includes(policy))
    throw new UsageError(`--on-failure must be ${policies.join(', ')}, got "${policy}"`);
  const attempts = o.attempts === undefined ? undefined : wholeNumber(o.attempts, '--attempts');
  if (attempts !== undefined && (attempts < 1 || attempts > alternateAttemptsMax))
    throw new UsageError(`--attempts must be 1 to ${alternateAttemptsMax}, got ${o.attempts ?? ''}`);
  const selector = await selectorFlag(o.selector);
  const { client, output } = connect();
  const res = await client.control('poolCreate', {
    name,
    selector,
    template: o.template,
    size,
    spares,
    spreadBy: o.spreadBy ?? '',
    releaseTemplate: o.releaseTemplate ?? '',
    image: o.image ?? '',
    ...(maxUnavailable === undefined ? {} : { maxUnavailable }),
    onFailure: policy === 'alternate' ? '' : policy,
    ...(attempts === undefined ? {} : { attempts }),
  });
  printPool(output, res.pool);
}

/** `pool get` and `pool list`. */
function readCommands(p: Command, connect: Connect): void {
  p.command('get')
    .description(
      'show a pool: size, deployed, provisioning, spares ready, failed, per spread value, its ' +
        'members and spares with their states, and how many machines it lacks and why',
    )
    .argument('<name>')
    .option('--local', localHelp)
    .action(async (name: string, o: { local?: boolean }) => {
      const { client, output } = connect();
      const res = await client.control('poolGet', { name, local: o.local === true });
      printPool(output, res.pool);
    });
  p.command('list')
    .description('list pools, each with how it stands (the selector, templates and why in -o wide)')
    .option('--local', localHelp)
    .option('--limit <n>', limitHelp)
    .option('--continue <token>', continueHelp)
    .action(async (o) => {
      const { pages, next, output } = await readList(
        o,
        connect,
        (client, req) => client.control('poolList', req),
        (res) => res.pools.length,
      );
      const pools = pages.flatMap((res) => res.pools);
      printList(
        output,
        { doc: { pools }, rows: pools.map(summary), wide: pools.map(wideSummary) },
        next,
        'pools',
      );
    });
}

/** `pool scale`, `pool taint` and `pool delete`. */
function changeCommands(p: Command, connect: Connect): void {
  p.command('scale')
    .description(
      "change a pool's size: a larger pool is filled, a smaller one releases its surplus " +
        '(through its release template when it has one)',
    )
    .argument('<name>')
    .argument('<size>', `0 to ${countMax}`)
    .action(async (name: string, sizeText: string) => {
      const size = count(sizeText, 'size');
      const { client, output } = connect();
      const res = await client.control('poolScale', { name, size });
      printPool(output, res.pool);
    });
  p.command('taint')
    .description(
      'replace every member of a pool: new machines first when spares or ready machines allow, ' +
        'the old released at most --max-unavailable at a time, so deployed members never drop ' +
        'below size less max-unavailable',
    )
    .argument('<name>')
    .action(async (name: string) => {
      const { client, output } = connect();
      const res = await client.control('poolTaint', { name });
      printPool(output, res.pool);
    });
  p.command('resume')
    .description(
      'let a pool that holds allocate again: it held after --attempts installations failed in a ' +
        'row (`pool get` says which machine failed last and why); mend the cause first',
    )
    .argument('<name>')
    .action(async (name: string) => {
      const { client, output } = connect();
      const res = await client.control('poolResume', { name });
      if (output !== 'json' && output !== 'yaml' && !res.wasHeld)
        process.stderr.write(`pool ${name} was not held: nothing to resume\n`);
      printPool(output, res.pool);
    });
  p.command('delete')
    .description(
      'delete a pool: with a release template its members run it and go back to ready, the pool ' +
        'gone once they have; without one they stay deployed and leave the pool. Refused while a ' +
        'member is provisioning',
    )
    .argument('<name>')
    .action(async (name: string) => {
      const { client, output } = connect();
      const res = await client.control('poolDelete', { name });
      const doc = { name, deleted: !res.deleting, deleting: res.deleting };
      process.stdout.write(`${render(output, doc, [doc])}\n`);
    });
}

function requirePool(pool: PoolRecord | undefined): PoolRecord {
  if (pool === undefined) throw new Error('the server returned no pool');
  return pool;
}

function summary(pool: PoolRecord): Row {
  return {
    name: pool.name,
    size: pool.size,
    deployed: pool.deployed,
    provisioning: pool.provisioning,
    spares: `${pool.sparesReady}/${pool.spares}`,
    failed: pool.failed,
    tainted: pool.tainted,
    lacking: pool.lacking + pool.sparesLacking,
    ...(pool.deleting ? { state: 'deleting' } : pool.held !== '' ? { state: 'held' } : {}),
  };
}

function wideSummary(pool: PoolRecord): Row {
  return {
    ...summary(pool),
    selector: pool.selector,
    template: pool.template,
    spreadBy: pool.spreadBy,
    releaseTemplate: pool.releaseTemplate,
    image: pool.image,
    maxUnavailable: pool.maxUnavailable,
    onFailure: pool.onFailure,
    attempts: pool.attempts,
    failedInARow: pool.failedInARow,
    why: pool.why,
  };
}

/** One pool: json/yaml as the record; a table of its standing, its spread, its members, and why. */
function printPool(output: OutputFormat, record: PoolRecord | undefined): void {
  const pool = requirePool(record);
  if (output === 'json' || output === 'yaml') {
    process.stdout.write(`${render(output, pool, [])}\n`);
    return;
  }
  const parts = [table([output === 'wide' ? wideSummary(pool) : summary(pool)])];
  if (pool.spreadBy !== '' && pool.spread.length > 0) {
    parts.push(
      table(
        pool.spread.map((c) => ({
          [pool.spreadBy]: c.value === '' ? '(none)' : c.value,
          members: c.members,
          available: c.available,
        })),
      ),
    );
  }
  if (pool.members.length > 0) {
    parts.push(
      table(
        pool.members.map((m) => ({
          member: m.id,
          state: m.state,
          role: m.spare ? 'spare' : 'member',
          ...(pool.spreadBy === '' ? {} : { [pool.spreadBy]: m.spreadValue }),
          tainted: m.tainted ? 'yes' : '',
        })),
      ),
    );
  }
  const failures = pool.failedInARow === 0 ? '' : `; ${pool.failedInARow} installations failed in a row`;
  parts.push(`on failure: ${pool.onFailure} (attempts ${pool.attempts} per slot${failures})`);
  if (pool.held !== '') parts.push(`pool ${pool.held}`);
  else if (pool.why !== '') parts.push(`lacks: ${pool.why}`);
  process.stdout.write(`${parts.join('\n\n')}\n`);
}
