// `slipway bootos build`: the in-memory OS machines boot into (src/bootos/build.ts).
import type { Command } from '@commander-js/extra-typings';
import { wholeNumber } from '../flags.js';
import { UsageError } from '../output.js';

export function bootosCommand(program: Command): void {
  const bootos = program.command('bootos').description('the in-memory OS that machines network-boot into');
  bootos
    .command('build')
    .description(
      "build the boot OS from this machine's Debian packages (linux-image-amd64, busybox-static, zstd; " +
        'kexec-tools for the kexec action; qemu-utils and qemu-block-extra for qemuimg2disk; fdisk, ' +
        'e2fsprogs, dosfstools and xfsprogs for rootio; syslinux and mtools for the syslinux action: ' +
        'each carried when installed) and its Node.js runtime: DIR/vmlinuz-x86_64, ' +
        'DIR/initramfs-x86_64 and DIR/manifest.json. The same inputs give the same bytes.\n\n' +
        'Examples:\n' +
        '  slipway bootos build --out /var/lib/slipway/bootos --ca /etc/slipway/pki/ca.crt\n' +
        '  slipway bootos build --out out/ --node /opt/node-v24/bin/node   # the worker runs on Node 24',
    )
    .requiredOption('--out <dir>', 'where to write the kernel, the initramfs and the manifest')
    .option('--arch <arch>', 'x86_64 (arm64: see docs/decisions/0016-boot-os.md)', 'x86_64')
    .option('--kernel-version <version>', 'a kernel under /lib/modules (default: the newest installed)')
    .option(
      '--ca <file>',
      'the cluster CA (ca.crt from `slipway bootstrap`): the worker then speaks TLS to the nodes',
    )
    .option('--level <n>', 'zstd compression level, 1-19', '12')
    .option(
      '--node <path>',
      'the Node.js runtime the worker runs on in the boot OS (20.19 or later; default: the one running this command)',
    )
    .action(async (o) => {
      if (o.arch !== 'x86_64') {
        throw new UsageError(
          `--arch ${o.arch}: only x86_64 is built here; arm64 is described in docs/decisions/0016-boot-os.md`,
        );
      }
      const { buildBootOs } = await import('../../bootos/index.js');
      const manifest = await buildBootOs({
        outDir: o.out,
        arch: 'x86_64',
        compressionLevel: wholeNumber(o.level, '--level'),
        ...(o.kernelVersion === undefined ? {} : { kernelVersion: o.kernelVersion }),
        ...(o.ca === undefined ? {} : { caFile: o.ca }),
        ...(o.node === undefined ? {} : { nodeBinary: o.node }),
        progress: (line) => process.stderr.write(`bootos: ${line}\n`),
      });
      process.stdout.write(`${JSON.stringify(manifest)}\n`);
    });
}
