/**
 * Container healthcheck (Dockerfile HEALTHCHECK, docker/compose.yaml): reads
 * GET /readyz and fails only when the event store is not ok or the gateway
 * is shutting down. /readyz also answers 503 when MAX_SESSIONS CLIs run; a
 * full gateway is healthy (it still serves every session it has), so the
 * status code alone is not the verdict: its JSON body is.
 * Exit 0 healthy, 1 unhealthy (no answer within 2.5 s counts as unhealthy).
 */
/* global fetch */
const port = process.env.PORT || '8080'
// Under HEALTHCHECK --timeout=3s: a hung answer is a failure of our own, not Docker's kill.
setTimeout(() => process.exit(1), 2500)
try {
  const res = await fetch(`http://127.0.0.1:${port}/readyz`)
  const body = await res.json()
  process.exit(body?.store?.state === 'ok' && body.shutting_down === false ? 0 : 1)
} catch {
  process.exit(1)
}
