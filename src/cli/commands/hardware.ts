// `slipway hardware create|get|list|delete|token`: the machines Slipway provisions; their
// lifecycle verbs, labels and history are hardware-lifecycle.ts's.
import { readFileSync } from 'node:fs';
import type { Command } from '@commander-js/extra-typings';
import type { ClusterClient } from '../client.js';
import type { OutputFormat, Row } from '../output.js';
import { render, UsageError } from '../output.js';
import { continueHelp, limitHelp, localHelp, paging, printList, readList } from '../pages.js';
import { hardwareLifecycleCommands, lifecycleLines, type LifecycleDoc } from './hardware-lifecycle.js';
import { explainCommand } from './hardware-select.js';
import { selectorFlag, selectorHelp } from './selector-flag.js';

type Connect = () => { client: ClusterClient; output: OutputFormat };

export function hardwareCommand(program: Command, connect: Connect): void {
  const hw = program.command('hardware').description('register and inspect machines');
  hw.command('create')
    .description('register a machine from a file (-f, YAML or JSON) or from flags')
    .option('-f, --file <file>', 'hardware document (YAML or JSON); "-" reads stdin')
    .option('--id <id>', 'hardware id')
    .option('--mac <mac>', 'MAC address of the boot interface')
    .option('--ip <addr/prefix>', 'reserved IPv4 address with prefix length, e.g. 10.0.0.5/24')
    .option('--gateway <ip>', 'default gateway')
    .option('--arch <arch>', 'x86_64 or arm64', 'x86_64')
    .option('--uefi', 'the machine boots with UEFI firmware')
    .option('--bmc <url>', "the machine's BMC for `slipway power`: ipmi://HOST[:PORT] (port 623 by default)")
    .option(
      '--bmc-credentials-file <file>',
      'BMC login: "username:password" on one line, or user name and password on two lines',
    )
    .option('--replace', 'replace an existing machine with the same id')
    .action((o) => createHardware(o, connect));
  hw.command('get')
    .description(
      'show a machine; the table adds its lifecycle: state, reason, since, deadline, the workflow that owns it, labels',
    )
    .argument('<id>')
    .option('--local', localHelp)
    .action(async (id, o) => {
      const { client, output } = connect();
      const res = await client.control('hardwareGet', { id, local: o.local === true });
      const doc = JSON.parse(res.hardwareJson) as HardwareDoc;
      process.stdout.write(`${render(output, doc, [row(doc)])}\n`);
      if (output === 'table') process.stdout.write(`${lifecycleLines(doc, Date.now())}\n`);
    });
  hw.command('list')
    .description('list machines, with their lifecycle state and the workflow that owns each')
    .option('--local', localHelp)
    .option(
      '--state <states>',
      'only machines in these states, comma-separated (enrolled, inspecting, ready, provisioning, deployed, releasing, failed, quarantined, maintenance, retired)',
    )
    .option(
      '--selector <selector>',
      `only machines the selector's terms select, whatever their state (filtered by the cluster); ${selectorHelp}`,
    )
    .option('--limit <n>', limitHelp)
    .option('--continue <token>', continueHelp)
    .addHelpText(
      'after',
      "\nExamples:\n  slipway hardware list --state failed,quarantined\n  slipway hardware list --state ready --selector 'rack in (a,b),memory>=64Gi'",
    )
    .action(async (o) => {
      paging(o);
      const states = {
        ...(o.state === undefined ? {} : { states: o.state }),
        ...(o.selector === undefined ? {} : { selector: await selectorFlag(o.selector) }),
      };
      const { pages, next, output } = await readList(
        o,
        connect,
        (client, req) => client.control('hardwareList', { ...states, ...req }),
        (p) => p.hardwareJson.length,
      );
      const docs = pages.flatMap((p) => p.hardwareJson).map((j) => JSON.parse(j) as HardwareDoc);
      printList(output, { doc: { hardware: docs }, rows: docs.map(row) }, next, 'machines');
    });
  hw.command('delete')
    .description(
      'forget a machine (refused while a workflow on it is active, naming the workflow that owns it)',
    )
    .argument('<id>')
    .action(async (id) => {
      const { client, output } = connect();
      await client.control('hardwareDelete', { id });
      process.stdout.write(`${render(output, { id, deleted: true }, [{ id, deleted: true }])}\n`);
    });
  hw.command('token')
    .description(
      'mint a new worker token for the machine and print it once; the previous one stops working (admin only)',
    )
    .argument('<id>')
    .action(async (id) => {
      const { client } = connect();
      const res = await client.control('hardwareToken', { id });
      process.stdout.write(`${res.token}\n`);
    });
  hardwareLifecycleCommands(hw, connect);
  explainCommand(hw, connect);
}

interface CreateFlags {
  readonly file?: string | undefined;
  readonly id?: string | undefined;
  readonly mac?: string | undefined;
  readonly ip?: string | undefined;
  readonly gateway?: string | undefined;
  readonly arch: string;
  readonly uefi?: true | undefined;
  readonly bmc?: string | undefined;
  readonly bmcCredentialsFile?: string | undefined;
  readonly replace?: true | undefined;
}

/** `hardware create`: the document from the file or the flags, with its BMC, sent to the cluster. */
async function createHardware(o: CreateFlags, connect: Connect): Promise<void> {
  // The document schema loads here, not with the module: other commands start without it.
  const { hardwareFromFlags, parseBmcCredentials, parseHardwareDocument, withBmc } =
    await import('../../workflow/index.js');
  let input;
  if (o.file !== undefined) {
    if (o.id !== undefined || o.mac !== undefined || o.ip !== undefined) {
      throw new UsageError('use either -f FILE or --id/--mac/--ip, not both');
    }
    input = parseOrUsage(() => parseHardwareDocument(readInput(o.file ?? '-')));
  } else {
    if (o.id === undefined || o.mac === undefined || o.ip === undefined) {
      throw new UsageError('hardware create needs -f FILE, or --id, --mac and --ip');
    }
    if (o.arch !== 'x86_64' && o.arch !== 'arm64') {
      throw new UsageError(`--arch must be x86_64 or arm64, got "${o.arch}"`);
    }
    const flags = {
      id: o.id,
      mac: o.mac,
      ip: o.ip,
      gateway: o.gateway,
      arch: o.arch,
      uefi: o.uefi === true,
    };
    input = parseOrUsage(() => hardwareFromFlags(flags));
  }
  if (o.bmcCredentialsFile !== undefined && o.bmc === undefined) {
    throw new UsageError('--bmc-credentials-file needs --bmc ipmi://HOST:PORT');
  }
  if (o.bmc !== undefined) {
    const address = o.bmc;
    // Read here, sent inside the document over the (TLS) API; never on a command line.
    const credentials =
      o.bmcCredentialsFile === undefined
        ? {}
        : parseOrUsage(() => parseBmcCredentials(readInput(o.bmcCredentialsFile ?? '')));
    const base = input;
    input = parseOrUsage(() => withBmc(base, { address, ...credentials }));
  }
  const { client, output } = connect();
  const res = await client.control('hardwareCreate', {
    documentJson: JSON.stringify(input),
    replace: o.replace === true,
  });
  const doc = JSON.parse(res.hardwareJson) as HardwareDoc;
  process.stdout.write(`${render(output, doc, [row(doc)])}\n`);
}

interface HardwareDoc extends LifecycleDoc {
  id: string;
  arch: string;
  uefi: boolean;
  interfaces: { mac: string; ip?: { address: string; prefix: number } }[];
  netboot: { allowPXE: boolean; allowWorkflow: boolean };
}

function row(h: HardwareDoc): Row {
  const first = h.interfaces[0];
  return {
    id: h.id,
    mac: first?.mac ?? '',
    ip: first?.ip === undefined ? '' : `${first.ip.address}/${String(first.ip.prefix)}`,
    arch: h.arch,
    uefi: h.uefi,
    allowPXE: h.netboot.allowPXE,
    allowWorkflow: h.netboot.allowWorkflow,
    state: h.lifecycle?.state ?? '',
    owner: h.lifecycle?.owner ?? '',
  };
}

export function readInput(file: string): string {
  try {
    return readFileSync(file === '-' ? 0 : file, 'utf8');
  } catch (err) {
    throw new UsageError(`cannot read ${file}: ${(err as Error).message}`);
  }
}

/** Document errors are the operator's input: exit code 2 with the message as is. */
export function parseOrUsage<T>(f: () => T): T {
  try {
    return f();
  } catch (err) {
    throw new UsageError(err instanceof Error ? err.message : String(err));
  }
}
