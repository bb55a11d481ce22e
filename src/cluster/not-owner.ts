/**
 * The error a call routed to another node rejects with when that node does
 * not own the session: callers (src/session/owner-calls.ts) match it by
 * name and handle the request themselves. Re-exported by router.ts.
 */

/** The owner does not own the session (any more): the caller handles the request itself. */
export class NotOwner extends Error {
  constructor () {
    super('the node asked does not own the session')
    this.name = 'NotOwner'
  }
}
