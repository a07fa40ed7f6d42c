// Goal: `slipway import` brings a Tinkerbell user's objects into a real cluster as
// docs/decisions/0039 says. --dry-run lists what it would create and the fields that do not carry
// over, and changes nothing; a real run creates the template, the machine (its BMC credentials
// from the Rufio Machine's Secret, stored as `hardware create` stores them: get shows passwordSet
// only) and the workflow; a second run changes nothing and says so. Bad input (an unknown kind, a
// Secret missing its key, a Workflow whose hardwareRef is nowhere, a Hardware whose name another
// machine has) exits 2 naming what is wrong and creates nothing; --skip-unknown skips the unknown.
// A template written with Tinkerbell's Go-template forms, as their docs and playground write
// them (index, formatPartition, .Hardware lookups, unquoted), is imported and run by a real
// worker: each action sees the values Tinkerbell would give (docs/decisions/0042).
// Method: one real `slipway server` on loopback (plaintext, no tokens), the real CLI and a real
// worker agent. The BMC address is on loopback and no Workflow netboots, so nothing is sent to it.
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { stateVersionFleet } from '../../src/state/versions.js';
import { ClusterCli } from '../support/cluster-cli.js';
import { ProcessCluster } from '../support/process-cluster.js';

let cluster: ProcessCluster;
const c = new ClusterCli(() => cluster);

const hardware = (name: string, mac: string, ip: string): string => `apiVersion: "tinkerbell.org/v1alpha1"
kind: Hardware
metadata:
  name: ${name}
spec:
  bmcRef: {apiGroup: bmc.tinkerbell.org, kind: Machine, name: bmc-${name}}
  disks: [{device: /dev/sda}]
  metadata:
    instance: {hostname: ${name}, id: "${mac}"}
  interfaces:
    - dhcp:
        arch: x86_64
        hostname: ${name}
        mac: ${mac}
        ip: {address: ${ip}, netmask: 255.255.255.0, gateway: 10.9.0.1}
        time_servers: [10.9.0.1]
      netboot: {allowPXE: true, allowWorkflow: true}
---
apiVersion: bmc.tinkerbell.org/v1alpha1
kind: Machine
metadata:
  name: bmc-${name}
spec:
  connection:
    host: 127.0.0.1
    port: 9
    insecureTLS: true
    authSecretRef: {name: bmc-${name}-auth, namespace: default}
---
apiVersion: v1
kind: Secret
metadata:
  name: bmc-${name}-auth
  namespace: default
data:
  username: YWRtaW4=
  password: czNjcjN0
`;

const template = `apiVersion: "tinkerbell.org/v1alpha1"
kind: Template
metadata:
  name: ubuntu
spec:
  data: |
    version: "0.1"
    name: ubuntu_provisioning
    global_timeout: 1800
    tasks:
      - name: "os-installation"
        worker: "{{.device_1}}"
        volumes: [/dev:/dev]
        actions:
          - name: "stream-image"
            image: quay.io/tinkerbell/actions/image2disk:v1.0.0
            timeout: 600
            environment:
              DEST_DISK: /dev/sda
              IMG_URL: "http://10.9.0.1:8080/jammy.raw.gz"
              COMPRESSED: true
`;

const workflow = (hardwareRef: string): string => `apiVersion: "tinkerbell.org/v1alpha1"
kind: Workflow
metadata:
  name: ${hardwareRef}-ubuntu
spec:
  templateRef: ubuntu
  hardwareRef: ${hardwareRef}
  hardwareMap:
    device_1: "02:00:00:00:09:01"
`;

/** A directory of the files given. */
function inputDir(name: string, files: Record<string, string>): string {
  const dir = join(cluster.dir, name);
  mkdirSync(dir);
  for (const [file, text] of Object.entries(files)) writeFileSync(join(dir, file), text);
  return dir;
}

async function hardwareIds(): Promise<string[]> {
  const doc = JSON.parse(await c.ok(['-o', 'json', 'hardware', 'list'])) as { hardware: { id: string }[] };
  return doc.hardware.map((h) => h.id).sort();
}

async function workflowCount(): Promise<number> {
  const doc = JSON.parse(await c.ok(['-o', 'json', 'workflow', 'list'])) as { workflows: unknown[] };
  return doc.workflows.length;
}

before(async () => {
  cluster = new ProcessCluster(1);
  cluster.startAll();
  await cluster.waitForLeader();
  await cluster.waitForClusterVersion(cluster.nodes[0]!, stateVersionFleet, 30_000);
});
after(async () => {
  await c.stopWorkers();
  await cluster.destroy();
});

describe('import', () => {
  let dir = '';

  test('--dry-run lists what it would create and what does not carry over, and changes nothing', async () => {
    dir = inputDir('tink', {
      'hardware.yaml': hardware('sm01', '02:00:00:00:09:01', '10.9.0.11'),
      'template.yaml': template,
      'workflow.yml': workflow('sm01'),
      'README.md': 'not read',
    });
    const out = await c.ok(['import', '-f', dir, '--dry-run']);
    assert.match(out, /^template ubuntu: would create$/m);
    assert.match(out, /^hardware sm01: would create$/m);
    assert.match(out, /^workflow sm01-ubuntu: would create \(template ubuntu on sm01\)$/m);
    assert.match(
      out,
      /Hardware sm01 spec\.interfaces\[0\]\.dhcp\.time_servers: kept in metadata\.tinkerbell/,
    );
    assert.match(out, /Machine bmc-sm01 spec\.connection\.insecureTLS: dropped/);
    assert.match(out, /Template ubuntu spec\.data name: renamed: "ubuntu_provisioning" becomes "ubuntu"/);
    assert.match(out, /^dry run: nothing was changed$/m);
    const doc = JSON.parse(await c.ok(['-o', 'json', 'import', '-f', dir, '--dry-run'])) as {
      dryRun: boolean;
      changed: boolean;
      objects: { kind: string; name: string; action: string }[];
      notes: { object: string; field: string; outcome: string; reason: string }[];
    };
    assert.deepEqual([doc.dryRun, doc.changed], [true, true]);
    assert.deepEqual(
      doc.objects.map((o) => `${o.kind} ${o.name} ${o.action}`),
      ['template ubuntu would create', 'hardware sm01 would create', 'workflow sm01-ubuntu would create'],
    );
    assert.ok(doc.notes.some((n) => n.field === 'spec.disks' && n.outcome === 'kept in metadata.tinkerbell'));
    assert.deepEqual(await hardwareIds(), []);
  });

  test('a real run creates the template, the machine with its BMC, and the workflow', async () => {
    const out = await c.ok(['import', '-f', dir]);
    assert.match(out, /^template ubuntu: created$/m);
    assert.match(out, /^hardware sm01: created$/m);
    assert.match(out, /^workflow sm01-ubuntu: created \(\S+: template ubuntu on sm01\)$/m);
    const hw = JSON.parse(await c.ok(['-o', 'json', 'hardware', 'get', 'sm01'])) as {
      bmc: Record<string, unknown>;
      metadata: { instance: { hostname: string }; tinkerbell: { disks: string[] } };
      interfaces: { ip: { address: string; prefix: number } }[];
    };
    assert.deepEqual(hw.bmc, { address: 'ipmi://127.0.0.1:9', username: 'admin', passwordSet: true });
    assert.equal(hw.metadata.instance.hostname, 'sm01');
    assert.deepEqual(hw.metadata.tinkerbell.disks, ['/dev/sda']);
    assert.deepEqual(hw.interfaces[0]!.ip, { address: '10.9.0.11', prefix: 24 });
    assert.match(await c.ok(['template', 'get', 'ubuntu']), /^name: "ubuntu"$/m);
    assert.equal(await workflowCount(), 1);
  });

  test('a second run changes nothing and says so', async () => {
    const out = await c.ok(['import', '-f', dir]);
    assert.match(out, /^workflow sm01-ubuntu: unchanged/m);
    assert.match(out, /^nothing to change: all 3 objects are imported already$/m);
    assert.equal(await workflowCount(), 1);
  });

  test('bad input exits 2 naming what is wrong, and creates nothing', async () => {
    const job = 'apiVersion: bmc.tinkerbell.org/v1alpha1\nkind: Job\nmetadata: {name: cycle}\n';
    const unknown = join(
      inputDir('unknown', { 'a.yaml': `${hardware('sm02', '02:00:00:00:09:02', '10.9.0.12')}---\n${job}` }),
      'a.yaml',
    );
    const refused = await c.cli(['import', '-f', unknown]);
    assert.equal(refused.code, 2, refused.stderr);
    assert.match(refused.stderr, /Job cycle .*one-off BMC jobs are not imported.*--skip-unknown/);
    const noKey = hardware('sm03', '02:00:00:00:09:03', '10.9.0.13').replace('  password: czNjcjN0\n', '');
    const missingKey = await c.cli(['import', '-f', join(inputDir('nokey', { 'a.yaml': noKey }), 'a.yaml')]);
    assert.equal(missingKey.code, 2);
    assert.match(missingKey.stderr, /Secret default\/bmc-sm03-auth has no "password" key/);
    const nowhere = await c.cli([
      'import',
      '-f',
      join(inputDir('nowhere', { 'a.yaml': workflow('sm99') }), 'a.yaml'),
    ]);
    assert.equal(nowhere.code, 2);
    assert.match(
      nowhere.stderr,
      /spec\.hardwareRef "sm99" is neither a Hardware in the input nor a machine in the cluster/,
    );
    const clash = hardware('sm01', '02:00:00:00:09:01', '10.9.0.99');
    const clashed = await c.cli(['import', '-f', join(inputDir('clash', { 'a.yaml': clash }), 'a.yaml')]);
    assert.equal(clashed.code, 2);
    assert.match(clashed.stderr, /hardware "sm01" exists and differs in interfaces/);
    const unrendered = `${hardware('sm04', '02:00:00:00:09:04', '10.9.0.14')}---\n${template.replace('name: ubuntu', 'name: other')}---\n${workflow('sm04').replace('templateRef: ubuntu', 'templateRef: other').replace('09:01', '09:77')}`;
    const refusedRender = await c.cli([
      'import',
      '-f',
      join(inputDir('render', { 'a.yaml': unrendered }), 'a.yaml'),
    ]);
    assert.equal(refusedRender.code, 2);
    assert.match(
      refusedRender.stderr,
      /Workflow sm04-ubuntu: template "other" does not render for hardware "sm04": .*"02:00:00:00:09:77" .* is not a known hardware id or MAC address/,
    );
    assert.deepEqual(await hardwareIds(), ['sm01']);
    const skipped = await c.ok(['import', '-f', unknown, '--skip-unknown']);
    assert.match(skipped, /^skipped Job cycle .*one-off BMC jobs/m);
    assert.deepEqual(await hardwareIds(), ['sm01', 'sm02']);
  });
});

describe("Tinkerbell's Go-template forms", () => {
  // The forms of Tinkerbell's playground template (stack/vagrant/template.yaml) and docs
  // (docs/technical/BOOT_MODES.md), unquoted where they write them unquoted. The hub images
  // would write the disk; commands run as processes show what each action received instead.
  const goTemplate = `apiVersion: "tinkerbell.org/v1alpha1"
kind: Template
metadata:
  name: go-forms
spec:
  data: |
    version: "0.1"
    name: go_forms
    global_timeout: 600
    tasks:
      - name: "os-installation"
        worker: "{{.device_1}}"
        volumes:
          - /dev:/dev
        actions:
          - name: "settings"
            command: ["sh", "-c", "echo $DEST_DISK $BLOCK_DEVICE $MAC $INSTANCE"]
            timeout: 60
            environment:
              DEST_DISK: {{ index .Hardware.Disks 0 }}
              BLOCK_DEVICE: {{ formatPartition ( index .Hardware.Disks 0 ) 1 }}
              MAC: "{{ (index .Hardware.Interfaces 0).DHCP.MAC }}"
              INSTANCE: "{{ .Hardware.Metadata.Instance.Hostname }}"
          - name: "grow"
            command: "echo growpart {{ index .Hardware.Disks 0 }} 1 && echo resize2fs {{ formatPartition ( index .Hardware.Disks 0 ) 1 }}"
            timeout: 60
`;

  test('an imported template renders for the imported machine and runs with those values', async () => {
    const objects = [
      hardware('sm05', '02:00:00:00:09:05', '10.9.0.15').replace('/dev/sda', '/dev/nvme0n1'),
      goTemplate,
      workflow('sm05').replace('templateRef: ubuntu', 'templateRef: go-forms').replace('09:01', '09:05'),
    ].join('---\n');
    const out = await c.ok(['import', '-f', join(inputDir('go-forms', { 'a.yaml': objects }), 'a.yaml')]);
    assert.match(out, /^template go-forms: created$/m);
    const id = /^workflow sm05-ubuntu: created \((\S+):/m.exec(out)?.[1] ?? '';
    assert.notEqual(id, '', out);
    await c.startWorker('sm05');
    interface Run {
      state: string;
      actions: { name: string; state: string; outputTail: string }[];
    }
    // One `workflow wait` to its end, not a CLI run per poll.
    const waited = await c.cli(['workflow', 'wait', id]);
    const run = JSON.parse(await c.ok(['-o', 'json', 'workflow', 'get', id])) as Run;
    assert.equal(waited.code, 0, `the imported workflow to succeed: ${waited.stdout}${JSON.stringify(run)}`);
    assert.deepEqual(
      run.actions.map((a) => [a.name, a.outputTail.trim()]),
      [
        ['settings', '/dev/nvme0n1 /dev/nvme0n1p1 02:00:00:00:09:05 sm05'],
        ['grow', 'growpart /dev/nvme0n1 1\nresize2fs /dev/nvme0n1p1'],
      ],
    );
  });

  test('a Go form Slipway does not render is refused at import, naming it and its line', async () => {
    const piped = goTemplate
      .replace('name: go-forms', 'name: go-piped')
      .replace(
        '"{{ (index .Hardware.Interfaces 0).DHCP.MAC }}"',
        '"{{ (index .Hardware.Interfaces 0).DHCP.MAC | replace \\":\\" \\"-\\" }}"',
      );
    const refused = await c.cli(['import', '-f', join(inputDir('go-piped', { 'a.yaml': piped }), 'a.yaml')]);
    assert.equal(refused.code, 2, refused.stderr);
    assert.match(
      refused.stderr,
      /Template go-piped: spec\.data line 16: "\{\{ \(index \.Hardware\.Interfaces 0\)\.DHCP\.MAC \| replace .*" is a Go template form Slipway does not render: pipelines/,
    );
  });
});
