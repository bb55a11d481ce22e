/**
 * The owner's record of the clients other nodes attached to the sessions it
 * owns: each is a RemotePort of the session, kept while its node repeats the
 * attachment (a heartbeat) and forgotten three missed beats later, so an
 * owner does not keep clients of a node that died.
 */
import type { Role } from '../session/audience.js'
import { holderChange, type PostMessage } from './bus-message.js'
import { RemotePort } from './remote-port.js'
import type { RoutedSession } from './routed-session.js'

export interface RemoteClientsOptions {
  post: PostMessage
  /** A session loaded on this node, if any. */
  find: (sessionId: string) => RoutedSession | undefined
  /** How often client nodes repeat their attachments. */
  heartbeatMs: number
}

interface Remote { port: RemotePort, sessionId: string, seen: number }

export class RemoteClients {
  readonly #o: RemoteClientsOptions
  /** Clients of other nodes attached to sessions owned here, by client id. */
  readonly #remote = new Map<string, Remote>()
  /** When the heartbeat last ran (a late one means this node was paused). */
  #lastBeat = 0

  constructor (options: RemoteClientsOptions) {
    this.#o = options
  }

  /** The heartbeat starts now. */
  start (): void {
    this.#lastBeat = Date.now()
  }

  /**
   * The owner's port for a client of another node, attached on first sight (an attach may have been lost);
   * `rejoin`: routed here again after the session moved (Session.attachRemote).
   */
  port (sessionId: string, client: string, node: string, role: Role, session: RoutedSession, rejoin = false): RemotePort {
    const known = this.#remote.get(client)
    if (known !== undefined && known.sessionId === sessionId) {
      known.seen = Date.now()
      return known.port
    }
    const port = new RemotePort(client, (frame, seq) => {
      // A holder change carries the seq committed now: the owner redelivers the prompts pending up
      // to it (ControlPlane.holderChanged, in the same turn); the client's node those after it.
      const upTo = holderChange(frame) === true ? session.events?.committedSeq : undefined
      const q = upTo === undefined ? {} : { q: upTo }
      this.#o.post(node, { k: 'send', s: sessionId, c: client, f: frame, ...q, ...(seq === undefined ? {} : { sq: seq }) })
    })
    this.#remote.set(client, { port, sessionId, seen: Date.now() })
    session.attachRemote(port, role, { rejoin })
    return port
  }

  /** The client's node detached it from `sessionId`. */
  detach (sessionId: string, client: string): void {
    const remote = this.#remote.get(client)
    if (remote === undefined) return
    this.#remote.delete(client)
    this.#o.find(sessionId)?.detach(remote.port)
  }

  /** Drops the remote clients of a session this node stopped owning (they attach again where it runs next). */
  drop (sessionId: string): void {
    for (const [id, remote] of this.#remote) if (remote.sessionId === sessionId) this.#remote.delete(id)
  }

  /** At each heartbeat: detaches the clients whose node has not repeated their attachment for three beats. */
  beat (): void {
    const now = Date.now()
    // A beat this late means this node was paused (SIGSTOP, a VM freeze, a blocked loop): timers
    // run before the inbox is read, where the clients' repeated attachments wait. Their silence
    // was this node's: they count as seen now (a dead node's clients go three beats later).
    const paused = now - this.#lastBeat > 2 * this.#o.heartbeatMs
    this.#lastBeat = now
    if (paused) for (const remote of this.#remote.values()) remote.seen = Math.max(remote.seen, now)
    const expired = now - 3 * this.#o.heartbeatMs
    for (const [id, remote] of this.#remote) {
      if (remote.seen >= expired) continue
      this.#remote.delete(id)
      this.#o.find(remote.sessionId)?.detach(remote.port)
    }
  }
}
