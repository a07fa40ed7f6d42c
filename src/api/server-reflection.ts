// gRPC server reflection (grpc.reflection.v1 and v1alpha) on the API port, so that the tools
// operators already point at gRPC servers (grpcurl, grpcui, Postman, ghz) work without our
// .proto files. @grpc/reflection answers from descriptors, which come from the package's proto/
// folder: only the files that declare a service the API port serves, so the peer protocol
// (raft, internal) is not described. Reflection needs no token (docs/decisions/0025).
// The descriptors are read when the node starts, before anything else: a build without its
// proto/ folder refuses to start and says so, rather than failing at the first call, and the
// parse (tens of milliseconds) never stalls a running node's event loop.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Server } from '@grpc/grpc-js';
import { loadSync, type PackageDefinition } from '@grpc/proto-loader';
import { ReflectionService } from '@grpc/reflection';
import { packageFile } from '../platform/package-file.js';
import { refusingUndecodable } from '../platform/grpc-call-guard.js';

/** The reflection services, as served: both versions answer alike. */
export const reflectionServiceNames = [
  'grpc.reflection.v1.ServerReflection',
  'grpc.reflection.v1alpha.ServerReflection',
] as const;

/** The package's proto/ folder, found from the running module (sources or a compiled build). */
export function packageProtoDir(): string {
  return fileURLToPath(packageFile('proto'));
}

/** The .proto files in `dir` that declare each of `services`; throws naming what is missing. */
export function protoFilesDeclaring(dir: string, services: readonly string[]): string[] {
  if (!existsSync(dir)) {
    throw new Error(
      `the API's .proto files are not in ${dir}: server reflection describes the API from them. ` +
        'They ship in the package beside src/ (and dist/); reinstall the package or copy its proto/ folder there',
    );
  }
  const declaredIn = new Map<string, string>();
  for (const file of readdirSync(dir).filter((name) => name.endsWith('.proto'))) {
    const text = readFileSync(join(dir, file), 'utf8');
    const pkg = /^package\s+([\w.]+)\s*;/m.exec(text)?.[1];
    for (const match of text.matchAll(/^service\s+(\w+)\s*\{/gm)) {
      declaredIn.set(pkg === undefined ? `${match[1]}` : `${pkg}.${match[1]}`, file);
    }
  }
  const missing = services.filter((s) => !declaredIn.has(s));
  if (missing.length > 0) {
    throw new Error(
      `no .proto file in ${dir} declares ${missing.join(', ')}: the folder is not this build's; ` +
        "reinstall the package or copy this build's proto/ folder there",
    );
  }
  return [...new Set(services.map((s) => declaredIn.get(s) ?? ''))].sort();
}

/** Server reflection over the services the API port serves. */
export class ServerReflection {
  readonly #service: ReflectionService;

  private constructor(service: ReflectionService) {
    this.#service = service;
  }

  /**
   * Reads the descriptors of `services` (the reflection services included, to be listed too)
   * from the .proto files in `dir`; throws an error that names the folder if they are not there.
   */
  static load(dir: string, services: readonly string[]): ServerReflection {
    const files = protoFilesDeclaring(dir, services);
    let loaded: PackageDefinition;
    try {
      loaded = loadSync(files, { includeDirs: [dir] });
    } catch (err) {
      throw new Error(`cannot read the API's .proto files in ${dir}: ${(err as Error).message}`);
    }
    // Every entry of a loaded definition carries the descriptors of every file, and
    // @grpc/reflection decodes them once per entry: one entry holds them all, once.
    const [first] = Object.keys(loaded);
    const entry = first === undefined ? undefined : loaded[first];
    if (entry === undefined) throw new Error(`the .proto files in ${dir} declare nothing`);
    const one: PackageDefinition = { [String(first)]: entry };
    return new ServerReflection(new ReflectionService(one, { services: [...services] }));
  }

  /** Serves both versions on `server`, their requests checked as every other service's are. */
  addTo(server: Server): void {
    this.#service.addToServer({
      addService: (definition, implementation) => {
        server.addService(refusingUndecodable(definition), implementation);
      },
    });
  }
}
