// Goal: kexec without KERNEL_PATH finds the kernel, initrds and command line GRUB would boot by
// default, from grub.cfg as grub-mkconfig writes it (Debian 12; Ubuntu with a separate /boot,
// GRUB_DEFAULT=saved, $vt_handoff), with grubenv's saved_entry and next_entry, defaults given as an
// index, an id, a title or a path through a submenu; and a grub.cfg from which no default entry
// can be read is refused saying what was looked for.
// Method: the pure reader (src/worker/actions/grub-config.ts) on files under testdata/grub.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, test } from 'node:test';
import { defaultBootEntry, GrubConfigError, splitWords } from '../../src/worker/actions/grub-config.js';

const testdata = (name: string): string =>
  readFileSync(new URL(`testdata/grub/${name}`, import.meta.url), 'utf8');
const debian = testdata('debian-12.cfg');
const ubuntu = testdata('ubuntu-separate-boot.cfg');
const uuid = '4f6b1a2c-6a53-4c1e-9b5e-0c1d2e3f4a5b';

function refusal(f: () => unknown): string {
  try {
    f();
  } catch (err) {
    assert.ok(err instanceof GrubConfigError, String(err));
    return err.message;
  }
  assert.fail('expected a refusal');
}

describe("Debian's generated grub.cfg", () => {
  test('set default="0" (next_entry unset): the first entry, its kernel, initrd and command line', () => {
    assert.deepEqual(defaultBootEntry(debian), {
      entry: ['Debian GNU/Linux'],
      kernel: '/boot/vmlinuz-6.1.0-18-amd64',
      initrds: ['/boot/initrd.img-6.1.0-18-amd64'],
      cmdLine: `root=UUID=${uuid} ro quiet`,
    });
  });

  test("grubenv's next_entry names an entry in the submenu by index path", () => {
    const boot = defaultBootEntry(debian, '# GRUB Environment Block\nnext_entry=1>2\n###########\n');
    assert.deepEqual(boot.entry, [
      'Advanced options for Debian GNU/Linux',
      'Debian GNU/Linux, with Linux 6.1.0-13-amd64',
    ]);
    assert.equal(boot.kernel, '/boot/vmlinuz-6.1.0-13-amd64');
  });

  test('ids and titles name entries too, through the submenu', () => {
    const byId = defaultBootEntry(
      debian,
      `next_entry=gnulinux-advanced-${uuid}>gnulinux-6.1.0-18-amd64-recovery-${uuid}\n`,
    );
    assert.equal(byId.cmdLine, `root=UUID=${uuid} ro single`);
    const byTitle = defaultBootEntry(debian.replace('set default="0"', 'set default="Debian GNU/Linux"'));
    assert.deepEqual(byTitle.entry, ['Debian GNU/Linux']);
  });

  test('a default naming no entry, a submenu, or an entry without linux is refused saying why', () => {
    assert.match(
      refusal(() => defaultBootEntry(debian.replace('set default="0"', 'set default="7"'))),
      /^default "7" names no entry: "7" is neither an index below 3 nor the id or title of one of menuentry "Debian GNU\/Linux" \(id gnulinux-simple-/,
    );
    assert.match(
      refusal(() => defaultBootEntry(debian.replace('set default="0"', 'set default="1"'))),
      /names the submenu "Advanced options for Debian GNU\/Linux", not an entry in it/,
    );
    assert.match(
      refusal(() => defaultBootEntry(debian.replace('set default="0"', 'set default="2"'))),
      /the default entry "UEFI Firmware Settings" \(default "2"\) has no linux line \(looked for linux, linux16 or linuxefi\)/,
    );
  });
});

describe('Ubuntu with /boot on its own partition, GRUB_DEFAULT=saved', () => {
  test('no saved_entry: entry 0; paths relative to the /boot filesystem; $vt_handoff expanded', () => {
    assert.deepEqual(defaultBootEntry(ubuntu), {
      entry: ['Ubuntu'],
      kernel: '/vmlinuz-6.8.0-31-generic',
      initrds: ['/initrd.img-6.8.0-31-generic'],
      cmdLine: 'root=UUID=0d1e2f3a-1111-2222-3333-444455556666 ro quiet splash vt.handoff=7',
    });
  });

  test('saved_entry picks the older kernel: its device prefix dropped, both initrds kept in order', () => {
    const boot = defaultBootEntry(
      ubuntu,
      'saved_entry=Advanced options for Ubuntu>Ubuntu, with Linux 6.5.0-9-generic\n',
    );
    assert.equal(boot.kernel, '/vmlinuz-6.5.0-9-generic');
    assert.deepEqual(boot.initrds, ['/intel-ucode.img', '/initrd.img-6.5.0-9-generic']);
  });
});

describe('other shapes', () => {
  test('a hand-written grub.cfg: default by id, --id, no initrd, a linux16 line', () => {
    const cfg = [
      'set default=rescue',
      'set timeout=1',
      "menuentry 'Normal' --id normal {",
      '  linux /boot/vmlinuz root=/dev/sda1',
      '}',
      'menuentry "Rescue" --id rescue {',
      '  linux16 /boot/vmlinuz-rescue root=/dev/sda1 console=ttyS0,115200 single',
      '}',
    ].join('\n');
    assert.deepEqual(defaultBootEntry(cfg), {
      entry: ['Rescue'],
      kernel: '/boot/vmlinuz-rescue',
      initrds: [],
      cmdLine: 'root=/dev/sda1 console=ttyS0,115200 single',
    });
  });

  test('no menuentry at all (a BLS config, an empty file) is refused saying what was looked for', () => {
    assert.match(
      refusal(() => defaultBootEntry('set default=0\nblscfg\n')),
      /no menuentry in it \(looked for `menuentry TITLE \.\.\. \{` lines\)/,
    );
    assert.match(
      refusal(() => defaultBootEntry('')),
      /no menuentry/,
    );
  });

  test("words split as GRUB's reader splits them", () => {
    const vars = new Map([['root', 'hd0,gpt2']]);
    assert.deepEqual(splitWords(`linux\t/vmlinuz a='b c' "x\${root}" \\"q $unset # comment`, vars), [
      'linux',
      '/vmlinuz',
      'a=b c',
      'xhd0,gpt2',
      '"q',
    ]);
  });
});
