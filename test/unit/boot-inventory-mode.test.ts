// Goal: which boots are inventory boots (docs/decisions/0029): an inspecting machine always; with
// --discovery, a MAC no machine has (as the machine it would be enrolled as, once the cluster runs
// at state version 3) and an enrolled machine with no inventory; never a ready one. An inventory
// boot's iPXE script is the generated one, with slipway.mode=inventory, whatever custom script
// the machine's own boots use.
// Method: inventoryOf over a ControlState driven through apply (test/support/lifecycle-harness.ts),
// and renderIpxeScript on its records.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { inventoryOf } from '../../src/node/boot-services.js';
import { defaultBootArtifacts, renderIpxeScript } from '../../src/boot/http/ipxe-script.js';
import { LifecycleHarness, operator } from '../support/lifecycle-harness.js';

const settings = {
  httpBaseUrl: 'http://10.0.0.100:8080',
  apiAddress: '10.0.0.100:7001',
  artifacts: defaultBootArtifacts,
  extraKernelArgs: [],
};

describe('inventory boots', () => {
  it('an unknown MAC boots in inventory mode only with discovery, at state version 3', () => {
    const h = new LifecycleHarness();
    assert.equal(inventoryOf(h.state).byMac('52:54:00:aa:00:01'), undefined);
    const found = inventoryOf(h.state, true).byMac('52:54:00:aa:00:01');
    assert.ok(found !== undefined);
    assert.equal(found?.mode, 'inventory');
    assert.equal(found?.hardware.id, 'discovered-525400aa0001');
    const script = renderIpxeScript(found, settings);
    assert.match(script.text, /slipway\.worker_id=discovered-525400aa0001 /);
    assert.match(script.text, / slipway\.mode=inventory\n/);
    assert.match(script.text, /in inventory mode/);
    assert.equal(inventoryOf(new LifecycleHarness(2).state, true).byMac('52:54:00:aa:00:01'), undefined);
  });

  it('a known machine: inspecting always, enrolled without an inventory with discovery, ready never', () => {
    const h = new LifecycleHarness();
    h.machine('m1', 1);
    const mac = '02:00:00:00:00:01';
    assert.equal(inventoryOf(h.state).byMac(mac)?.mode, undefined);
    assert.equal(inventoryOf(h.state, true).byMac(mac)?.mode, 'inventory');
    h.ok({ type: 'hardware.lifecycle', id: 'm1', verb: 'accept', reason: 'ok', audit: operator }, 'hardware');
    assert.equal(inventoryOf(h.state, true).byMac(mac)?.mode, undefined);
    h.ok({ type: 'hardware.lifecycle', id: 'm1', verb: 'inspect', reason: 'x', audit: operator }, 'hardware');
    const inspecting = inventoryOf(h.state).byMac(mac);
    assert.ok(inspecting !== undefined);
    assert.equal(inspecting?.mode, 'inventory');
    const custom = {
      ...inspecting,
      hardware: {
        ...inspecting.hardware,
        netboot: { allowPXE: true, allowWorkflow: true, ipxeScript: 'exit' },
      },
    };
    assert.equal(renderIpxeScript(custom, settings).kind, 'generated');
    assert.equal(
      renderIpxeScript({ hardware: custom.hardware, iface: custom.iface }, settings).kind,
      'custom',
    );
  });
});
