// Goal: every spelling of a MAC that boot clients put in a URL (colons, iPXE's percent-encoded
// colons, dashes from ${mac:hexhyp}, bare hex, either case, a .ipxe suffix) reaches the same
// machine, and nothing else does; artifact and binary names come out decoded for the file
// server to judge.
// Method: routeOf and canonicalMac over tables of paths and spellings.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { canonicalMac } from '../../src/boot/inventory.js';
import { ipxeScriptPath, joinBaseUrl, routeOf } from '../../src/boot/http/paths.js';

const mac = '52:54:00:ab:cd:ef';

describe('canonicalMac', () => {
  it('accepts the spellings boot clients use', () => {
    for (const text of [mac, '52-54-00-AB-CD-EF', '525400abcdef', '5254.00ab.cdef', '52:54:00:AB:cd:EF']) {
      assert.equal(canonicalMac(text), mac, text);
    }
  });

  it('refuses anything that is not one 48-bit address', () => {
    for (const text of [
      '',
      '52:54:00:ab:cd',
      '52:54:00:ab:cd:ef:01',
      '52:54-00:ab:cd:ef',
      'zz:54:00:ab:cd:ef',
      '5254',
    ]) {
      assert.equal(canonicalMac(text), undefined, text);
    }
  });
});

describe('routeOf', () => {
  it('routes every script URL form to the canonical MAC', () => {
    for (const path of [
      ipxeScriptPath(mac),
      '/ipxe/52%3A54%3A00%3Aab%3Acd%3Aef',
      '/ipxe/52-54-00-ab-cd-ef',
      '/ipxe/52-54-00-AB-CD-EF.ipxe',
      `/ipxe/${mac}.ipxe`,
      '/ipxe/525400abcdef',
    ]) {
      assert.deepEqual(routeOf(path), { kind: 'ipxe-script', mac }, path);
    }
  });

  it('sends unknown shapes to not-found', () => {
    for (const path of [
      '/',
      '/ipxe/',
      '/ipxe/not-a-mac',
      '/ipxe/%zz',
      '/ipxe/52:54:00:ab:cd:ef/x',
      '/artifacts/',
      '/other',
    ]) {
      assert.equal(routeOf(path).kind, 'not-found', path);
    }
  });

  it('decodes artifact and binary names without judging them', () => {
    assert.deepEqual(routeOf('/artifacts/vmlinuz-x86_64'), { kind: 'artifact', name: 'vmlinuz-x86_64' });
    assert.deepEqual(routeOf('/artifacts/a%20b/c'), { kind: 'artifact', name: 'a b/c' });
    assert.deepEqual(routeOf('/artifacts/%2e%2e/etc/passwd'), { kind: 'artifact', name: '../etc/passwd' });
    assert.deepEqual(routeOf('/binaries/ipxe.efi'), { kind: 'binary', name: 'ipxe.efi' });
  });

  it('joins base URLs with or without a trailing slash', () => {
    assert.equal(joinBaseUrl('http://h:8080/', '/ipxe/x'), 'http://h:8080/ipxe/x');
    assert.equal(joinBaseUrl('http://h:8080', '/ipxe/x'), 'http://h:8080/ipxe/x');
  });
});
