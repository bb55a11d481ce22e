/**
 * What a client's frame asks of the session where its CLI may run: control
 * requests go to the control plane (which knows who may ask what); anything
 * that writes to the CLI is the holder's alone; a user message starts the CLI
 * when it is stopped, reaches it once per uuid, and is recorded before the
 * CLI's answer to it. Problems go back to that client: a refused
 * control_request as a control_response error with its request_id, anything
 * else as an error frame.
 */
import { type ErrorCode, type GatewayError, errorTable } from '../errors.js'
import type { AnswerInput, AnswerResult } from '../control/control-effects.js'
import type { ControlPlane } from '../control/control-plane.js'
import type { RecentIds } from '../control/recent-ids.js'
import type { ClientFrame, KeepAliveFrame } from '../protocol/client-frames.js'
import type { Audience, ClientPort } from './audience.js'
import type { EventLog } from './event-log.js'
import { errorFrame, gatewayFrame } from './frames.js'

export interface ClientInputHost {
  readonly id: string
  readonly audience: Audience
  readonly control: ControlPlane<ClientPort>
  readonly events: EventLog
  /** Uuids of the messages written to the CLI (a resent message's copy is dropped). */
  readonly seenUuids: RecentIds
  cliState: () => 'stopped' | 'stopping' | 'running'
  /** Starts the CLI; the reason when it may not. */
  start: () => GatewayError | null
  /** A message goes to the CLI: a turn runs. */
  turnStarted: () => void
  answer: (requestId: string, input: AnswerInput, by: string) => AnswerResult
}

export class ClientInput {
  readonly #h: ClientInputHost

  constructor (host: ClientInputHost) {
    this.#h = host
  }

  handle (port: ClientPort, frame: Exclude<ClientFrame, KeepAliveFrame>): void {
    const h = this.#h
    if (frame.type === 'control_request') { h.control.clientRequest(port, frame, h.audience.isHolder(port)); return }
    const fail = (code: ErrorCode, message?: string, extra: Record<string, unknown> = {}): void =>
      h.audience.send(port, errorFrame(code, message ?? errorTable[code].message, extra))
    if (!h.audience.isHolder(port)) {
      const requestId = frame.type === 'control_response' ? frame.response.request_id : frame.type === 'control_cancel_request' ? frame.request_id : undefined
      fail('not_holder', undefined, requestId === undefined ? {} : { request_id: requestId })
      return
    }
    if (frame.type === 'other_type' || frame.type === 'control_cancel_request') {
      const refused = frame.type === 'other_type' ? h.control.checkOtherType(frame.value) : null
      if (refused !== null) { fail(refused.code, refused.message); return }
      // The CLI decides what they mean (it ignores types it does not know): as sent, once it runs.
      if (h.cliState() !== 'running') return
      h.control.toCli(frame.type === 'other_type' ? frame.value : frame)
      return
    }
    if (frame.type === 'user') {
      // Before the uuid is remembered: a refused message was never forwarded.
      const refusedText = h.control.checkUserMessage(frame.message.content)
      if (refusedText !== null) { fail(refusedText.code, refusedText.message); return }
      // A message resent after a reconnect (same uuid) reaches the CLI once.
      if (frame.uuid !== undefined && h.seenUuids.seen(frame.uuid)) return
      const state = h.cliState()
      if (state === 'stopped') {
        const refused = h.start()
        if (refused !== null) { fail(refused.code, refused.message); return }
      } else if (state === 'stopping') {
        fail('session_not_running', 'The session is stopping; send again once it has stopped')
        return
      }
      h.turnStarted()
      const parent = frame.parent_tool_use_id ?? null
      // History holds the conversation: what was asked, by whom, before the CLI's answer to it.
      h.events.push((s) => gatewayFrame('user_message', {
        client_id: port.id,
        ...(frame.uuid === undefined ? {} : { uuid: frame.uuid }),
        message: frame.message,
        parent_tool_use_id: parent
      }, s))
      h.control.toCli({ ...frame, session_id: h.id, parent_tool_use_id: parent })
      return
    }
    const result = h.answer(frame.response.request_id, frame.response, port.id)
    if (!result.ok) fail(result.code, result.message, { request_id: frame.response.request_id })
  }
}
