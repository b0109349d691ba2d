"""What scripts/trace-backend-check.sh asserts about the spans a real Phoenix stored.

Reads Phoenix's REST API (`/v1/projects/default/spans`) and the runs' own JSONL trace files, and
fails (exit 1, every failed check listed) unless:
- every trace of both runs arrived whole: as many spans per trace id as the JSONL file has;
- each trace is one tree: one root, every other span's parent in the same trace;
- the team run is one trace holding the coordinator, both workers and their tool calls, with
  span kinds AGENT, LLM and TOOL;
- token counts per trace equal the JSONL file's;
- the compaction run's compaction spans (kind CHAIN, tokens before and after) sit in the trace of
  the request that triggered them;
- agent spans name their conversation (`gen_ai.conversation.id`, `session.id`), and LLM spans
  carry the messages (content recording is on);
- the secret planted in the environment appears nowhere.
Standard library only.
"""

import argparse
import json
import sys
import time
import urllib.request
from collections import Counter, defaultdict


def jsonl_spans(path):
    spans = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line:
                record = json.loads(line)
                if record.get("type") == "span":
                    spans.append(record)
    return spans


def phoenix_spans(url):
    spans, cursor = [], None
    while True:
        query = f"{url}/v1/projects/default/spans?limit=1000"
        if cursor:
            query += f"&cursor={cursor}"
        with urllib.request.urlopen(query, timeout=30) as response:
            page = json.load(response)
        spans.extend(page.get("data", []))
        cursor = page.get("next_cursor")
        if not cursor:
            return spans


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--secret", required=True)
    parser.add_argument("--team", required=True, help="the traces example's JSONL file")
    parser.add_argument("--compaction", required=True, help="the long_session example's JSONL file")
    args = parser.parse_args()

    team, compaction = jsonl_spans(args.team), jsonl_spans(args.compaction)
    local = team + compaction
    expected = Counter(s["trace_id"] for s in local)

    # Phoenix ingests asynchronously: wait until every span is there (or give up after 60 s).
    deadline = time.time() + 60
    while True:
        stored = phoenix_spans(args.url)
        by_trace = defaultdict(list)
        for s in stored:
            by_trace[s["context"]["trace_id"]].append(s)
        if all(len(by_trace[t]) >= n for t, n in expected.items()) or time.time() > deadline:
            break
        time.sleep(1)

    failures = []

    def check(ok, what):
        print(("ok   " if ok else "FAIL ") + what)
        if not ok:
            failures.append(what)

    for trace, n in sorted(expected.items()):
        check(len(by_trace[trace]) == n, f"trace {trace}: {len(by_trace[trace])} of {n} spans arrived")
        spans = by_trace[trace]
        ids = {s["context"]["span_id"] for s in spans}
        roots = [s for s in spans if not s.get("parent_id")]
        orphans = [s["name"] for s in spans if s.get("parent_id") and s["parent_id"] not in ids]
        check(len(roots) == 1 and not orphans,
              f"trace {trace}: one tree ({len(roots)} roots, orphans {orphans})")

        def tokens(spans_, key_of):
            return sum(int(key_of(s).get("gen_ai.usage.input_tokens", 0) or 0) for s in spans_), \
                sum(int(key_of(s).get("gen_ai.usage.output_tokens", 0) or 0) for s in spans_)

        local_trace = [s for s in local if s["trace_id"] == trace and s["name"] == "chat"]
        stored_llm = [s for s in spans if s["span_kind"] == "LLM"]
        check(tokens(local_trace, lambda s: s["attributes"]) == tokens(stored_llm, lambda s: s["attributes"]),
              f"trace {trace}: token counts match the JSONL file "
              f"({tokens(stored_llm, lambda s: s['attributes'])})")

    team_traces = {s["trace_id"] for s in team}
    check(len(team_traces) == 1, f"the team run is one trace ({len(team_traces)})")
    if team_traces:
        spans = by_trace[next(iter(team_traces))]
        kinds = Counter(s["span_kind"] for s in spans)
        agents = {s["attributes"].get("gen_ai.agent.name") for s in spans if s["span_kind"] == "AGENT"}
        check({"AGENT", "LLM", "TOOL"} <= set(kinds), f"span kinds {dict(kinds)}")
        check({"coordinator", "researcher", "writer"} <= agents, f"agents in the trace: {sorted(agents)}")
        tools = sorted(s["attributes"].get("gen_ai.tool.name", "") for s in spans if s["span_kind"] == "TOOL")
        check(tools.count("ask_agent") == 2 and tools.count("lookup") == 2, f"tool calls: {tools}")
        agent_spans = [s for s in spans if s["span_kind"] == "AGENT"]
        check(all(s["attributes"].get("gen_ai.conversation.id") and s["attributes"].get("session.id")
                  for s in agent_spans), "agent spans name their conversation")
        llm = [s for s in spans if s["span_kind"] == "LLM"]
        check(all("gen_ai.input.messages" in s["attributes"] and "gen_ai.output.messages" in s["attributes"]
                  for s in llm), "LLM spans carry input and output messages")

    compactions = [s for s in compaction if s["name"] == "compaction"]
    check(len(compactions) >= 1, f"the compaction run compacted ({len(compactions)} compactions)")
    for local_span in compactions:
        spans = by_trace[local_span["trace_id"]]
        stored = [s for s in spans if s["name"] == "compaction"]
        # A compaction still working ahead when the example shuts down is cancelled: its span
        # ends with reason "cancelled" and no token counts (it has no report), and must still
        # arrive, as a CHAIN.
        ok = stored and all(
            s["span_kind"] == "CHAIN"
            and ((s["attributes"].get("troupe.compaction.tokens_before") is not None
                  and s["attributes"].get("troupe.compaction.tokens_after") is not None)
                 or s["attributes"].get("troupe.compaction.reason") == "cancelled")
            for s in stored)
        check(bool(ok), f"trace {local_span['trace_id']}: compaction span with tokens before/after (or cancelled at shutdown), kind CHAIN")
        if not ok:
            for span in stored:
                print("     stored:", span["span_kind"], {k: v for k, v in span["attributes"].items()
                                                        if k.startswith("troupe.compaction")})
        triggered_by = [s for s in spans if s["span_kind"] == "AGENT"
                        and s["attributes"].get("gen_ai.agent.name") == local_span["attributes"].get("gen_ai.agent.name")]
        check(bool(triggered_by), f"trace {local_span['trace_id']}: the compaction sits in the request that triggered it")
    finished = [s for s in compactions
                if (s.get("attributes") or {}).get("troupe.compaction.tokens_after") is not None]
    check(len(finished) >= 1, f"the compaction run finished a compaction ({len(finished)} of {len(compactions)})")

    everything = phoenix_spans(args.url)
    check(args.secret not in json.dumps(everything), "the planted secret appears in no stored span")

    if failures:
        print(f"{len(failures)} check(s) failed", file=sys.stderr)
        sys.exit(1)
    print(f"all checks passed ({len(everything)} spans in {len(expected)} traces)")


if __name__ == "__main__":
    main()
