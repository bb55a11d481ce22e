/**
 * The messages gateway nodes send each other's inboxes through the store's
 * node bus (src/cluster/router.ts routes them). Each is a JSON object, `k`
 * naming the kind; docs/SCALING.md lists them. Short keys: every client
 * frame routed to another node travels as one.
 */
import type { Role } from '../session/audience.js'
import type { ClientFrame } from '../protocol/client-frames.js'
import type { ErrorCode } from '../errors.js'
import type { CallOp } from './routed-session.js'

export type BusMessage =
  | { k: 'attach', s: string, c: string, n: string, r: Role, j?: true }
  | { k: 'detach', s: string, c: string }
  | { k: 'frame', s: string, c: string, n: string, r: Role, j?: true, f: ClientFrame, i: number }
  | { k: 'ack', c: string, i: number }
  | { k: 'send', s: string, c: string, f: string, q?: number, sq?: number }
  | { k: 'moved', s: string, c: string, i?: number, n?: string }
  | { k: 'call', s: string, id: string, n: string, op: CallOp, a: unknown[] }
  | { k: 'reply', id: string, ok: boolean, v?: unknown, moved?: boolean, e?: string, c?: ErrorCode }
  | { k: 'busy', id: string }

/** One kind of message. */
export type BusMessageOf<K extends BusMessage['k']> = Extract<BusMessage, { k: K }>

/** Posts a message to a node's inbox (fire and forget: a failed send is logged). */
export type PostMessage = (node: string, message: BusMessage) => void

/** For a `holder` gateway frame: whether it tells its client that it holds the session; else null. */
export function holderChange (frame: string): boolean | null {
  if (!frame.includes('"holder"')) return null
  try {
    const parsed = JSON.parse(frame) as Record<string, unknown>
    return parsed.type === 'gateway' && parsed.subtype === 'holder' ? parsed.role === 'controller' : null
  } catch {
    return null
  }
}
