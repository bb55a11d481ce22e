/**
 * A client attaching to a session here: its hello (who it is, who holds the
 * session, what its resume truly is, which prompts are pending as of the
 * hello's last_seq), then its replay from `after`, then live frames. Where
 * another node runs the CLI, the client becomes that node's client too.
 */
import { isFinal } from '../store/store.js'
import type { ClientPort, Role } from './audience.js'
import { RETRY_AFTER_MS, helloFrame } from './hello-frame.js'
import { type PendingFrame, replay, resumePoint } from './replay.js'
import type { SessionParts } from './session-parts.js'

export interface AttachOptions {
  role: Role
  /**
   * A controller reconnecting that did not hold the session when its link
   * dropped: the newest controller wins only on a fresh attach (PROTOCOL.md),
   * so it holds the session only if nobody does, else it waits as the next
   * candidate (as Session.attachRemote's `rejoin`, which it becomes on the
   * node running the CLI when that is another).
   */
  rejoin?: boolean | undefined
  /** Replay every frame after this seq first (none: live frames only). */
  after?: number | undefined
  /** Runs right after the hello is sent, before the replay. */
  onHello?: () => void
}

/**
 * Attaches `port` to the session `p` holds the parts of (Session.attach):
 * `hello` first, then with `after` every frame after that seq (from the
 * store), then live ones: no gap, no duplicate. Resolves once the replay is sent.
 */
export async function attachClient (p: SessionParts, port: ClientPort, options: AttachOptions): Promise<void> {
  const { audience, events, follower, control } = p
  const att = audience.add(port, options.role)
  p.idle.disarm()
  follower.follow()
  // Where another node runs the CLI, the prompts pending are those the followed log leaves open
  // (this node's control plane has none): known before upTo is taken, and read with it.
  const followed = !p.owned() && p.route !== undefined
  if (followed) {
    await follower.knowOpen()
    if (!audience.has(port)) return
  }
  const upTo = events.committedSeq
  // As of upTo, where the replay stops: a prompt answered since is open in it, one asked since comes live.
  const pending = followed && !p.owned() ? follower.openIds : p.unstored.openAsOf(upTo, control.list())
  const wait = { waitMs: p.deps.limits.resumeWaitMs, gone: () => !audience.has(port) }
  const { from, resume, oldest, missing } = await resumePoint(events, options.after, upTo, wait)
  if (!audience.has(port)) return
  // A client about to be ended (no replay possible yet) never takes the session from its holder;
  // nor does one here while another node runs the CLI (its frames could not reach it).
  const elsewhere = !p.owned() && !isFinal(p.record.status)
  const takes = options.role === 'controller' && resume !== 'unavailable' && !elsewhere && (options.rejoin !== true || audience.holder === null)
  if (takes) audience.hold(att)
  const holder = audience.holder
  audience.send(port, helloFrame({
    sessionId: p.id,
    clientId: port.id,
    role: holder === att ? 'controller' : 'observer',
    holder: holder?.port.id ?? null,
    status: p.record.status,
    lastSeq: upTo,
    point: { resume, oldest, missing },
    degraded: events.degraded,
    pending
  }))
  if (resume === 'unavailable') {
    att.backlog = null
    port.end?.('store_unavailable', `event store unavailable: reconnect with ?after=${options.after ?? 0} in ${RETRY_AFTER_MS} ms`)
    return
  }
  att.greeted = true
  if (takes) audience.announceHolder(att)
  // Running on another node: this client joins that node's session (its frames go there, the holder rules are its).
  if (elsewhere) void follower.routeClient(port, options.role, options.rejoin === true)
  options.onHello?.()
  // Where another node runs the CLI, the prompts pending are those the followed log leaves open.
  const pendingNow = (): readonly PendingFrame[] => !p.owned() && p.route !== undefined ? follower.openRequests : control.list()
  const noticedUpTo = await replay(att, from, upTo, { events, audience, log: p.log, wait, pending: pendingNow, after: options.after })
  if (noticedUpTo !== null && audience.holder === att) control.holderChanged(att.port, noticedUpTo)
}
