/**
 * What the cluster router (router.ts) needs of a session loaded on this
 * node, and the HTTP calls one node may ask of a session's owner. Kept apart
 * so the router's parts share one definition; router.ts re-exports them.
 */
import type { ClientPort, Role } from '../session/audience.js'
import type { ClientFrame } from '../protocol/client-frames.js'

/** What the router needs of the sessions on this node. */
export interface RoutedSession {
  readonly owned: boolean
  /** `rejoin`: a client routed here again after the session moved, not one that just attached (it holds only if nobody does). */
  attachRemote: (port: ClientPort, role: Role, options?: { rejoin?: boolean }) => void
  detach: (port: ClientPort) => void
  handleFrame: (port: ClientPort, frame: ClientFrame) => void
  /**
   * The owner says a client here holds (or no longer holds) the session;
   * `upTo`: the seq the owner had committed when it said so (it redelivers
   * the prompts pending up to there itself).
   */
  remoteHolder: (port: ClientPort, holds: boolean, upTo?: number) => void
  /**
   * The node this client's frames went to does not own the session (any
   * more), or did not confirm them in time (it died or hangs): handle
   * `frames` here again, in order (the session may have stopped; the lease
   * of a dead owner lapses, and then the CLI starts here).
   */
  ownerMoved: (port: ClientPort, frames: ClientFrame[]) => void
  /** On the owner: an HTTP call made on another node (answer a prompt, stop, list pending prompts). */
  call: (op: SessionCallOp, args: unknown[]) => Promise<unknown>
  /** On a client's node: a frame the owner sent the client alone; `seq` when it is recorded (a redelivered prompt). */
  fromOwner?: (port: ClientPort, frame: string, seq?: number) => void
  /** The session's log: on the owner, what it has committed (sent with a holder change). */
  readonly events?: { readonly committedSeq: number }
}

/** The calls that act on one session (the rest act on the node). */
export type SessionCallOp = Exclude<CallOp, 'create'>

/** What another node may ask of a session's owner on behalf of an HTTP request. */
export type CallOp = 'answer' | 'stop' | 'pending' | 'snapshot' | 'create'
