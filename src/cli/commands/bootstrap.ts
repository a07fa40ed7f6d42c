// `slipway bootstrap`: makes a cluster's trust before its first start: a CA, a certificate per
// node (TLS on the API, mutual TLS between nodes) and the first admin token. Each node gets a
// directory of its own to copy to it; the CA's key stays in DIR/ca/, on no node.
import type { Command } from '@commander-js/extra-typings';
import { isIP } from 'node:net';
import { UsageError } from '../output.js';
import { isMemberId, memberIdForm } from '../../model/member-id.js';

export function bootstrapCommand(program: Command): void {
  program
    .command('bootstrap')
    .description('create the cluster CA, node certificates and the first admin token in --dir')
    .requiredOption(
      '--dir <dir>',
      'where to write ca/ (ca.crt, ca.key), admin.token and a directory per node (NODE/: its --tls-dir)',
    )
    .requiredOption(
      '--node <id=hosts>',
      'a node and the addresses and names it is reached at, the VIP among them, e.g. n1=10.0.0.11,10.0.0.100,prov1.example (repeat per node)',
      (spec: string, list: string[] | undefined) => [...(list ?? []), spec],
    )
    .option('--valid-days <n>', 'certificate lifetime in days', '3650')
    .addHelpText(
      'after',
      '\nExample:\n  slipway bootstrap --dir pki --node n1=10.0.0.1,10.0.0.100 --node n2=10.0.0.2,10.0.0.100 \\\n' +
        '    --node n3=10.0.0.3,10.0.0.100    # 10.0.0.100: the VIP, which clients reach every node at',
    )
    .action(async (o) => {
      if (!/^\d+$/.test(o.validDays) || Number(o.validDays) < 1) {
        throw new UsageError('--valid-days must be a positive whole number');
      }
      const nodes = o.node.map(parseNodeSpec);
      if (new Set(nodes.map((n) => n.id)).size !== nodes.length)
        throw new UsageError('--node: duplicate node id');
      // The X.509 code loads here, not with the module: other commands start without it.
      const { bootstrapPki } = await import('../../platform/pki.js');
      let files;
      try {
        files = await bootstrapPki(o.dir, nodes, Number(o.validDays));
      } catch (err) {
        throw new UsageError((err as Error).message);
      }
      process.stdout.write(
        [
          `cluster CA:   ${files.caCert} (give it to clients: --ca or SLIPWAY_CA)`,
          `CA key:       ${files.caKey} (copy it to no node; keep it offline)`,
          `admin token:  ${files.adminToken} (--token-file; keep it secret)`,
          ...files.nodes.map(
            (n) => `node ${n.id}:     ${n.dir}/ (ca.crt, ${n.id}.crt, ${n.id}.key, ${n.id}.pem, admin.token)`,
          ),
          '',
          `copy ${o.dir}/ID/ to node ID and start it with --tls-dir there; once named tokens exist`,
          '(`slipway token create`), delete admin.token everywhere: tokens stay required.',
          '',
        ].join('\n'),
      );
    });
}

/** `ID=HOST[,HOST...]`: a node id and the IP addresses or DNS names its certificate names. */
export function parseNodeSpec(spec: string): { id: string; hosts: string[] } {
  const eq = spec.indexOf('=');
  const id = eq < 0 ? spec : spec.slice(0, eq);
  if (!isMemberId(id)) {
    throw new UsageError(`--node: "${id}" is not a valid node id (${memberIdForm})`);
  }
  const hosts = eq < 0 ? [] : spec.slice(eq + 1).split(',');
  if (hosts.length === 0 || hosts.every((h) => h === '')) {
    throw new UsageError(
      `--node ${spec}: name the addresses node ${id} is reached at, and the VIP: ${id}=10.0.0.1,10.0.0.100`,
    );
  }
  for (const host of hosts) {
    const problem = hostProblem(host);
    if (problem !== undefined) throw new UsageError(`--node ${spec}: ${problem}`);
  }
  return { id, hosts };
}

/** Why `host` cannot be named in a certificate, or undefined: an IP address or a DNS name. */
function hostProblem(host: string): string | undefined {
  if (host === '') return 'an empty address (two commas, or one at the end)';
  if (isIP(host) !== 0) return undefined;
  const port = /^(.+):(\d+)$/.exec(host);
  if (port !== null && (isIP(port[1] ?? '') !== 0 || isDnsName(port[1] ?? ''))) {
    return `"${host}" has a port: a certificate names hosts, not ports; give ${port[1] ?? ''}`;
  }
  if (isDnsName(host)) return undefined;
  return `"${host}" is neither an IP address nor a DNS name`;
}

/** A DNS name as RFC 1123 allows one: dot-separated labels of letters, digits and inner hyphens. */
function isDnsName(host: string): boolean {
  if (host.length > 253) return false;
  return host
    .replace(/\.$/, '')
    .split('.')
    .every((label) => /^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$/.test(label));
}
