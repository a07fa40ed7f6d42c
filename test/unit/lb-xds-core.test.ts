// Goal: the pure xDS core (lb/xds/) speaks state-of-the-world ADS as Envoy's xds_protocol.rst
// says: a first request of a type is answered, an ACK gets nothing more, a NACK is noted and the
// same content is not sent again, a stale nonce is ignored, a membership or health change sends
// only the types whose content changed (in CDS, EDS, LDS, RDS order), a wildcard subscription
// (Envoy) gets the socket listener and a named one (gRPC) the api_listener; versions are equal
// for equal content; requests out of bounds are refused. Members' health follows fall/rise.
// Method: AdsStream and MemberHealthTracker driven directly, without sockets; responses decoded
// with the generated (subset) messages.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { AdsRequest, AdsResponse } from '../../lb/xds/ads-stream.js';
import { AdsRequestError, AdsStream, resourceNamesMax } from '../../lb/xds/ads-stream.js';
import { MemberHealthTracker } from '../../lb/xds/member-health.js';
import type { XdsMember } from '../../lb/xds/resources.js';
import {
  envoyListenKey,
  envoyListenerName,
  ipSocket,
  xdsServiceName,
  xdsTypeUrl,
} from '../../lb/xds/resources.js';
import { ClusterLoadAssignment, HealthStatus, Listener } from '../../src/gen/xds.js';

const members: XdsMember[] = [
  { id: 'n1', apiAddr: '127.0.0.1:7001', health: 'HEALTHY' },
  { id: 'n2', apiAddr: '127.0.0.1:7002', health: 'HEALTHY' },
  { id: 'n3', apiAddr: '127.0.0.1:7003', health: 'HEALTHY' },
];

function req(typeUrl: string, over: Partial<AdsRequest> = {}): AdsRequest {
  return { typeUrl, resourceNames: [xdsServiceName], versionInfo: '', responseNonce: '', ...over };
}

function ack(r: AdsResponse, names = [xdsServiceName]): AdsRequest {
  return req(r.typeUrl, { resourceNames: names, versionInfo: r.versionInfo, responseNonce: r.nonce });
}

function only(responses: readonly AdsResponse[]): AdsResponse {
  assert.equal(responses.length, 1, `expected one response, got ${responses.length}`);
  return responses[0]!;
}

function endpointsOf(r: AdsResponse): [string, number][] {
  const cla = ClusterLoadAssignment.decode(r.resources[0]!.value);
  return cla.endpoints[0]!.lbEndpoints.map((e) => [e.endpoint!.hostname, e.healthStatus]);
}

describe('one ADS stream', () => {
  test('answers the first request of each type, and nothing more on its ACK', () => {
    const s = new AdsStream(members);
    for (const typeUrl of Object.values(xdsTypeUrl)) {
      const r = only(s.request(req(typeUrl, { node: { id: 'grpc-client' } })).responses);
      assert.equal(r.typeUrl, typeUrl);
      assert.equal(r.resources.length, 1);
      assert.equal(r.resources[0]!.typeUrl, typeUrl);
      const step = s.request(ack(r));
      assert.deepEqual(step.responses, []);
      assert.deepEqual(step.notes, [{ kind: 'ack', typeUrl, version: r.versionInfo }]);
    }
  });

  test('a NACK is noted and the same content is not sent again', () => {
    const s = new AdsStream(members);
    const r = only(s.request(req(xdsTypeUrl.cluster)).responses);
    const step = s.request({ ...ack(r), versionInfo: '', errorDetail: { code: 3, message: 'bad cluster' } });
    assert.deepEqual(step.responses, []);
    assert.deepEqual(step.notes, [
      { kind: 'nack', typeUrl: xdsTypeUrl.cluster, version: r.versionInfo, message: 'bad cluster' },
    ]);
  });

  test('a request with a stale nonce is ignored', () => {
    const s = new AdsStream(members);
    const first = only(s.request(req(xdsTypeUrl.endpoints)).responses);
    s.request(ack(first));
    const second = only(s.update([members[0]!, members[1]!]));
    // An ACK of the first response arriving after the second was sent.
    const step = s.request(ack(first));
    assert.deepEqual(step.responses, []);
    assert.deepEqual(step.notes, [{ kind: 'stale', typeUrl: xdsTypeUrl.endpoints, nonce: first.nonce }]);
    assert.notEqual(second.nonce, first.nonce);
  });

  test('a health change sends new endpoints only; a member removed leaves them', () => {
    const s = new AdsStream(members);
    const responses = Object.values(xdsTypeUrl).map((t) => only(s.request(req(t)).responses));
    for (const r of responses) s.request(ack(r));
    const drained = members.map((m) => (m.id === 'n2' ? { ...m, health: 'DRAINING' as const } : m));
    const r = only(s.update(drained));
    assert.equal(r.typeUrl, xdsTypeUrl.endpoints);
    assert.deepEqual(endpointsOf(r), [
      ['n1', HealthStatus.HEALTH_STATUS_HEALTHY],
      ['n2', HealthStatus.HEALTH_STATUS_DRAINING],
      ['n3', HealthStatus.HEALTH_STATUS_HEALTHY],
    ]);
    s.request(ack(r));
    assert.deepEqual(s.update(drained), [], 'the same content again sends nothing');
    const down = members.map((m) => (m.id === 'n3' ? { ...m, health: 'UNHEALTHY' as const } : m));
    assert.deepEqual(endpointsOf(only(s.update(down))), [
      ['n1', HealthStatus.HEALTH_STATUS_HEALTHY],
      ['n2', HealthStatus.HEALTH_STATUS_HEALTHY],
      ['n3', HealthStatus.HEALTH_STATUS_UNHEALTHY],
    ]);
    assert.deepEqual(endpointsOf(only(s.update(members.slice(0, 2)))), [
      ['n1', HealthStatus.HEALTH_STATUS_HEALTHY],
      ['n2', HealthStatus.HEALTH_STATUS_HEALTHY],
    ]);
  });

  test('two streams (two nodes) send the same version for the same content', () => {
    const a = only(new AdsStream(members).request(req(xdsTypeUrl.endpoints)).responses);
    const b = only(new AdsStream([...members]).request(req(xdsTypeUrl.endpoints)).responses);
    assert.equal(a.versionInfo, b.versionInfo);
    const c = only(new AdsStream(members.slice(1)).request(req(xdsTypeUrl.endpoints)).responses);
    assert.notEqual(a.versionInfo, c.versionInfo);
  });

  test('Envoy (wildcard, with its listen address) gets the socket listener; gRPC the api_listener', () => {
    const envoy = new AdsStream(members);
    const node = {
      id: 'envoy-1',
      metadata: { fields: { [envoyListenKey]: { stringValue: '0.0.0.0:7000' } } },
    };
    const lds = only(envoy.request(req(xdsTypeUrl.listener, { resourceNames: [], node })).responses);
    assert.deepEqual(
      lds.resources.map((r) => Listener.decode(r.value).name),
      [envoyListenerName],
    );
    const socket = Listener.decode(lds.resources[0]!.value);
    assert.deepEqual(socket.address?.socketAddress, { address: '0.0.0.0', portValue: 7000 });
    const cds = only(envoy.request(req(xdsTypeUrl.cluster, { resourceNames: [] })).responses);
    assert.equal(cds.resources.length, 1);

    const grpc = new AdsStream(members);
    const named = only(grpc.request(req(xdsTypeUrl.listener, { node: { id: 'w' } })).responses);
    const api = Listener.decode(named.resources[0]!.value);
    assert.equal(api.name, xdsServiceName);
    assert.ok(api.apiListener?.apiListener !== undefined);
    // A gRPC client never subscribes by wildcard, but if one did it would get no listener.
    const wild = new AdsStream(members);
    assert.equal(
      only(wild.request(req(xdsTypeUrl.listener, { resourceNames: ['*'] })).responses).resources.length,
      0,
    );
  });

  test('a changed subscription is answered; an unknown name selects nothing', () => {
    const s = new AdsStream(members);
    const r = only(s.request(req(xdsTypeUrl.cluster)).responses);
    const other = only(s.request(ack(r, [xdsServiceName, 'other'])).responses);
    assert.equal(other.resources.length, 1);
    const none = only(s.request(ack(other, ['other'])).responses);
    assert.equal(none.resources.length, 0);
  });

  test('unknown types are noted and not answered; oversized requests are refused', () => {
    const s = new AdsStream(members);
    assert.deepEqual(s.request(req('type.googleapis.com/example.Unknown')), {
      responses: [],
      notes: [{ kind: 'unknown-type', typeUrl: 'type.googleapis.com/example.Unknown' }],
    });
    const many = Array.from({ length: resourceNamesMax + 1 }, (_, i) => `r${i}`);
    assert.throws(() => s.request(req(xdsTypeUrl.cluster, { resourceNames: many })), AdsRequestError);
    assert.throws(
      () => s.request(req(xdsTypeUrl.cluster, { resourceNames: ['x'.repeat(300)] })),
      /longer than/,
    );
  });

  test('members whose API address is a host name are left out of the endpoints', () => {
    const s = new AdsStream([...members, { id: 'n4', apiAddr: 'node4.example:7004', health: 'HEALTHY' }]);
    assert.equal(endpointsOf(only(s.request(req(xdsTypeUrl.endpoints)).responses)).length, 3);
    assert.deepEqual(ipSocket('[::1]:7001'), { address: '::1', portValue: 7001 });
    assert.equal(ipSocket('not an address'), undefined);
  });
});

describe('member health', () => {
  test('a member enters after rise passes; fall misses take it out, rise bring it back, one miss changes nothing', () => {
    const t = new MemberHealthTracker({ fall: 2, rise: 2 });
    assert.equal(t.health('n1'), 'UNHEALTHY', 'not probed yet');
    assert.equal(t.observe('n1', 'serving'), false);
    assert.equal(t.observe('n1', 'serving'), true);
    assert.equal(t.health('n1'), 'HEALTHY');
    assert.equal(t.observe('n1', 'unreachable'), false);
    assert.equal(t.observe('n1', 'serving'), false);
    assert.equal(t.observe('n1', 'unreachable'), false);
    assert.equal(t.observe('n1', 'unreachable'), true);
    assert.equal(t.health('n1'), 'UNHEALTHY');
    // Out already: answering NOT_SERVING says why at once.
    assert.equal(t.observe('n1', 'not-serving'), true);
    assert.equal(t.health('n1'), 'DRAINING');
    assert.equal(t.observe('n1', 'serving'), false);
    assert.equal(t.observe('n1', 'serving'), true);
    assert.equal(t.health('n1'), 'HEALTHY');
  });

  test('NOT_SERVING drains; a member forgotten starts afresh, out', () => {
    const t = new MemberHealthTracker({ fall: 1, rise: 1 });
    assert.equal(t.observe('n2', 'not-serving'), true);
    assert.equal(t.health('n2'), 'DRAINING');
    assert.equal(t.observe('n2', 'serving'), true);
    t.retain(new Set(['n1']));
    assert.equal(t.health('n2'), 'UNHEALTHY', 'forgotten: out until probed again');
  });
});
