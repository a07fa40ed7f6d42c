import { copyFile, mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { it } from 'node:test';
import { NetnsLab } from '/work/main/test/support/netns.js';
import { NetnsCluster } from '/work/main/test/support/netns-cluster.js';

const fw = process.env['FW'] ?? 'bios';
it('proto', { timeout: 200_000 }, async () => {
  const lab = await NetnsLab.create();
  try {
    const srv = await lab.addNamespace('srv');
    await lab.addBridge(srv, 'br0', ['10.77.1.1/24', 'fd77:1::1/64']);
    await lab.addTap(srv, 'tap0', 'br0');
    await lab.advertiseIpv6(srv, 'br0', 'fd77:1::/64');
    const artifacts = path.join(lab.dir, 'artifacts');
    await mkdir(artifacts);
    await writeFile(path.join(artifacts, 'vmlinuz-x86_64'), 'marker: the script ran\n');
    await writeFile(path.join(artifacts, 'initramfs-x86_64'), 'marker\n');
    const cluster = await NetnsCluster.start(lab, [{ id: 'n1', ns: srv, address: '10.77.1.1', args: ['--dhcp-interface', 'br0', '--tftp-addr', '10.77.1.1:69', '--http-addr', '10.77.1.1:8080', '--artifacts-dir', artifacts] }]);
    await cluster.waitForLeader(srv, 20000);
    const mac = fw === 'bios' ? '52:54:00:77:01:02' : '52:54:00:77:01:03';
    console.log(await cluster.slipwayOk(srv, ['hardware', 'create', '--id', 'vm', '--mac', mac, '--ip', '10.77.1.60/24', '--gateway', '10.77.1.1', ...(fw === 'uefi' ? ['--uefi'] : [])]));
    const vars = path.join(lab.dir, 'OVMF_VARS.fd');
    await copyFile('/usr/share/OVMF/OVMF_VARS_4M.fd', vars);
    const fwArgs = fw === 'bios' ? ['-device', `e1000,netdev=n0,mac=${mac}`, ...(process.env['EXTRA'] ?? '').split(' ').filter(Boolean)] : ['-drive', 'if=pflash,format=raw,readonly=on,file=/usr/share/OVMF/OVMF_CODE_4M.fd', '-drive', `if=pflash,format=raw,file=${vars}`, '-device', `virtio-net-pci,netdev=n0,mac=${mac},romfile=`];
    const qemu = lab.spawn(srv, ['qemu-system-x86_64', '-accel', 'tcg', '-m', '256', '-display', 'none', '-serial', 'stdio', '-monitor', 'none', '-no-reboot', '-boot', 'n', '-netdev', 'tap,id=n0,ifname=tap0,script=no,downscript=no', ...fwArgs]);
    const t0 = Date.now();
    await qemu.waitForOutput((o) => o.includes('vmlinuz'), Number(process.env['WAIT'] ?? 60000), 'x').catch((e: unknown) => console.log(String(e)));
    console.log('ELAPSED', Date.now() - t0);
    await new Promise((r) => setTimeout(r, 3000));
    console.log('CONSOLE', JSON.stringify(qemu.output.slice(-3000)));
    console.log(cluster.nodes[0]!.logRecords().filter((r) => r.level <= 20 || /DHCP|HTTP|iPXE/.test(r.msg)).map((r) => JSON.stringify(r)).join('\n'));
  } finally {
    await lab.destroy();
  }
});
