// `slipway artifact create FILE [--name NAME]` (`add` before, kept as its alias), `artifact list`
// and `artifact delete NAME`: boot artifacts that are the same on every node. create reads the file twice: once for its size and
// SHA-256, then to stream it to one node, which stores and verifies it and registers it in the
// replicated state; the command exits 0 once that is committed. The other nodes fetch the
// content from a peer. list shows, for the node that answers, whether it holds each one.
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { basename } from 'node:path';
import type { Command } from '@commander-js/extra-typings';
import type { ArtifactRecord } from '../../gen/control.js';
import type { ClusterClient } from '../client.js';
import { wholeNumber } from '../flags.js';
import type { OutputFormat, Row } from '../output.js';
import { render, UsageError } from '../output.js';
import { continueHelp, limitHelp, localHelp, printList, readList } from '../pages.js';

type Connect = (opts: { waitMs?: number }) => { client: ClusterClient; output: OutputFormat };

/** The size of each piece sent: well inside gRPC's 4 MiB message limit. */
const uploadChunkBytes = 1 << 20;

export function artifactCommand(program: Command, connect: Connect): void {
  const artifact = program
    .command('artifact')
    .description('boot artifacts served by every node under /artifacts/NAME (and the boot OS under /boot/)');
  artifact
    .command('create')
    .alias('add')
    .description('upload a file and register it on every node (exit 0 once committed)')
    .argument('<file>', 'the file to upload')
    .option('--name <name>', 'the name it is served under (default: the file name)')
    .option('--expect-version <n>', 'replace only this version of the artifact')
    .action(async (file, o) => {
      const name = o.name ?? basename(file);
      // The state's validation loads here, not with the module: other commands start without it.
      const { artifactNameProblem } = await import('../../model/artifact-name.js');
      const problem = artifactNameProblem(name);
      if (problem !== undefined) throw new UsageError(`--name ${problem.replace(/^name: /, '')}`);
      const expectVersion =
        o.expectVersion === undefined ? 0 : wholeNumber(o.expectVersion, '--expect-version');
      const { bytes, sha256 } = await digestFile(file);
      const { client, output } = connect({});
      const res = await client.uploadArtifact({ name, bytes, sha256, expectVersion }, () =>
        createReadStream(file, { highWaterMark: uploadChunkBytes }),
      );
      const record = res.artifact;
      if (record === undefined) throw new Error('the server answered without the artifact');
      process.stdout.write(`${render(output, record, [row(record)])}\n`);
    });
  artifact
    .command('list')
    .description("list registered artifacts and whether the answering node holds each one's content")
    .option('--local', localHelp)
    .option('--limit <n>', limitHelp)
    .option('--continue <token>', continueHelp)
    .action(async (o) => {
      const { pages, next, output } = await readList(
        o,
        () => connect({}),
        (client, req) => client.control('artifactList', req),
        (p) => p.artifacts.length,
      );
      // `local` is about the node that answered; a failover mid-list changes it for later pages.
      const nodeId = pages[0]?.nodeId ?? '';
      const artifacts = pages.flatMap((p) => p.artifacts);
      printList(output, { doc: { node: nodeId, artifacts }, rows: artifacts.map(row) }, next, 'artifacts');
      const missing = artifacts.filter((a) => a.local === 'missing');
      for (const a of missing) {
        process.stderr.write(`slipway: artifact "${a.name}" is missing on node ${nodeId}: ${a.localError}\n`);
      }
    });
  artifact
    .command('delete')
    .description('unregister an artifact (nodes stop serving it)')
    .argument('<name>')
    .action(async (name) => {
      const { client } = connect({});
      await client.control('artifactDelete', { name });
    });
}

/** Size and SHA-256 of a file; a file that cannot be read is bad input (exit 2). */
async function digestFile(file: string): Promise<{ bytes: number; sha256: string }> {
  try {
    const st = await stat(file);
    if (!st.isFile()) throw new UsageError(`${file} is not a regular file`);
    const hash = createHash('sha256');
    let bytes = 0;
    for await (const chunk of createReadStream(file, { highWaterMark: uploadChunkBytes })) {
      const data = chunk as Buffer;
      hash.update(data);
      bytes += data.length;
    }
    return { bytes, sha256: hash.digest('hex') };
  } catch (err) {
    if (err instanceof UsageError) throw err;
    throw new UsageError(`cannot read ${file}: ${(err as Error).message}`);
  }
}

function row(a: ArtifactRecord): Row {
  return {
    name: a.name,
    sha256: a.sha256,
    size: a.bytes,
    version: a.version,
    local: a.local,
  };
}
