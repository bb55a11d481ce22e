// The scripted local model of `npm run demo` (and of the console's browser
// test): answers the real CLI's Messages API requests through the offline
// stand-in (test/support/mock-anthropic.ts), so a newcomer sees streamed
// text, a tool call and a permission prompt with no API key and no network.
//
//   a tool result came back       → a streamed summary of what the tool said
//   "file", "create", "tool", "run" → thinking, a sentence, then a Bash tool call
//                                   (the CLI asks permission: the console's dialog)
//   "long", "story", "slow"       → a long answer streamed slowly (time to interrupt)
//   anything else                  → a streamed greeting that says what to try
import {
  type MockReply,
  findToolResults,
  lastUserText,
  text,
  toolUse
} from '../test/support/mock-anthropic.js'

/** The command the demo's tool call runs in the session's workspace. */
export const DEMO_COMMAND = "echo 'Hello from Claude Code behind the gateway' > hello.txt && cat hello.txt"

const GREETING = 'Hello! I am a small scripted stand-in for Claude, running on your machine with no API key. ' +
  'Ask me to "create a file" to see a tool call and a permission prompt, or to "tell a long story" to try the ' +
  'interrupt button. Everything you see streams from the real Claude Code CLI through the gateway.'

/** Splits `s` into about `n` pieces at spaces, so deltas look like a model's. */
function pieces (s: string, n: number): string[] {
  const words = s.split(/(?<= )/)
  const size = Math.max(1, Math.ceil(words.length / n))
  const out: string[] = []
  for (let i = 0; i < words.length; i += size) out.push(words.slice(i, i + size).join(''))
  return out
}

/** The demo streams at a pace people can watch (and interrupt): one event every `ms`. */
function every (ms: number): NonNullable<MockReply['pace']> {
  return async () => await new Promise((resolve) => setTimeout(resolve, ms))
}

/** The demo's reply to one streamed Messages API request. */
export function demoModel (body: unknown): MockReply {
  const results = findToolResults(body, { lastOnly: true })
  if (results.length > 0) {
    const said = results.map((r) => r.content.trim()).join(' | ')
    const reply = results.some((r) => r.isError)
      ? `The tool did not run: ${said}. Nothing was changed.`
      : `Done. The tool printed: "${said}". The file hello.txt is now in this session's workspace.`
    return { content: [text(reply, pieces(reply, 8))], pace: every(40) }
  }
  const prompt = lastUserText(body).toLowerCase()
  if (/\b(file|create|tool|run)\b/.test(prompt)) {
    return {
      content: [
        { type: 'thinking', thinking: 'The user wants to see a tool call. A harmless shell command that writes one file in the workspace will do.' },
        text('I will create hello.txt in the workspace with a shell command.', 4),
        toolUse('Bash', { command: DEMO_COMMAND, description: 'Create hello.txt and print it' })
      ],
      pace: every(40)
    }
  }
  if (/\b(long|story|slow)\b/.test(prompt)) {
    const story = Array.from({ length: 40 }, (_, i) => `Line ${i + 1} of a long story that streams slowly, so there is time to press Interrupt.\n`).join('')
    return { content: [text(story, pieces(story, 120))], pace: every(150) }
  }
  return { content: [text(GREETING, pieces(GREETING, 12))], pace: every(40) }
}
