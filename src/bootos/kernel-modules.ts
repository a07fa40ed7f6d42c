// Which kernel modules the boot OS carries and the order its init loads them in. Pure: the
// text of the kernel's modules.dep in, module paths out.
//
// Debian's kernel builds almost every NIC, disk and filesystem driver as a module, so the boot
// OS must bring them with their dependencies. The init has only busybox's insmod (no modprobe
// database), so the order is decided here: every module after all of its dependencies.

/** The drivers a machine being provisioned is likely to need: NICs, disk controllers, filesystems. */
export const bootModules: readonly string[] = [
  // virtual machines
  'virtio_pci',
  'virtio_net',
  'virtio_blk',
  'virtio_scsi',
  // NICs
  'e1000',
  'e1000e',
  'igb',
  'ixgbe',
  'mlx5_core',
  // disks
  'nvme',
  'ahci',
  'ata_piix',
  'sd_mod',
  'sr_mod',
  // filesystems the actions write (writefile, kexec)
  'ext4',
  'vfat',
  'nls_cp437',
  // Debian's FAT default iocharset: without it every vfat mount fails with EINVAL.
  'nls_ascii',
  'nls_iso8859_1',
  'nls_utf8',
  // the BMC through the machine's own IPMI interface (KCS, SMIC or BT; found by ACPI or SMBIOS):
  // /dev/ipmi0, which inventory mode asks for the BMC's LAN address (ipmitool lan print)
  'ipmi_si',
  'ipmi_devintf',
];

/** A module's name as modprobe spells it: the file name without .ko, "-" read as "_". */
export function moduleName(path: string): string {
  const file = path.slice(path.lastIndexOf('/') + 1);
  return file.replace(/\.ko(\.(xz|zst|gz))?$/, '').replaceAll('-', '_');
}

/** modules.dep: `path: dep dep ...`, paths relative to /lib/modules/VERSION. */
export function parseModulesDep(text: string): Map<string, { path: string; deps: string[] }> {
  const modules = new Map<string, { path: string; deps: string[] }>();
  for (const line of text.split('\n')) {
    const colon = line.indexOf(':');
    if (colon <= 0) continue;
    const path = line.slice(0, colon).trim();
    const deps = line
      .slice(colon + 1)
      .trim()
      .split(/\s+/)
      .filter((d) => d !== '');
    modules.set(moduleName(path), { path, deps });
  }
  return modules;
}

/**
 * The module files to load for `wanted`, dependencies first, each once. Names the kernel has
 * built in (modules.builtin) need nothing; a name that is neither is an error, since a boot OS
 * silently without its disk driver would fail far from the cause.
 */
export function moduleLoadOrder(
  wanted: readonly string[],
  modulesDep: string,
  modulesBuiltin: string,
): string[] {
  const modules = parseModulesDep(modulesDep);
  const builtin = new Set(
    modulesBuiltin
      .split('\n')
      .filter((l) => l.trim() !== '')
      .map(moduleName),
  );
  const byPath = new Map([...modules.values()].map((m) => [m.path, m]));
  const order: string[] = [];
  const placed = new Set<string>();
  const visit = (path: string, trail: readonly string[]): void => {
    if (placed.has(path)) return;
    if (trail.includes(path))
      throw new Error(`kernel modules: dependency cycle ${[...trail, path].join(' -> ')}`);
    const module = byPath.get(path);
    if (module === undefined)
      throw new Error(`kernel modules: ${path} is named in modules.dep but not listed`);
    for (const dep of module.deps) visit(dep, [...trail, path]);
    placed.add(path);
    order.push(path);
  };
  for (const name of wanted) {
    const module = modules.get(moduleName(name));
    if (module !== undefined) visit(module.path, []);
    else if (!builtin.has(moduleName(name))) {
      throw new Error(`kernel modules: ${name} is neither a module of this kernel nor built in`);
    }
  }
  return order;
}
