// The boot services' states as the node reports them: in Status (`cluster status`), as
// grpc.health.v1 services (slipway.boot.dhcp, .tftp, .http, and slipway.boot for all of them)
// and, through metrics.ts, as slipway_boot_service_state. Service "" stays the API's health
// (balancers route API calls by it): a node whose DHCP waits for its link still answers the API.
import { BootServiceState as BootServiceStateProto, type BootServiceStatus } from '../gen/kv.js';
import type { BootHost } from './boot-services.js';
import { bootServiceNames, type BootServiceName, type BootServiceStates } from '../boot/service-state.js';
import type { ServerConfig } from './config.js';

/** The grpc.health.v1 name of one boot service, and of all of them together. */
export const bootHealthName = (name: BootServiceName): string => `slipway.boot.${name}`;
export const bootHealthAll = 'slipway.boot';

/** The boot services `cfg` configures, in the order of bootServiceNames. */
export function configuredBootServices(cfg: ServerConfig): BootServiceName[] {
  const on: Record<BootServiceName, boolean> = {
    dhcp: cfg.dhcpInterface !== undefined || cfg.dhcpAddr !== undefined,
    tftp: cfg.tftpAddr !== undefined,
    http: cfg.httpAddr !== undefined,
  };
  return bootServiceNames.filter((n) => on[n]);
}

/**
 * Health checks by service name for the configured boot services: each SERVING only while it
 * serves (not while it waits or after a failed bind), and slipway.boot while all of them do.
 */
export function bootHealthChecks(
  cfg: ServerConfig,
  boot: { readonly states: BootServiceStates },
): Map<string, () => boolean> {
  const names = configuredBootServices(cfg);
  const servingNow = (n: BootServiceName): boolean => boot.states.get(n)?.status.state === 'serving';
  const checks = new Map<string, () => boolean>(names.map((n) => [bootHealthName(n), () => servingNow(n)]));
  if (names.length > 0) checks.set(bootHealthAll, () => names.every(servingNow));
  return checks;
}

const stateToProto = {
  serving: BootServiceStateProto.BOOT_SERVICE_STATE_SERVING,
  waiting: BootServiceStateProto.BOOT_SERVICE_STATE_WAITING,
  failed: BootServiceStateProto.BOOT_SERVICE_STATE_FAILED,
} as const;

/** The states as Status carries them. */
export function bootServiceReport(states: BootServiceStates): BootServiceStatus[] {
  return [...states.values()].map((s) => ({
    name: s.name,
    state: stateToProto[s.status.state],
    reason: s.status.state === 'serving' ? '' : s.status.reason,
  }));
}

/** For a node with no boot service: no interfaces to follow. */
export const noBootHost: BootHost = {
  links: { subscribe: (listener) => (listener(new Map()), () => undefined) },
  addresses: { subscribe: (listener) => (listener([]), () => undefined) },
};
