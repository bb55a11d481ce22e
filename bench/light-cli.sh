#!/bin/sh
# Light load generator for the many-sessions scenario (bench/run.ts): a POSIX
# shell instead of a Node process, so 500 of them cost a few MB each rather
# than ~40 MB. Answers `initialize`; each user message gets 10 short assistant
# lines and a `result` line. Ends when stdin closes.
sid=00000000-0000-4000-8000-000000000000
prev=
for a in "$@"; do
  if [ "$prev" = "--session-id" ] || [ "$prev" = "--resume" ]; then sid=$a; fi
  prev=$a
done
pad=xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx
while IFS= read -r line; do
  case "$line" in
    *'"subtype":"initialize"'*)
      id=${line#*\"request_id\":\"}
      id=${id%%\"*}
      printf '{"type":"control_response","response":{"subtype":"success","request_id":"%s","response":{"commands":[],"models":[]}}}\n' "$id"
      ;;
    *'"type":"user"'*)
      i=0
      while [ $i -lt 10 ]; do
        printf '{"type":"assistant","bench":{"i":%d},"message":{"id":"msg_light","type":"message","role":"assistant","model":"bench","content":[{"type":"text","text":"%s"}]},"parent_tool_use_id":null,"session_id":"%s"}\n' "$i" "$pad" "$sid"
        i=$((i + 1))
      done
      printf '{"type":"result","subtype":"success","is_error":false,"result":"light turn done","session_id":"%s"}\n' "$sid"
      ;;
  esac
done
