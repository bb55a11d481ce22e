/**
 * The `hello` a client gets first when it attaches: who it is, who holds the
 * session, where the session is, and what its resume from `after` will
 * truly be (the verdict of src/session/replay.ts, with its details).
 */
import type { SessionStatus } from '../store/store.js'
import type { Role } from './audience.js'
import type { SeqRange } from './event-log.js'
import { gatewayFrame } from './frames.js'
import type { ResumePoint, ResumeVerdict } from './replay.js'

/** What an `unavailable` hello suggests waiting before the same resume is tried again. */
export const RETRY_AFTER_MS = 2000

export interface Hello {
  sessionId: string
  clientId: string
  role: Role
  holder: string | null
  status: SessionStatus
  /** The seq committed when the client attached: its replay goes up to it, live frames follow. */
  lastSeq: number
  point: Omit<ResumePoint, 'from'>
  degraded: boolean
  /** Request ids of the CLI control requests pending now. */
  pending: string[]
}

export function helloFrame (h: Hello): string {
  const { resume, oldest, missing } = h.point
  return gatewayFrame('hello', {
    session_id: h.sessionId,
    client_id: h.clientId,
    role: h.role,
    holder: h.holder,
    status: h.status,
    last_seq: h.lastSeq,
    resume,
    oldest_seq: oldest,
    ...verdictFields(resume, missing),
    store: h.degraded ? 'degraded' : 'ok',
    pending_requests: h.pending
  })
}

/** The hello's fields that detail its resume verdict. */
function verdictFields (resume: ResumeVerdict, missing: SeqRange[]): Record<string, unknown> {
  if (resume === 'unavailable') return { retry_after_ms: RETRY_AFTER_MS }
  if (resume !== 'gap') return {}
  return { missing_from: (missing[0] as SeqRange)[0], missing_to: (missing[missing.length - 1] as SeqRange)[1], missing }
}
