// What every command's help says beyond its own options: the examples of its group, the global
// options (shown in every command's help, configured on the program) and the exit codes. Kept in
// one place so a new group cannot leave them out: test/unit/cli-help.test.ts walks every command.
import type { Command as TreeCommand } from 'commander';

export type { TreeCommand };

/** Examples per top-level command, shown after the help of the command and of each subcommand. */
const examples: Readonly<Record<string, readonly string[]>> = {
  server: [
    'slipway server --config /etc/slipway/server.yaml',
    'slipway server --config /etc/slipway/server.yaml --print-config',
    'slipway server --id n1 --data-dir .data/n1 --raft-addr 127.0.0.1:7011 --api-addr 127.0.0.1:7001 \\',
    '  --peers n1=127.0.0.1:7011,n2=127.0.0.1:7012,n3=127.0.0.1:7013 --insecure',
  ],
  bootstrap: [
    'slipway bootstrap --dir pki --node n1=10.0.0.1,10.0.0.100 --node n2=10.0.0.2,10.0.0.100 \\',
    '  --node n3=10.0.0.3,10.0.0.100',
  ],
  bootos: [
    'slipway bootos build --out /var/lib/slipway/bootos --ca /etc/slipway/pki/ca.crt',
    'slipway bootos build --out out/ --node /opt/node-v24/bin/node',
  ],
  lab: [
    'slipway lab up --machines 2',
    'slipway lab up --firmware uefi',
    'slipway lab up --machines 2 --unregistered --memory 1024,1280 --disk 2Gi,3Gi --disk-bus virtio,scsi',
    'slipway lab down',
  ],
  balancer: [
    'slipway balancer config --listen 0.0.0.0:7000 --nodes n1=10.0.0.1:7001,n2=10.0.0.2:7001,n3=10.0.0.3:7001',
    'slipway balancer follow --haproxy-socket /run/haproxy/admin.sock',
  ],
  kv: [
    'slipway kv put greeting hello',
    'slipway kv get greeting',
    "slipway -o json kv list ''",
    'slipway kv delete greeting',
  ],
  member: [
    'slipway member list',
    'slipway member add n4 10.0.0.4:7011 --api-addr 10.0.0.4:7001',
    'slipway member remove n4',
  ],
  leader: ['slipway leader transfer n2'],
  node: ['slipway node drain n2', 'slipway node drain n2 --timeout 5m -o json', 'slipway node undrain n2'],
  hardware: [
    'slipway hardware create -f examples/hardware.yaml',
    'slipway hardware list --state ready',
    'slipway hardware label m1 rack=a',
    'slipway hardware drain m1 --reason "replace a disk"',
    'slipway hardware history m1',
  ],
  lease: ['slipway lease list --active'],
  template: [
    'slipway template create -f ubuntu.yaml',
    'slipway template list',
    'slipway template get ubuntu',
  ],
  workflow: [
    'id=$(slipway workflow create --template ubuntu --hardware m1)',
    'slipway workflow events "$id" --follow',
    'slipway workflow wait "$id"',
    'slipway workflow list',
    'slipway workflow retention --keep 50000 --max-age 90d',
  ],
  import: [
    'slipway import -f tinkerbell/ --dry-run',
    'slipway import -f hardware.yaml',
    'kubectl get hardware,templates,workflows,machines.bmc,secrets -o yaml | slipway import -f - --skip-unknown',
  ],
  power: [
    'slipway power on m1',
    'slipway power status m1',
    'slipway power cycle m1 --wait 2m',
    'slipway power job list --hardware m1',
  ],
  pool: [
    'slipway pool create web --selector rack --template ubuntu --size 2 --spares 1 --spread-by rack',
    'slipway pool create db --selector "memory>=64Gi" --template ubuntu --release-template wipe \\',
    '  --image ubuntu-24.04 --size 3 --max-unavailable 1',
    'slipway pool get web',
    'slipway pool scale web 4',
    'slipway pool taint web',
    'slipway pool create edge --selector rack --template ubuntu --size 2 --on-failure race --attempts 4',
    'slipway pool resume web',
    'slipway pool delete web',
  ],
  artifact: [
    'slipway artifact create ubuntu.raw.zst --name ubuntu-24.04',
    'slipway artifact list',
    'slipway artifact delete ubuntu-24.04',
  ],
  token: ['slipway token create --name ops --role operator', 'slipway token delete ops'],
  audit: [
    'slipway audit list --user ops --since 1h -o json',
    'slipway audit retention --keep 50000 --max-age 90d',
  ],
  snapshot: [
    'slipway snapshot save backup.snap',
    'slipway snapshot restore backup.snap --data-dir /var/lib/slipway --id n1 --peers n1=10.0.0.1:7011,...',
  ],
  worker: ['slipway --server 10.0.0.100:7000 --ca ca.crt worker --id m1 --token-file m1.token'],
  cluster: [
    'npm start                      # the same as: slipway cluster up --nodes 3 --foreground',
    'slipway cluster status',
    'slipway -o wide cluster status  # and why a member is not ok',
    'slipway cluster version',
  ],
  upgrade: ['slipway upgrade check n2   # before restarting n2 on a new build'],
  completion: [
    'source <(slipway completion bash)          # in ~/.bashrc',
    'slipway completion zsh > "${fpath[1]}/_slipway"',
    'slipway completion fish > ~/.config/fish/completions/slipway.fish',
  ],
};

/** The examples text of a top-level command, or undefined when it has none. */
export function examplesHelp(command: string): string | undefined {
  const lines = examples[command];
  return lines === undefined ? undefined : `\nExamples:\n${lines.map((l) => `  ${l}`).join('\n')}`;
}

/** Adds its group's examples to `command` and every command under it that has none of its own. */
export function addExamples(command: TreeCommand, group: string): void {
  const text = examplesHelp(group);
  if (text === undefined) return;
  const walk = (c: TreeCommand): void => {
    if (!/\bExamples:/.test(c.description())) c.addHelpText('after', text);
    for (const sub of c.commands) walk(sub);
  };
  walk(command);
}

/** The commands under `c` its help lists: not hidden ones (`__manual`, forms kept for old scripts). */
export function visibleCommands(c: TreeCommand): TreeCommand[] {
  return c
    .createHelp()
    .visibleCommands(c)
    .filter((s) => c.commands.includes(s));
}

/** Every command under `root`, root first, each with its path of names ("hardware list"). */
export function everyCommand(root: TreeCommand): { path: string; command: TreeCommand }[] {
  const out: { path: string; command: TreeCommand }[] = [];
  const walk = (c: TreeCommand, path: string): void => {
    out.push({ path, command: c });
    for (const s of visibleCommands(c)) {
      walk(s, path === '' ? s.name() : `${path} ${s.name()}`);
    }
  };
  walk(root, '');
  return out;
}
