/**
 * The metrics registry on its own (src/metrics/): gauges read the source at
 * scrape time, degraded seconds accrue only while the source is degraded,
 * exit labels stay bounded, and TimedStore times failed appends too. The
 * integration test (test/integration/metrics.test.ts) covers the gateway's
 * calls into the sink.
 */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { Metrics, type MetricsSession } from '../../src/metrics/metrics.js'
import { TimedStore } from '../../src/metrics/timed-store.js'
import { MemoryStore } from '../../src/store/memory.js'

/** Value of one sample line `name{labels} value` (labels as printed), or undefined. */
function sample (text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `))
  return line === undefined ? undefined : Number(line.slice(series.length + 1))
}

function session (status: MetricsSession['status'], unsaved = 0, controller = 0, observer = 0): MetricsSession {
  return { status, clientRoles: { controller, observer }, events: { unsavedCount: unsaved } }
}

describe('Metrics', () => {
  it('reads state from its source when scraped', async () => {
    const metrics = new Metrics()
    const loaded = [session('running', 3, 1, 2), session('running', 0, 1, 0), session('stopped')]
    metrics.observe({ runningCount: 2, degraded: false, loaded })
    let { body } = await metrics.scrape()
    assert.equal(sample(body, 'cgw_sessions{status="running"}'), 2)
    assert.equal(sample(body, 'cgw_sessions{status="stopped"}'), 1)
    assert.equal(sample(body, 'cgw_sessions{status="starting"}'), 0, 'every status is exposed')
    assert.equal(sample(body, 'cgw_clis_running'), 2)
    assert.equal(sample(body, 'cgw_clients{role="controller"}'), 2)
    assert.equal(sample(body, 'cgw_clients{role="observer"}'), 2)
    assert.equal(sample(body, 'cgw_store_unsaved_events'), 3)
    loaded.pop()
    body = (await metrics.scrape()).body
    assert.equal(sample(body, 'cgw_sessions{status="stopped"}'), 0)
  })

  it('adds up hot-path counts between scrapes', async () => {
    const metrics = new Metrics()
    metrics.framesOut(3, 100)
    metrics.framesOut(1, 20)
    metrics.cliLine()
    metrics.clientFrame('ok')
    metrics.clientFrame('dropped')
    let { body } = await metrics.scrape()
    assert.equal(sample(body, 'cgw_client_frames_out_total'), 4)
    assert.equal(sample(body, 'cgw_client_bytes_out_total'), 120)
    assert.equal(sample(body, 'cgw_cli_lines_total'), 1)
    assert.equal(sample(body, 'cgw_client_frames_in_total'), 2)
    assert.equal(sample(body, 'cgw_rate_limited_total{kind="ws_frames"}'), 1)
    metrics.framesOut(2, 5)
    body = (await metrics.scrape()).body
    assert.equal(sample(body, 'cgw_client_frames_out_total'), 6, 'a scrape does not lose or repeat counts')
    assert.equal(sample(body, 'cgw_client_bytes_out_total'), 125)
  })

  it('counts degraded seconds only while the source is degraded', async () => {
    let ms = 1000
    const metrics = new Metrics({ now: () => ms })
    const source = { runningCount: 0, degraded: false, loaded: [] as MetricsSession[] }
    metrics.observe(source)
    assert.equal(sample((await metrics.scrape()).body, 'cgw_store_degraded'), 0)
    ms += 5000
    source.degraded = true
    metrics.storeDegradedChanged()
    ms += 1500
    let { body } = await metrics.scrape()
    assert.equal(sample(body, 'cgw_store_degraded'), 1)
    assert.equal(sample(body, 'cgw_store_degraded_seconds_total'), 1.5)
    ms += 500
    source.degraded = false
    metrics.storeDegradedChanged()
    ms += 60_000
    body = (await metrics.scrape()).body
    assert.equal(sample(body, 'cgw_store_degraded'), 0)
    assert.equal(sample(body, 'cgw_store_degraded_seconds_total'), 2, 'the outage, not the time after it')
  })

  it('labels exits with the code as a string and the signal name, "none" when absent', async () => {
    const metrics = new Metrics()
    metrics.cliExited(0, null)
    metrics.cliExited(null, 'SIGKILL')
    metrics.cliExited(null, null)
    const { body } = await metrics.scrape()
    assert.equal(sample(body, 'cgw_cli_exits_total{code="0",signal="none"}'), 1)
    assert.equal(sample(body, 'cgw_cli_exits_total{code="none",signal="SIGKILL"}'), 1)
    assert.equal(sample(body, 'cgw_cli_exits_total{code="none",signal="none"}'), 1)
  })

  it('puts CLI starts in buckets from 50 µs (a request to the spawn helper) to tens of ms (a fork of a large gateway)', async () => {
    const metrics = new Metrics()
    metrics.cliSpawned(0.00003)
    metrics.cliSpawned(0.0008)
    metrics.cliSpawned(0.013)
    const { body } = await metrics.scrape()
    assert.equal(sample(body, 'cgw_cli_spawn_seconds_bucket{le="0.00005"}'), 1)
    assert.equal(sample(body, 'cgw_cli_spawn_seconds_bucket{le="0.0005"}'), 1)
    assert.equal(sample(body, 'cgw_cli_spawn_seconds_bucket{le="0.001"}'), 2)
    assert.equal(sample(body, 'cgw_cli_spawn_seconds_bucket{le="0.01"}'), 2)
    assert.equal(sample(body, 'cgw_cli_spawn_seconds_bucket{le="0.02"}'), 3)
    assert.equal(sample(body, 'cgw_cli_spawn_seconds_count'), 3)
  })
})

describe('TimedStore', () => {
  it('times appends that succeed and appends that fail, and passes them on', async () => {
    const timed: boolean[] = []
    const retention = { maxEventsPerSession: 100, ttlSecondsAfterEnd: 0 }
    const inner = new MemoryStore({ retention })
    const sink = { appendTimed: (seconds: number, ok: boolean) => { assert.ok(seconds >= 0); timed.push(ok) } }
    await new TimedStore(inner, sink).append('s1', [{ seq: 1, frame: '{"seq":1}' }])
    assert.deepEqual((await inner.read('s1', 0, 10)).map((e) => e.seq), [1])

    class Down extends MemoryStore {
      override async append (): Promise<void> { throw new Error('store down') }
    }
    await assert.rejects(new TimedStore(new Down({ retention }), sink).append('s1', [{ seq: 2, frame: '{"seq":2}' }]), /store down/)
    assert.deepEqual(timed, [true, false])
  })
})
