/**
 * Node-wide batching of event-log appends on one Redis connection (issue 14,
 * "one write path for the whole node").
 *
 * Each session already keeps at most one append in flight (EventLog), so a
 * loud session batches by itself. Many quiet sessions do not: at 100
 * sessions × 100 lines/s, lines of different sessions rarely arrive in the
 * same tick, and each went to Redis as its own command, each costing a
 * command object, a script call and a reply on both sides. The gate clocks
 * appends by the connection's round trip instead: while one wave is in
 * flight, appends of other sessions wait; when it is answered, every waiting
 * append leaves in one wave: the jobs merged into as few commands as their
 * size allows (one script call for many streams), written with the socket
 * corked. With nothing in flight, a wave leaves at the end of the current
 * event-loop turn (setImmediate, after the I/O callbacks of that turn), so
 * the sessions whose CLIs printed in the same turn share it; at 100 sessions
 * × 100 lines/s the round trip is often shorter than the gap between lines,
 * and waves clocked by it alone carried one or two appends. A line waits at
 * most the rest of its turn and one round trip more than before, and per
 * session order is unchanged (the gate only delays the start of a session's
 * single append in flight).
 *
 * Not a lock: nothing here is exclusive, and a failed wave releases the gate
 * like a successful one; its error reaches only the appends it carried.
 */

/** The writable side of the connection, corked while a wave is written. */
export interface CorkableStream {
  cork: () => void
  uncork: () => void
}

export interface AppendGateOptions<J, R> {
  /** The connection's socket now (a reconnect replaces it), or null when there is none to cork. */
  stream: () => CorkableStream | null
  /**
   * Writes jobs as one command, issued synchronously at the call; resolves
   * with one result per job, in order.
   */
  writeMany: (jobs: J[]) => Promise<R[]>
  /** A job's weight (e.g. frame characters): a command stops growing past `maxWeight`. */
  weight: (job: J) => number
  maxWeight: number
  /** A command carries at most this many jobs. */
  maxJobs: number
}

interface Waiting<J, R> {
  job: J
  resolve: (result: R) => void
  reject: (err: unknown) => void
}

export class AppendGate<J, R> {
  readonly #o: AppendGateOptions<J, R>
  #inFlight = 0
  #jobs: Array<Waiting<J, R>> = []
  #writes: Array<() => void> = []
  /** A release is scheduled for the end of this event-loop turn. */
  #scheduled = false

  constructor (options: AppendGateOptions<J, R>) {
    this.#o = options
  }

  /** Appends waiting for the wave in flight. */
  get waiting (): number {
    return this.#jobs.length + this.#writes.length
  }

  /** Queues a job to be merged with the others of its wave; resolves with its own result. */
  async submit (job: J): Promise<R> {
    return await new Promise<R>((resolve, reject) => {
      this.#jobs.push({ job, resolve, reject })
      this.#schedule()
    })
  }

  /**
   * Runs `write` (an append that cannot be merged, e.g. one too large for one
   * command; its commands are issued synchronously at its start) in the next
   * wave, beside the merged jobs.
   */
  async run<T> (write: () => Promise<T>): Promise<T> {
    return await new Promise<T>((resolve, reject) => {
      this.#writes.push(() => { this.#track(write()).then(resolve, reject) })
      this.#schedule()
    })
  }

  /** With nothing in flight, the waiting appends leave at the end of this turn (else the answer releases them). */
  #schedule (): void {
    if (this.#inFlight > 0 || this.#scheduled) return
    this.#scheduled = true
    setImmediate(() => {
      this.#scheduled = false
      if (this.#inFlight === 0 && this.waiting > 0) this.#release()
    })
  }

  #release (): void {
    // splice, not a fresh `[]` per wave: see EventLog.#drain (an array
    // literal V8 pretenures keeps the young jobs it held alive until a mark-compact).
    const jobs = this.#jobs.splice(0)
    const writes = this.#writes.splice(0)
    const many = jobs.length + writes.length > 1
    const stream = many ? this.#o.stream() : null
    stream?.cork()
    for (const group of this.#groups(jobs)) this.#send(group)
    for (const start of writes) start()
    stream?.uncork()
  }

  /** Splits a wave's jobs into commands of at most maxJobs jobs and (past the first job) maxWeight. */
  #groups (jobs: Array<Waiting<J, R>>): Array<Array<Waiting<J, R>>> {
    const groups: Array<Array<Waiting<J, R>>> = []
    let group: Array<Waiting<J, R>> = []
    let weight = 0
    for (const w of jobs) {
      const size = this.#o.weight(w.job)
      if (group.length > 0 && (group.length >= this.#o.maxJobs || weight + size > this.#o.maxWeight)) {
        groups.push(group)
        group = []
        weight = 0
      }
      group.push(w)
      weight += size
    }
    if (group.length > 0) groups.push(group)
    return groups
  }

  #send (group: Array<Waiting<J, R>>): void {
    let written: Promise<R[]>
    try {
      written = this.#o.writeMany(group.map((w) => w.job))
    } catch (err) {
      written = Promise.reject(err)
    }
    this.#track(written).then((results) => {
      group.forEach((w, i) => { w.resolve(results[i] as R) })
    }, (err: unknown) => {
      for (const w of group) w.reject(err)
    })
  }

  /** Counts a command in flight until it is answered; the last answer releases the next wave. */
  async #track<T> (answer: Promise<T>): Promise<T> {
    this.#inFlight++
    try {
      return await answer
    } finally {
      if (--this.#inFlight === 0 && this.waiting > 0) this.#release()
    }
  }
}
