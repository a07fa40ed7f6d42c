// Goal: `slipway lab up` refuses a machine spec it cannot build before it touches anything: memory
// outside what the boot OS runs in or not whole 128 MiB blocks, a disk size that does not parse or is not whole sectors, an
// unknown disk bus, more values than machines, an empty item; and each error names the flag.
// Method: the real `slipway` with a --dir that must stay absent (nothing was started or recorded).
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { runSlipway } from '../support/process-cluster.js';

const dir = mkdtempSync(join(tmpdir(), 'slipway-cli-lab-'));
const labDir = join(dir, 'lab');
after(() => rmSync(dir, { recursive: true, force: true }));

describe('slipway lab up refuses a machine spec it cannot build', () => {
  const cases: readonly (readonly [string[], RegExp])[] = [
    [['--memory', '512'], /machine 1: a machine's memory must be 768-16384 MiB .*got 512/],
    [['--machines', '2', '--memory', '1024,99999'], /machine 2: a machine's memory must be 768-16384 MiB/],
    [['--memory', '1000'], /memory must be a multiple of 128 MiB .*got 1000/],
    [['--memory', '1Gi'], /--memory/],
    [['--machines', '2', '--memory', '1024,1024,1024'], /--memory gives 3 values for 2 machine\(s\)/],
    [['--memory', '1024,'], /--memory has an empty item in "1024,"/],
    [['--disk', '2Gx'], /--disk 2Gx: unknown unit "Gx" \(units are Ki Mi/],
    [['--disk', '1000'], /a machine's disk must be whole 512-byte sectors from 16Mi to 2Ti, got 1000 bytes/],
    [['--disk', '4Ti'], /from 16Mi to 2Ti/],
    [['--disk-bus', 'sata'], /--disk-bus must be virtio or scsi, got sata/],
  ];
  for (const [flags, error] of cases) {
    test(flags.join(' '), async () => {
      const r = await runSlipway(['lab', 'up', '--dir', labDir, ...flags]);
      assert.equal(r.code, 2, r.stderr);
      assert.match(r.stderr, error);
      assert.equal(r.stdout, '');
      assert.equal(existsSync(labDir), false, 'nothing recorded');
    });
  }
});
