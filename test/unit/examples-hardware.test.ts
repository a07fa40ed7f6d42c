// Goal: the hardware file the README and docs point operators at (examples/hardware.yaml) is
// valid as written, says what it claims (a UEFI machine with a reservation and a BMC), and its
// comments name every field the document takes, so the example stays the reference it claims
// to be when a field is added.
// Method: the file through parseHardwareDocument, the parser `hardware create -f` uses.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { parseHardwareDocument } from '../../src/workflow/hardware-doc.js';

const text = readFileSync(new URL('../../examples/hardware.yaml', import.meta.url), 'utf8');

test('examples/hardware.yaml is a valid hardware document', () => {
  const hw = parseHardwareDocument(text);
  assert.equal(hw.id, 'node-17');
  assert.equal(hw.uefi, true);
  assert.equal(hw.interfaces[0]?.mac, '52:54:00:12:34:56');
  assert.deepEqual(hw.interfaces[0]?.ip, { address: '10.0.0.17', prefix: 24 });
  assert.equal(hw.bmc?.address, 'ipmi://10.0.1.17:623');
  assert.deepEqual(hw.metadata, { rack: 'a', role: 'storage' });
});

test('the example shows every top-level and interface field the document takes', () => {
  for (const field of ['id', 'arch', 'uefi', 'interfaces', 'netboot', 'metadata', 'bmc'])
    assert.match(text, new RegExp(`^${field}:`, 'm'), field);
  for (const field of ['mac', 'ip', 'gateway', 'dns', 'hostname', 'leaseTime'])
    assert.match(text, new RegExp(`^ {2,4}(- )?${field}:`, 'm'), field);
});
