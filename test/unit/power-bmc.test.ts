// Goal: prove how a machine's BMC is described and kept secret: ipmi:// addresses are checked
// (scheme, host, port 1-65535, 623 by default) and stored in one form; `--bmc` and the
// credentials file set username and password with errors that never quote the password; the
// password is kept in the hardware input but never in what the API returns (hardwareJson).
// Method: pure functions only; the API's record function is called directly.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { formatBmcAddress, parseBmcAddress } from '../../src/model/bmc-address.js';
import { hardwareJson } from '../../src/api/control-messages.js';
import {
  hardwareFromFlags,
  parseBmcCredentials,
  parseHardwareDocument,
  withBmc,
} from '../../src/workflow/hardware-doc.js';
import type { Hardware } from '../../src/model/records.js';

describe('BMC addresses', () => {
  it('reads ipmi://HOST[:PORT] and a bare host, and writes one form', () => {
    const cases: [string, string][] = [
      ['ipmi://10.0.1.17:6230', 'ipmi://10.0.1.17:6230'],
      ['ipmi://10.0.1.17', 'ipmi://10.0.1.17:623'],
      ['IPMI://bmc-17.lab', 'ipmi://bmc-17.lab:623'],
      ['10.0.1.17', 'ipmi://10.0.1.17:623'],
      ['ipmi://[fd00::17]:623', 'ipmi://[fd00::17]:623'],
    ];
    for (const [text, want] of cases) {
      const endpoint = parseBmcAddress(text);
      assert.ok(!('problem' in endpoint), text);
      assert.equal(formatBmcAddress(endpoint), want);
    }
  });

  it('refuses other schemes, bad hosts and ports, naming the form wanted', () => {
    const cases: [string, RegExp][] = [
      ['', /^is empty$/],
      ['redfish://10.0.1.17', /scheme "redfish"; only ipmi is supported \(want ipmi:\/\/HOST:PORT/],
      ['ipmi://10.0.1.17:0', /the port must be 1-65535/],
      ['ipmi://10.0.1.17:65536', /the port must be 1-65535/],
      ['ipmi://:623', /has no host/],
      ['ipmi://bad_host:623', /is not a host name or IP address/],
      ['ipmi://user@10.0.1.17', /is not a BMC address/],
      ['ipmi://10.0.1.17/path', /is not a BMC address/],
    ];
    for (const [text, why] of cases) {
      const endpoint = parseBmcAddress(text);
      assert.ok('problem' in endpoint, text);
      assert.match(endpoint.problem, why, text);
    }
  });
});

describe('BMC credentials', () => {
  const base = hardwareFromFlags({ id: 'm1', mac: 'aa:bb:cc:dd:ee:01', ip: '10.0.0.5/24' });

  it('reads username:password or two lines; the password may hold a colon on two lines', () => {
    assert.deepEqual(parseBmcCredentials('admin:s3cr:et\n'), { username: 'admin', password: 's3cr:et' });
    assert.deepEqual(parseBmcCredentials('admin\npa:ss\n'), { username: 'admin', password: 'pa:ss' });
    assert.throws(() => parseBmcCredentials('just-one-word\n'), /want "username:password" on one line/);
    assert.throws(() => parseBmcCredentials(''), /want "username:password"/);
  });

  it('--bmc sets the address in stored form; limits are named without quoting the password', () => {
    const input = withBmc(base, { address: 'ipmi://127.0.0.1:9623', username: 'admin', password: 'pw' });
    assert.deepEqual(input.bmc, { address: 'ipmi://127.0.0.1:9623', username: 'admin', password: 'pw' });
    assert.throws(
      () => withBmc(base, { address: 'http://x' }),
      /^Error: --bmc: "http:\/\/x" has the scheme "http"|--bmc: .*scheme "http"/,
    );
    const long = 'p'.repeat(21);
    assert.throws(
      () => withBmc(base, { address: '10.0.0.9', password: long }),
      (e: unknown) =>
        e instanceof Error &&
        /password: must be at most 20 bytes/.test(e.message) &&
        !e.message.includes(long),
    );
  });

  it('the document takes a password; a number is refused without being quoted', () => {
    const doc =
      'id: m1\ninterfaces: [{mac: "aa:bb:cc:dd:ee:01"}]\nbmc: {address: "ipmi://10.0.0.9", password: 123456}\n';
    assert.throws(
      () => parseHardwareDocument(doc),
      (e: unknown) =>
        e instanceof Error &&
        /bmc\.password: must be a string/.test(e.message) &&
        !e.message.includes('123456'),
    );
    const ok = parseHardwareDocument(doc.replace('123456', '"123456"'));
    assert.deepEqual(ok.bmc, { address: 'ipmi://10.0.0.9:623', password: '123456' });
  });

  it('the API never returns the password or the worker token', () => {
    const hw: Hardware = {
      ...withBmc(base, { address: '10.0.0.9', username: 'admin', password: 'never-shown' }),
      workerTokenSha256: 'f'.repeat(64),
      createdMs: 1,
      updatedMs: 1,
      version: 1,
    };
    const json = hardwareJson(hw);
    assert.ok(!json.includes('never-shown'), json);
    assert.deepEqual((JSON.parse(json) as { bmc: unknown }).bmc, {
      address: 'ipmi://10.0.0.9:623',
      username: 'admin',
      passwordSet: true,
    });
  });
});
