// gRPC server reflection (grpc.reflection.v1 and v1alpha) on the API port, so that the tools
// operators already point at gRPC servers (grpcurl, grpcui, Postman, ghz) work without our
// .proto files. @grpc/reflection answers from descriptors, which come from the package's proto/
// folder: only the files that declare a service the API port serves, so the peer protocol
// (raft, internal) is not described. Reflection needs no token (docs/decisions/0025).
// The node checks at start that its proto/ folder declares every served service: a build
// without it refuses to start and says so. The descriptors themselves are parsed at the first
// reflection call (about 0.1 s of CPU, once), not at every start: most nodes are never asked.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  status,
  type MethodDefinition,
  type Server,
  type ServerDuplexStream,
  type ServiceDefinition,
} from '@grpc/grpc-js';
import type { PackageDefinition } from '@grpc/proto-loader';
import type { ReflectionService } from '@grpc/reflection';
import { packageFile } from '../platform/package-file.js';
import { refusingUndecodable } from '../platform/grpc-call-guard.js';
import { ApiError, toServiceError } from './errors.js';

// Both packages are CommonJS: required when first needed, synchronously, from a call's start.
const requireLazily = createRequire(import.meta.url);

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

/** A reflection service as @grpc/reflection defines and implements it. */
interface LoadedService {
  readonly definition: ServiceDefinition;
  readonly implementation: Record<string, unknown>;
}

/** Server reflection over the services the API port serves. */
export class ServerReflection {
  readonly #dir: string;
  readonly #files: readonly string[];
  readonly #services: readonly string[];
  /** Each reflection service as @grpc/reflection defines and implements it, once read. */
  #loaded: Map<string, LoadedService> | undefined;

  private constructor(dir: string, files: readonly string[], services: readonly string[]) {
    this.#dir = dir;
    this.#files = files;
    this.#services = services;
  }

  /**
   * Checks that the .proto files in `dir` declare each of `services` (the reflection services
   * included, to be listed too); throws an error that names the folder if they are not there.
   * The files are parsed at the first reflection call.
   */
  static load(dir: string, services: readonly string[]): ServerReflection {
    return new ServerReflection(dir, protoFilesDeclaring(dir, services), services);
  }

  /**
   * Serves both versions on `server`, their requests checked as every other service's are. Each
   * is served under its own name at once; what decodes, answers and encodes its messages is
   * @grpc/reflection's, read from the descriptors when the first call comes.
   */
  addTo(server: Server): void {
    for (const name of reflectionServiceNames) {
      const method = 'ServerReflectionInfo';
      const real = (): MethodDefinition<unknown, unknown> => {
        const found = this.#load().get(name)?.definition[method];
        if (found === undefined) throw new Error(`@grpc/reflection serves no ${name}/${method}`);
        return found;
      };
      const definition: ServiceDefinition = {
        [method]: {
          path: `/${name}/${method}`,
          requestStream: true,
          responseStream: true,
          requestSerialize: (value: unknown) => real().requestSerialize(value),
          requestDeserialize: (bytes: Buffer) => real().requestDeserialize(bytes),
          responseSerialize: (value: unknown) => real().responseSerialize(value),
          responseDeserialize: (bytes: Buffer) => real().responseDeserialize(bytes),
        },
      };
      server.addService(refusingUndecodable(definition), {
        [method]: (call: ServerDuplexStream<unknown, unknown>) => {
          let handler: unknown;
          try {
            handler = this.#load().get(name)?.implementation[method];
            if (typeof handler !== 'function')
              throw new Error(`@grpc/reflection serves no ${name}/${method}`);
          } catch (err) {
            call.emit('error', toServiceError(new ApiError(status.INTERNAL, (err as Error).message)));
            return;
          }
          (handler as (stream: ServerDuplexStream<unknown, unknown>) => void)(call);
        },
      });
    }
  }

  /** Reads the descriptors and builds @grpc/reflection's services, the first time only. */
  #load(): Map<string, LoadedService> {
    if (this.#loaded !== undefined) return this.#loaded;
    const { loadSync } = requireLazily('@grpc/proto-loader') as typeof import('@grpc/proto-loader');
    const { ReflectionService: Reflection } = requireLazily('@grpc/reflection') as {
      ReflectionService: typeof ReflectionService;
    };
    let loaded: PackageDefinition;
    try {
      loaded = loadSync([...this.#files], { includeDirs: [this.#dir] });
    } catch (err) {
      throw new Error(`cannot read the API's .proto files in ${this.#dir}: ${(err as Error).message}`);
    }
    // Every entry of a loaded definition carries the descriptors of every file, and
    // @grpc/reflection decodes them once per entry: one entry holds them all, once.
    const [first] = Object.keys(loaded);
    const entry = first === undefined ? undefined : loaded[first];
    if (entry === undefined) throw new Error(`the .proto files in ${this.#dir} declare nothing`);
    const one: PackageDefinition = { [String(first)]: entry };
    const services = new Map<string, LoadedService>();
    new Reflection(one, { services: [...this.#services] }).addToServer({
      addService: (definition, implementation) => {
        const path = Object.values(definition)[0]?.path ?? '';
        const name = /^\/([^/]+)\//.exec(path)?.[1] ?? '';
        services.set(name, { definition, implementation });
      },
    });
    this.#loaded = services;
    return services;
  }
}
