/**
 * The webhook signature as docs/WEBHOOKS.md tells receivers to check it:
 * HMAC-SHA256 over `<timestamp>.<raw body>`, hex, `v1=` prefixed. The
 * expected values are computed here with node:crypto from that description,
 * not with the code under test; verifyWebhook is the documented check.
 */
import assert from 'node:assert/strict'
import { createHmac } from 'node:crypto'
import { describe, it } from 'node:test'
import { signWebhook, verifyWebhook } from '../../src/webhooks/signature.js'

const SECRET = 'whsec-test-0123456789abcdef0123456789'
const BODY = '{"id":"d1","type":"turn.finished","data":{"text":"héllo"}}'
const NOW = 1_790_000_000

/** The documented algorithm, spelled out independently. */
function documented (secret: string, timestamp: number, body: string): string {
  return 'v1=' + createHmac('sha256', secret).update(`${timestamp}.${body}`, 'utf8').digest('hex')
}

describe('webhook signature', () => {
  it('is v1= and the hex HMAC-SHA256 of "<timestamp>.<body>" (body as string or as received bytes)', () => {
    const sig = signWebhook(SECRET, NOW, BODY)
    assert.match(sig, /^v1=[0-9a-f]{64}$/)
    assert.equal(sig, documented(SECRET, NOW, BODY))
    assert.equal(signWebhook(SECRET, NOW, Buffer.from(BODY)), sig)
    assert.notEqual(signWebhook(SECRET, NOW + 1, BODY), sig, 'the timestamp is signed')
    assert.notEqual(signWebhook(`${SECRET}x`, NOW, BODY), sig)
  })

  it('verifies a fresh, untouched request and says why others fail', () => {
    const ok = { secret: SECRET, timestamp: String(NOW), signature: documented(SECRET, NOW, BODY), body: BODY, now: NOW + 10 }
    assert.equal(verifyWebhook(ok), null)
    assert.equal(verifyWebhook({ ...ok, body: Buffer.from(BODY) }), null)
    assert.equal(verifyWebhook({ ...ok, body: BODY.replace('héllo', 'hello') }), 'no signature matches')
    assert.equal(verifyWebhook({ ...ok, secret: `${SECRET}x` }), 'no signature matches')
    assert.equal(verifyWebhook({ ...ok, timestamp: String(NOW + 1) }), 'no signature matches', 'a timestamp moved forward breaks the signature')
    assert.equal(verifyWebhook({ ...ok, now: NOW + 301 }), 'timestamp outside the tolerance', 'a replay after the window')
    assert.equal(verifyWebhook({ ...ok, now: NOW - 301 }), 'timestamp outside the tolerance')
    assert.equal(verifyWebhook({ ...ok, now: NOW + 301, toleranceSeconds: 600 }), null)
    assert.equal(verifyWebhook({ ...ok, timestamp: undefined }), 'missing or malformed timestamp')
    assert.equal(verifyWebhook({ ...ok, timestamp: '12a' }), 'missing or malformed timestamp')
    assert.equal(verifyWebhook({ ...ok, signature: undefined }), 'missing signature')
    assert.equal(verifyWebhook({ ...ok, signature: ok.signature.slice(0, -2) }), 'no signature matches')
  })

  it('accepts a header with several space-separated entries when one matches (secret rotation)', () => {
    const old = documented('old-secret-0123456789abcdef0123456789', NOW, BODY)
    const input = { secret: SECRET, timestamp: String(NOW), body: BODY, now: NOW }
    assert.equal(verifyWebhook({ ...input, signature: `${old} ${documented(SECRET, NOW, BODY)}` }), null)
    assert.equal(verifyWebhook({ ...input, signature: old }), 'no signature matches')
  })
})
