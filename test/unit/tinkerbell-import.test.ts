// Goal: Tinkerbell's objects become the hardware, templates and workflows `slipway import`
// creates, every field that does not carry over is listed with its reason, bad input is refused
// naming what is wrong (and nothing is planned), and a plan meets the cluster as docs/decisions/
// 0039 says: created, unchanged when imported already, refused when another object has the name.
// Method: the pure parts (src/tinkerbell/) on YAML written as Tinkerbell's docs write it, and a
// cluster view made the way the API shows records (no password, passwordSet).
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { readObjects, type InputFile } from '../../src/tinkerbell/objects.js';
import { planImport, withName, type ImportPlan } from '../../src/tinkerbell/plan.js';
import { prefixOf } from '../../src/tinkerbell/hardware.js';
import { reconcile, type ClusterView } from '../../src/tinkerbell/reconcile.js';

const hardware = `apiVersion: "tinkerbell.org/v1alpha1"
kind: Hardware
metadata:
  name: sm01
  namespace: tink-system
  labels: {rack: a}
spec:
  bmcRef:
    apiGroup: bmc.tinkerbell.org
    kind: Machine
    name: bmc-sm01
  disks:
    - device: /dev/nvme0n1
  metadata:
    facility:
      facility_code: onprem
    instance:
      hostname: sm01
      id: "3c:ec:ef:4c:4f:54"
      operating_system: {distro: ubuntu, version: "22.04"}
  interfaces:
    - dhcp:
        arch: x86_64
        hostname: sm01
        ip:
          address: 172.16.10.100
          gateway: 172.16.10.1
          netmask: 255.255.255.0
        lease_time: 86400
        mac: 3C:EC:EF:4C:4F:54
        name_servers: [172.16.10.1, 10.1.1.11]
        time_servers: [172.16.10.1]
        uefi: true
      netboot:
        allowPXE: true
        allowWorkflow: true
        osie: {baseURL: "http://10.1.1.11:8080"}
`;

const machine = `apiVersion: bmc.tinkerbell.org/v1alpha1
kind: Machine
metadata:
  name: bmc-sm01
  namespace: tink-system
spec:
  connection:
    host: 10.1.2.17
    port: 6230
    insecureTLS: true
    authSecretRef:
      name: bmc-sm01-auth
      namespace: tink-system
`;

const secret = `apiVersion: v1
kind: Secret
metadata:
  name: bmc-sm01-auth
  namespace: tink-system
type: kubernetes.io/basic-auth
data:
  username: YWRtaW4=
  password: czNjcjN0
`;

const templateData = `version: "0.1"
name: ubuntu_provisioning # as the docs write it
global_timeout: 1800
tasks:
  - name: "os-installation"
    worker: "{{.device_1}}"
    volumes:
      - /dev:/dev
    actions:
      - name: "stream-ubuntu-image"
        image: quay.io/tinkerbell/actions/image2disk:v1.0.0
        timeout: 600
        environment:
          DEST_DISK: /dev/nvme0n1
          IMG_URL: "http://10.1.1.11:8080/jammy.raw.gz"
          COMPRESSED: true
`;

const template = `apiVersion: "tinkerbell.org/v1alpha1"
kind: Template
metadata:
  name: ubuntu
  namespace: tink-system
spec:
  data: |
${templateData
  .split('\n')
  .map((l) => (l === '' ? '' : `    ${l}`))
  .join('\n')}`;

const workflow = `apiVersion: "tinkerbell.org/v1alpha1"
kind: Workflow
metadata:
  name: sm01-ubuntu
  namespace: tink-system
spec:
  templateRef: ubuntu
  hardwareRef: sm01
  hardwareMap:
    device_1: 3c:ec:ef:4c:4f:54
  bootOptions:
    bootMode: netboot
`;

const allInOne = [hardware, machine, secret, template, workflow].join('---\n');
const files = (text: string): InputFile[] => [{ path: 'in.yaml', text }];
const plan = (text: string, skipUnknown = false): ImportPlan =>
  planImport(readObjects(files(text)), { skipUnknown });
const emptyCluster: ClusterView = { hardware: [], templates: [], workflows: [] };

/** The cluster after a real run: records as the API shows them (password stripped). */
function clusterAfter(p: ImportPlan): ClusterView {
  return {
    hardware: p.hardware.map(({ input }) => {
      const { bmc, ...rest } = input;
      const shown = { ...rest, version: 3, createdMs: 1, lifecycle: { state: 'ready' } };
      if (bmc === undefined) return shown;
      const { password, ...visible } = bmc;
      return { ...shown, bmc: { ...visible, passwordSet: password !== undefined } };
    }),
    templates: p.templates.map((t) => ({ name: t.name, source: t.source, version: 1 })),
    workflows: p.workflows.map((w, i) => ({ id: `wf-${i}`, template: w.template, hardwareId: w.hardwareId })),
  };
}

function refusal(f: () => unknown): string {
  try {
    f();
  } catch (err) {
    return (err as Error).message;
  }
  assert.fail('expected a refusal');
}

describe('mapping', () => {
  test('Hardware, Machine and Secret become one machine with its BMC and its Tinkerbell fields', () => {
    const p = plan(allInOne);
    assert.equal(p.hardware.length, 1);
    const hw = p.hardware[0]!.input;
    assert.equal(hw.id, 'sm01');
    assert.equal(hw.arch, 'x86_64');
    assert.equal(hw.uefi, true);
    assert.deepEqual(hw.interfaces, [
      {
        mac: '3c:ec:ef:4c:4f:54',
        ip: { address: '172.16.10.100', prefix: 24 },
        gateway: '172.16.10.1',
        dns: ['172.16.10.1', '10.1.1.11'],
        hostname: 'sm01',
        leaseTimeS: 86400,
      },
    ]);
    assert.deepEqual(hw.netboot, { allowPXE: true, allowWorkflow: true });
    assert.deepEqual(hw.bmc, { address: 'ipmi://10.1.2.17:6230', username: 'admin', password: 's3cr3t' });
    // Tinkerbell's spec.metadata sits at the top: `.Hardware.Metadata.instance.hostname` reads it.
    assert.deepEqual(hw.metadata['instance'], {
      hostname: 'sm01',
      id: '3c:ec:ef:4c:4f:54',
      operating_system: { distro: 'ubuntu', version: '22.04' },
    });
    const kept = hw.metadata['tinkerbell'] as Record<string, unknown>;
    assert.deepEqual(kept['disks'], ['/dev/nvme0n1']);
    assert.deepEqual(kept['labels'], { rack: 'a' });
    const spec = kept['spec'] as { interfaces: { dhcp: { time_servers: string[] } }[] };
    assert.deepEqual(spec.interfaces[0]!.dhcp.time_servers, ['172.16.10.1']);
    assert.equal(JSON.stringify(hw.metadata).includes('s3cr3t'), false, 'no credential in metadata');
  });

  test('every field that does not carry over is listed with what happened to it and why', () => {
    const fields = plan(allInOne).notes.map((n) => `${n.object} ${n.field}: ${n.outcome}`);
    assert.ok(
      fields.includes('Hardware tink-system/sm01 spec.disks: kept in metadata.tinkerbell'),
      fields.join('\n'),
    );
    assert.ok(
      fields.includes(
        'Hardware tink-system/sm01 spec.interfaces[0].dhcp.time_servers: kept in metadata.tinkerbell',
      ),
    );
    assert.ok(
      fields.includes(
        'Hardware tink-system/sm01 spec.interfaces[0].netboot.osie: kept in metadata.tinkerbell',
      ),
    );
    assert.ok(fields.some((f) => f.includes('spec.connection.insecureTLS: dropped')));
    assert.ok(fields.includes('Template tink-system/ubuntu spec.data name: renamed'));
  });

  test('a Template is named by metadata.name, the rest of its text kept byte for byte', () => {
    const p = plan(allInOne);
    assert.deepEqual(
      p.templates.map((t) => t.name),
      ['ubuntu'],
    );
    assert.equal(p.templates[0]!.source, templateData.replace('name: ubuntu_provisioning', 'name: "ubuntu"'));
    assert.equal(
      withName('version: "0.1"\nglobal_timeout: 5\n', 'x').source,
      'name: "x"\nversion: "0.1"\nglobal_timeout: 5\n',
    );
    assert.equal(withName(templateData, 'ubuntu_provisioning').renamedFrom, undefined);
  });

  test('a Workflow keeps its references, its hardwareMap and its netboot boot mode', () => {
    assert.deepEqual(plan(allInOne).workflows, [
      {
        name: 'sm01-ubuntu',
        template: 'ubuntu',
        hardwareId: 'sm01',
        hardwareMap: { device_1: '3c:ec:ef:4c:4f:54' },
        netboot: true,
      },
    ]);
  });

  test('a List (kubectl get -o yaml) is read item by item; stringData serves as data does', () => {
    const list = {
      apiVersion: 'v1',
      kind: 'List',
      items: [
        ...[hardware, machine].map((t) => readObjects(files(t))[0]!.body),
        {
          apiVersion: 'v1',
          kind: 'Secret',
          metadata: { name: 'bmc-sm01-auth', namespace: 'tink-system' },
          stringData: { username: 'root', password: 'calvin' },
        },
      ],
    };
    const p = plan(JSON.stringify(list));
    assert.deepEqual(p.hardware[0]!.input.bmc, {
      address: 'ipmi://10.1.2.17:6230',
      username: 'root',
      password: 'calvin',
    });
  });

  test('a Workflow that ran in Tinkerbell (kubectl get -o yaml keeps its status) is skipped, not run again', () => {
    const ran = plan([template, `${workflow}status:\n  state: SUCCESS\n`].join('---\n'));
    assert.deepEqual(ran.workflows, []);
    assert.deepEqual(ran.skipped, [
      {
        object: 'Workflow tink-system/sm01-ubuntu',
        reason: 'status.state is SUCCESS: it ran in Tinkerbell, and importing it would run it again',
      },
    ]);
    const pending = plan([template, `${workflow}status:\n  state: PENDING\n`].join('---\n'));
    assert.equal(pending.workflows.length, 1);
  });

  test('netmasks become prefix lengths; a non-contiguous one is refused', () => {
    assert.equal(prefixOf('255.255.255.0'), 24);
    assert.equal(prefixOf('255.255.255.255'), 32);
    assert.equal(prefixOf('0.0.0.0'), 0);
    assert.equal(prefixOf('255.0.255.0'), undefined);
    const bad = hardware.replace('255.255.255.0', '255.0.255.0');
    assert.match(
      refusal(() => plan(bad)),
      /spec\.interfaces\[0\]\.dhcp\.ip\.netmask "255\.0\.255\.0" is not an IPv4 netmask/,
    );
  });
});

describe('bad input', () => {
  const job = `apiVersion: bmc.tinkerbell.org/v1alpha1
kind: Job
metadata: {name: reboot-sm01}
spec: {machineRef: {name: bmc-sm01}}
`;

  test('an unknown kind is refused, nothing planned; --skip-unknown lists and skips it', () => {
    const text = [allInOne, job, 'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n'].join('---\n');
    const message = refusal(() => plan(text));
    assert.match(message, /Job reboot-sm01 \(in\.yaml: document 6\): one-off BMC jobs are not imported/);
    assert.match(message, /ConfigMap c .*not one Slipway imports.*--skip-unknown/);
    const p = plan(text, true);
    assert.deepEqual(
      p.skipped.map((s) => s.object),
      ['Job reboot-sm01 (in.yaml: document 6)', 'ConfigMap c (in.yaml: document 7)'],
    );
    assert.equal(p.hardware.length, 1);
  });

  test('a Secret missing the referenced key is refused naming the key, never a value', () => {
    const message = refusal(() => plan(allInOne.replace('  password: czNjcjN0\n', '')));
    assert.match(message, /Secret tink-system\/bmc-sm01-auth has no "password" key in data or stringData/);
    assert.equal(message.includes('YWRtaW4'), false);
    const missing = refusal(() => plan([hardware, machine].join('---\n')));
    assert.match(
      missing,
      /names Secret tink-system\/bmc-sm01-auth \(authSecretRef\), which is not in the input/,
    );
  });

  test('a Workflow whose hardwareRef is neither in the input nor in the cluster is refused', () => {
    const p = plan([template, workflow.replace('hardwareRef: sm01', 'hardwareRef: sm99')].join('---\n'));
    assert.match(
      refusal(() => reconcile(p, emptyCluster)),
      /Workflow sm01-ubuntu: spec\.hardwareRef "sm99" is neither a Hardware in the input nor a machine in the cluster/,
    );
    const sm99 = {
      id: 'sm99',
      arch: 'x86_64',
      uefi: false,
      interfaces: [{ mac: '3c:ec:ef:4c:4f:54', dns: [], leaseTimeS: 86400 }],
      netboot: { allowPXE: true, allowWorkflow: true },
      metadata: {},
    };
    const withBmc = { ...sm99, bmc: { address: 'ipmi://127.0.0.1:623', passwordSet: false } };
    const inCluster = reconcile(p, { ...emptyCluster, hardware: [withBmc] });
    assert.deepEqual(
      inCluster.map((s) => `${s.kind} ${s.name}`),
      ['template ubuntu', 'workflow sm01-ubuntu'],
    );
  });

  test('a Workflow the cluster would refuse is refused before anything is created', () => {
    const p = plan(
      [hardware, machine, secret, template, workflow].join('---\n').replace('device_1: 3c:', 'device_1: 4c:'),
    );
    assert.match(
      refusal(() => reconcile(p, emptyCluster)),
      /Workflow sm01-ubuntu: template "ubuntu" does not render for hardware "sm01": line 6: tasks\[0\]\.worker: "4c:ec:ef:4c:4f:54" of task "os-installation" is not a known hardware id or MAC address/,
    );
    const noBmc = plan([hardware.replace(/ {2}bmcRef:\n(.*\n){3}/, ''), template, workflow].join('---\n'));
    assert.match(
      refusal(() => reconcile(noBmc, emptyCluster)),
      /bootOptions\.bootMode netboot needs a BMC, and hardware "sm01" has none/,
    );
  });

  test('YAML that does not parse, an object without a name, two Hardware of one name: all refused', () => {
    assert.match(
      refusal(() => plan('kind: [')),
      /^in\.yaml:1: /,
    );
    assert.match(
      refusal(() => plan('apiVersion: v1\nkind: Secret\n')),
      /Secret without metadata\.name/,
    );
    const twice = [hardware, hardware.replace('namespace: tink-system', 'namespace: other')].join('---\n');
    assert.match(
      refusal(() => plan(twice)),
      /has the same name; Slipway has one namespace/,
    );
  });

  test('isoboot and a Hardware that is not a valid machine are refused with the field named', () => {
    assert.match(
      refusal(() => plan(allInOne.replace('bootMode: netboot', 'bootMode: isoboot'))),
      /bootMode "isoboot"/,
    );
    assert.match(
      refusal(() => plan(hardware.replace('arch: x86_64', 'arch: ppc64le'))),
      /dhcp\.arch "ppc64le": Slipway boots x86_64 \(amd64\) and arm64 \(aarch64\) machines/,
    );
    assert.match(
      refusal(() => plan(hardware.replace('hostname: sm01\n        ip', 'hostname: "bad host"\n        ip'))),
      /as Slipway hardware, interfaces\.0\.hostname/,
    );
  });
});

describe('against the cluster', () => {
  test('an empty cluster: everything is created, templates first, workflows last', () => {
    const steps = reconcile(plan(allInOne), emptyCluster);
    assert.deepEqual(
      steps.map(
        (s) => `${s.kind} ${s.name} ${s.kind === 'workflow' ? String(s.existing) : String(s.exists)}`,
      ),
      ['template ubuntu false', 'hardware sm01 false', 'workflow sm01-ubuntu undefined'],
    );
  });

  test('a second run finds everything imported, allowPXE turned off by a workflow included', () => {
    const p = plan(allInOne);
    const after = clusterAfter(p);
    const toggled = {
      ...after,
      hardware: after.hardware.map((h) => ({ ...h, netboot: { allowPXE: false, allowWorkflow: true } })),
    };
    const steps = reconcile(plan(allInOne), toggled);
    assert.deepEqual(
      steps.map((s) => (s.kind === 'workflow' ? s.existing : s.exists)),
      [true, true, 'wf-0'],
    );
  });

  test('another object with the name is refused, naming it', () => {
    const p = plan(allInOne);
    const after = clusterAfter(p);
    const moved = {
      ...after,
      hardware: after.hardware.map((h) => ({
        ...h,
        interfaces: [{ mac: '3c:ec:ef:4c:4f:54', dns: [], leaseTimeS: 60 }],
      })),
    };
    assert.match(
      refusal(() => reconcile(p, moved)),
      /Hardware sm01: hardware "sm01" exists and differs in interfaces; delete it \(slipway hardware delete sm01\)/,
    );
    const other = {
      ...emptyCluster,
      hardware: [{ id: 'node-7', interfaces: [{ mac: '3c:ec:ef:4c:4f:54' }] }],
    };
    assert.match(
      refusal(() => reconcile(p, other)),
      /interfaces\[0\]\.mac 3c:ec:ef:4c:4f:54 belongs to hardware "node-7"/,
    );
    const template2 = {
      ...emptyCluster,
      templates: [{ name: 'ubuntu', source: 'name: ubuntu\n', version: 4 }],
    };
    assert.match(
      refusal(() => reconcile(p, template2)),
      /template "ubuntu" exists \(version 4\) with another source/,
    );
  });
});
