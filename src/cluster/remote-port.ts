/**
 * A client of another gateway node, as the owner's session sees it. What
 * the session sends it one by one (errors, control responses, holder
 * changes, prompts redelivered to a new holder) goes to the client's node;
 * recorded frames it is not sent at all (`remote`): its node follows the
 * session's log in the store and relays them with the right rendering.
 */
import type { ClientPort } from '../session/audience.js'

export class RemotePort implements ClientPort {
  readonly id: string
  readonly remote = true
  readonly #post: (frame: string, seq?: number) => void

  /** `post` gets a frame's seq when it is recorded (a redelivered prompt): its node orders it after a replay. */
  constructor (id: string, post: (frame: string, seq?: number) => void) {
    this.id = id
    this.#post = post
  }

  send (data: string | Buffer, seq?: number): void {
    this.#post(typeof data === 'string' ? data : data.toString('utf8'), seq)
  }
}
