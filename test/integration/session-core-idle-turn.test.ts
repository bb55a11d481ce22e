/**
 * The idle timer never ends a session while its CLI runs a turn. The timer
 * armed when the last client left; a turn the CLI then starts on its own
 * (`session_state_changed: running`, as for a background task's
 * notification) makes the session busy again, and the countdown must stop
 * until that turn ends.
 */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { isResult } from '../support/frames.js'
import { eventually, gateway } from '../support/gateway.js'
import { scriptedCli } from '../support/scripted-cli.js'
import { holderOf } from '../support/sessions.js'

// Long enough for the holder to attach before a new session with no client idles out.
const IDLE_MS = 2000

/**
 * A CLI that answers control requests, ends each prompt's turn at once, and
 * after the prompt `later` starts a turn of its own once its stdin has been
 * quiet (no client) for a moment, runs it for 2 idle periods, then ends it.
 */
const CLI = {
  head: "const state = (s) => out({ type: 'system', subtype: 'session_state_changed', state: s, session_id: 's' })",
  onUser: `      state('running')
      out({ type: 'result', subtype: 'success', is_error: false, result: 'ok', session_id: 's' })
      state('idle')
      if (m.message.content === 'later') setTimeout(() => {
        state('running')
        out({ type: 'system', subtype: 'init', session_id: 's' })
        setTimeout(() => {
          out({ type: 'result', subtype: 'success', is_error: false, result: 'own turn done', session_id: 's' })
          state('idle')
        }, ${IDLE_MS * 2})
      }, ${IDLE_MS / 4})`
}

describe('session core: idle timer and a turn the CLI starts', () => {
  it('a turn the CLI starts after the last client left is not cut short by the idle timer', async (t) => {
    const bin = scriptedCli(t, 'own-turn-cli', CLI)
    const gw = await gateway(t, { env: { CLAUDE_BIN: bin, IDLE_TIMEOUT_MS: String(IDLE_MS), CLAUDE_ARGS_EXTRA: '' } })
    const { id, holder } = await holderOf(gw, t)
    holder.sendUser('later')
    await holder.waitFor(isResult)
    holder.terminate()

    // The session ends by itself (idle) at some point: once it has, history says in what order.
    await eventually(async () => (await gw.request('GET', `/v1/sessions/${id}`)).body.status === 'stopped' || undefined, 20_000, 'the session to idle out')
    const events = (await gw.request('GET', `/v1/sessions/${id}/events?limit=1000`)).body.events
    const at = (pred: (f: any) => boolean): number => events.findIndex(pred)
    const ownResult = at((f) => f.type === 'result' && f.result === 'own turn done')
    const stopping = at((f) => f.type === 'gateway' && f.subtype === 'status' && f.status === 'stopping')
    const labels = events.map((f: any) => `${f.type}/${f.subtype ?? ""}${f.state === undefined ? "" : ":" + f.state}${f.status === undefined ? "" : ":" + f.status}`).join(" ")
    assert.ok(stopping >= 0, 'the idle timer stopped the session')
    assert.ok(ownResult >= 0 && ownResult < stopping, `the CLI's own turn ended (result at ${ownResult}) before the idle stop (at ${stopping}): ${labels}`)
  })
})
