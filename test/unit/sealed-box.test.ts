// Goal: a credential sealed for a claim's key opens only with that key, and any change to the
// box is detected (GCM), so the boot network's listeners learn nothing and cannot swap it.
// Method: seal/open round trips with fresh keys; tampered boxes; malformed public keys.
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { describe, it } from 'node:test';
import { isPublicKey, openingKey, seal } from '../../src/platform/sealed-box.js';

describe('sealed box', () => {
  it('opens with the recipient key only', () => {
    const recipient = openingKey();
    const box = seal(Buffer.from('credential-123'), recipient.publicKey);
    assert.equal(recipient.open(box).toString('utf8'), 'credential-123');
    assert.ok(!box.ciphertext.includes(Buffer.from('credential-123').toString('base64url')));
    assert.throws(() => openingKey().open(box));
  });

  it('detects a changed ciphertext, nonce or sender key', () => {
    const recipient = openingKey();
    const box = seal(Buffer.from('credential-123'), recipient.publicKey);
    const flip = (text: string): string => (text[0] === 'A' ? 'B' : 'A') + text.slice(1);
    assert.throws(() => recipient.open({ ...box, ciphertext: flip(box.ciphertext) }));
    assert.throws(() => recipient.open({ ...box, nonce: flip(box.nonce) }));
    assert.throws(() => recipient.open({ ...box, publicKey: openingKey().publicKey }));
    assert.throws(() => recipient.open({ ...box, ciphertext: 'AA' }), /too short/);
  });

  it('a kept key opens what was sealed to the original, and only an X25519 key is taken back', () => {
    const first = openingKey();
    const kept = openingKey(first.privateKeyPem);
    assert.equal(kept.publicKey, first.publicKey);
    assert.equal(kept.open(seal(Buffer.from('again'), first.publicKey)).toString('utf8'), 'again');
    const ed25519 = generateKeyPairSync('ed25519').privateKey.export({ format: 'pem', type: 'pkcs8' });
    assert.throws(() => openingKey(ed25519.toString()), /not an X25519 key/);
    assert.throws(() => openingKey('not a key'));
  });

  it('refuses what is not a raw X25519 public key', () => {
    assert.ok(isPublicKey(openingKey().publicKey));
    for (const bad of ['', 'A'.repeat(42), 'A'.repeat(44), `${'A'.repeat(42)}=`, '!'.repeat(43)]) {
      assert.equal(isPublicKey(bad), false, bad);
      assert.throws(() => seal(Buffer.from('x'), bad), /not a raw X25519 public key/);
    }
  });
});
