// The full name of the service a generated grpc-js definition belongs to, as health checks and
// server reflection name it.
import type { ServiceDefinition } from '@grpc/grpc-js';

/** `slipway.kv.v1.Kv` for the definition whose methods are `/slipway.kv.v1.Kv/Put`, ... */
export function serviceNameOf(definition: ServiceDefinition): string {
  const [method] = Object.values(definition);
  const name = method === undefined ? undefined : /^\/([^/]+)\//.exec(method.path)?.[1];
  if (name === undefined) throw new Error('a service definition without methods names no service');
  return name;
}
