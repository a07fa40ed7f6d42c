// `slipway bootstrap`: makes a cluster's trust before its first start: a CA, a certificate per
// node (TLS on the API, mutual TLS between nodes) and the first admin token. Each node gets a
// directory of its own to copy to it; the CA's key stays in DIR/ca/, on no node.
import type { Command } from '@commander-js/extra-typings';
import { UsageError } from '../output.js';

export function bootstrapCommand(program: Command): void {
  program
    .command('bootstrap')
    .description('create the cluster CA, node certificates and the first admin token in --dir')
    .requiredOption(
      '--dir <dir>',
      'where to write ca/ (ca.crt, ca.key), admin.token and a directory per node (NODE/: its --tls-dir)',
    )
    .requiredOption(
      '--node <id=hosts...>',
      'a node and the names/addresses it is reached at, e.g. n1=10.0.0.11,prov1.example (repeat per node)',
    )
    .option('--valid-days <n>', 'certificate lifetime in days', '3650')
    .action(async (o) => {
      if (!/^\d+$/.test(o.validDays) || Number(o.validDays) < 1) {
        throw new UsageError('--valid-days must be a positive whole number');
      }
      const nodes = o.node.map((spec) => {
        const eq = spec.indexOf('=');
        const id = eq < 0 ? spec : spec.slice(0, eq);
        if (!/^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$/.test(id)) {
          throw new UsageError(`--node: "${id}" is not a valid node id`);
        }
        const hosts =
          eq < 0
            ? []
            : spec
                .slice(eq + 1)
                .split(',')
                .filter((h) => h !== '');
        return { id, hosts };
      });
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
