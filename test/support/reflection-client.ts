// A gRPC server reflection client as an operator's tool is one (grpcurl, grpcui): it knows the
// reflection protocol and nothing of Slipway. The protocol comes from the published
// reflection.proto that @grpc/reflection ships, never from this repository's proto/ or src/gen;
// clients for the services it discovers are built from the descriptors the server sends.
import { dirname, join } from 'node:path';
import { createRequire } from 'node:module';
import {
  Client,
  credentials,
  loadPackageDefinition,
  Metadata,
  status,
  type ChannelCredentials,
  type GrpcObject,
  type ServiceClientConstructor,
  type StatusObject,
} from '@grpc/grpc-js';
import { loadFileDescriptorSetFromBuffer, loadSync, type MethodDefinition } from '@grpc/proto-loader';

export type ReflectionVersion = 'v1' | 'v1alpha';

/** How long one reflection question may take. */
const askDeadlineMs = 10_000;

/** What a reflection request asks, as proto-loader writes the oneof (field name: value). */
type Question = { readonly listServices: string } | { readonly fileContainingSymbol: string };

/** A reflection answer, as proto-loader reads it with `oneofs: true`. */
interface Answer {
  readonly messageResponse?: string;
  readonly listServicesResponse?: { readonly service: readonly { readonly name: string }[] };
  readonly fileDescriptorResponse?: { readonly fileDescriptorProto: readonly Buffer[] };
  readonly errorResponse?: { readonly errorCode: status; readonly errorMessage: string };
}

/** The server answered a reflection question with an error response (the call itself was OK). */
export class ReflectionRefusal extends Error {
  readonly code: status;
  constructor(code: status, message: string) {
    super(message);
    this.code = code;
  }
}

function isServiceClient(value: unknown): value is ServiceClientConstructor {
  return typeof value === 'function' && 'service' in value;
}

/** The constructor at a full name (`slipway.kv.v1.Kv`) in a loaded package. */
export function serviceClient(pkg: GrpcObject, fullName: string): ServiceClientConstructor {
  let at: unknown = pkg;
  for (const part of fullName.split('.')) {
    at =
      typeof at === 'object' || typeof at === 'function' ? (at as Record<string, unknown>)[part] : undefined;
  }
  if (!isServiceClient(at)) throw new Error(`the descriptors hold no service ${fullName}`);
  return at;
}

/** ServerReflectionInfo as the published reflection.proto of `version` defines it. */
function publishedMethod(version: ReflectionVersion): MethodDefinition<object, object> {
  const root = dirname(createRequire(import.meta.url).resolve('@grpc/reflection/package.json'));
  const file = join(root, 'build', 'proto', 'grpc', 'reflection', version, 'reflection.proto');
  const service = loadSync(file, { oneofs: true })[`grpc.reflection.${version}.ServerReflection`];
  const method = service === undefined || 'format' in service ? undefined : service['ServerReflectionInfo'];
  if (method === undefined) throw new Error(`${file} defines no ServerReflectionInfo`);
  return method;
}

/** One varint, as protobuf writes a length. */
function varint(n: number): Buffer {
  const out: number[] = [];
  let v = n;
  while (v >= 0x80) {
    out.push((v & 0x7f) | 0x80);
    v = Math.floor(v / 128);
  }
  out.push(v);
  return Buffer.from(out);
}

/** Loads the services of serialized FileDescriptorProtos (a FileDescriptorSet is field 1 of each). */
export function packageFromDescriptors(files: readonly Buffer[]): GrpcObject {
  const set = Buffer.concat(files.flatMap((f) => [Buffer.of(0x0a), varint(f.length), f]));
  return loadPackageDefinition(loadFileDescriptorSetFromBuffer(set, { oneofs: true, enums: String }));
}

export class ReflectionClient {
  readonly #client: Client;
  readonly #method: MethodDefinition<object, object>;

  constructor(
    address: string,
    version: ReflectionVersion = 'v1',
    creds: ChannelCredentials = credentials.createInsecure(),
  ) {
    this.#method = publishedMethod(version);
    this.#client = new Client(address, creds);
  }

  /** The full names of the services the server lists. */
  async listServices(): Promise<string[]> {
    const answer = await this.#ask({ listServices: '*' });
    if (answer.listServicesResponse === undefined) throw new Error(`not a list: ${JSON.stringify(answer)}`);
    return answer.listServicesResponse.service.map((s) => s.name).sort();
  }

  /** The descriptors of the file declaring `symbol`, and of every file it imports. */
  async fileContainingSymbol(symbol: string): Promise<Buffer[]> {
    const answer = await this.#ask({ fileContainingSymbol: symbol });
    if (answer.fileDescriptorResponse === undefined) {
      throw new Error(`not descriptors: ${JSON.stringify(answer)}`);
    }
    return [...answer.fileDescriptorResponse.fileDescriptorProto];
  }

  close(): void {
    this.#client.close();
  }

  /** One question on a stream of its own; an error response rejects with ReflectionRefusal. */
  #ask(question: Question): Promise<Answer> {
    return new Promise((resolve, reject) => {
      const m = this.#method;
      const stream = this.#client.makeBidiStreamRequest(
        m.path,
        m.requestSerialize,
        m.responseDeserialize,
        new Metadata(),
        { deadline: Date.now() + askDeadlineMs },
      );
      let answer: Answer | undefined;
      stream.on('data', (a: object) => {
        answer ??= a as Answer;
      });
      stream.on('error', () => undefined);
      stream.on('status', (s: StatusObject) => {
        if (s.code !== status.OK) reject(new Error(`reflection call ended ${s.code}: ${s.details}`));
        else if (answer === undefined) reject(new Error('the reflection call ended without an answer'));
        else if (answer.errorResponse !== undefined) {
          reject(new ReflectionRefusal(answer.errorResponse.errorCode, answer.errorResponse.errorMessage));
        } else resolve(answer);
      });
      stream.write(question);
      stream.end();
    });
  }
}
