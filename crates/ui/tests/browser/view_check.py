"""Drive troupe's view in headless chromium (selenium) against the scripted team of
crates/ui/tests/suite/browser.rs, which reads this script's stdout:

  OPEN  the page is live: the team may start working
  LOAD  the approvals are done: publish the load events now

Usage: view_check.py URL SCREENSHOT_DIR LOAD_EVENTS SESSION_URL (a finished run of 1,000
messages, read-only). Exits non-zero on the first failed check.
"""

import http.server
import json
import os
import sys
import threading
import time

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.support.ui import WebDriverWait

URL, SHOTS, LOAD, SESSION_URL = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
BASE = URL.split("?")[0]
TOKEN = URL.split("token=")[1]
HOSTILE = 'Here: <script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2"> done'


def say(line):
    print(line, flush=True)


def check(cond, what):
    if not cond:
        raise AssertionError(what)
    say(f"ok: {what}")


opts = webdriver.ChromeOptions()
opts.binary_location = "/usr/bin/chromium"
for arg in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
            "--window-size=1400,1100"]:
    opts.add_argument(arg)
opts.set_capability("goog:loggingPrefs", {"performance": "ALL"})
driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)
seen_states = {}


def poll_states():
    states = driver.execute_script(
        "return [...document.querySelectorAll('.card')].map(c => "
        "[c.dataset.agent, c.querySelector('.state').dataset.state]);")
    for agent, state in states:
        seen = seen_states.setdefault(agent, [])
        if not seen or seen[-1] != state:
            seen.append(state)
    return states


def wait_for(what, cond, secs=90):
    def step(_):
        poll_states()
        return cond()
    try:
        # A patch may re-draw what a condition found before it reads it: look again.
        return WebDriverWait(driver, secs, poll_frequency=0.05,
                             ignored_exceptions=[StaleElementReferenceException]).until(step)
    except Exception as e:
        driver.save_screenshot(os.path.join(SHOTS, "failure.png"))
        raise AssertionError(f"timed out waiting for {what}") from e


def shot(name):
    driver.save_screenshot(os.path.join(SHOTS, f"{name}.png"))


def statuses(*fragments):
    """HTTP statuses chromium saw for URLs containing one of `fragments` (its performance log,
    read once: reading empties it)."""
    found = []
    for entry in driver.get_log("performance"):
        msg = json.loads(entry["message"])["message"]
        if msg.get("method") == "Network.responseReceived":
            response = msg["params"]["response"]
            if any(f in response["url"] for f in fragments):
                found.append(response["status"])
    return found


try:
    # Without the token: refused, and no page.
    driver.get(BASE)
    body = driver.find_element(By.TAG_NAME, "body").text
    check("token is missing or wrong" in body, "a page without the token is refused")
    check(not driver.find_elements(By.ID, "agents"), "no view is served without the token")

    driver.get(URL)
    driver.execute_script(
        "window.__long = []; new PerformanceObserver(l => window.__long.push("
        "...l.getEntries().map(e => e.duration))).observe({type: 'longtask', buffered: true});")
    wait_for("the live feed", lambda: driver.find_element(By.ID, "status").text == "connected")
    check(driver.find_element(By.ID, "mode").text == "live", "the page says it is live")
    wait_for("both agents' cards", lambda: len(driver.find_elements(
        By.CSS_SELECTOR, ".card[data-agent=writer], .card[data-agent=coder]")) == 2)
    shot("idle")
    say("OPEN")

    # The writer works, is compacted, and answers hostile markup.
    def receipt():
        rows = driver.find_elements(By.CSS_SELECTOR, ".compaction[data-agent=writer] .receipt")
        return rows and rows[0].text.startswith("receipt (")
    wait_for("a compaction with its receipt", receipt)
    row = driver.find_element(By.CSS_SELECTOR, ".compaction[data-agent=writer]")
    check("→" in row.find_element(By.CLASS_NAME, "tokens").text, "the compaction shows before → after tokens")
    check("net saving" in row.text, "the receipt shows its net saving")
    shot("compaction")

    def said():
        pre = driver.find_elements(By.CSS_SELECTOR, ".card[data-agent=writer] pre.said")
        return pre and pre[0].text == HOSTILE
    wait_for("the writer's hostile answer, as text", said)
    check(driver.execute_script("return window.__pwned") is None, "the answer's markup never ran")
    check(not driver.find_elements(By.CSS_SELECTOR, "#agents script, #agents img, #log script, #log img"),
          "no element was made from the answer's markup")
    check("writer" in seen_states and len(seen_states["writer"]) >= 2,
          f"the writer's state changed on the page: {seen_states.get('writer')}")
    meter = driver.find_element(By.CSS_SELECTOR, ".card[data-agent=writer] .meter-text").text
    check("/ 16,384 tokens" in meter, f"the writer's context meter reads its window: {meter}")
    check(len(driver.find_elements(By.CSS_SELECTOR, ".card[data-agent=writer] .meter .mark")) == 3,
          "the meter marks warning, trigger and target")
    # The writer's own policy (support.rs WRITER_MARKS: 0.25, 0.35, 0.15 of the usable window,
    # 16,384 less its 256-token answer reserve), not the view's defaults.
    usable = 16384 - 256
    own = {k: str(round(usable * f)) for k, f in (("warning", 0.25), ("trigger", 0.35), ("target", 0.15))}

    def writer_marks():
        return {k: driver.find_element(By.CSS_SELECTOR, f".card[data-agent=writer] .meter .mark.{k}")
                .get_attribute("data-tokens") for k in own}
    wait_for("the writer's own marks on its meter", lambda: writer_marks() == own)
    bar = driver.find_element(By.CSS_SELECTOR, ".card[data-agent=writer] .meter")
    peak, trigger = int(bar.get_attribute("data-peak")), int(bar.get_attribute("data-trigger"))
    check(peak >= trigger and "crossed" in bar.get_attribute("class"),
          f"the writer's meter crossed its trigger: peak {peak}, trigger {trigger}")
    chart = driver.find_element(By.CSS_SELECTOR, ".card[data-agent=writer] svg.chart")
    check(len(chart.find_elements(By.CSS_SELECTOR, "line")) == 3 and chart.find_elements(By.CSS_SELECTOR, "polyline"),
          "the chart draws tokens over the session with the three marks")
    shot("meter")

    # The coder asks for two calls.
    wait_for("two waiting calls", lambda: len(driver.find_elements(By.CSS_SELECTOR, ".approval")) == 2)
    check(seen_states["coder"][-1] == "waiting_for_approval",
          f"the coder waits for approval: {seen_states['coder']}")
    args = sorted(e.text for e in driver.find_elements(By.CSS_SELECTOR, ".approval .arguments"))
    # As the model wrote them (the scripted model writes compact JSON).
    check(args == ['{"command":"rm -rf /data"}', '{"command":"rm -rf build"}'],
          f"the exact arguments are shown: {args}")
    shot("approvals")
    rows = {r.find_element(By.CLASS_NAME, "arguments").text: r
            for r in driver.find_elements(By.CSS_SELECTOR, ".approval")}
    data_id = rows['{"command":"rm -rf /data"}'].get_attribute("data-approval")

    # Another origin, even knowing the token, can neither read nor answer.
    evil_page = f"""<!doctype html><script>
      fetch({json.dumps(BASE + 'api/snapshot?token=' + TOKEN)}, {{mode: 'no-cors'}});
      fetch({json.dumps(BASE + 'api/approvals/approve?token=' + TOKEN)}, {{method: 'POST',
        mode: 'no-cors', headers: {{'content-type': 'text/plain'}},
        body: JSON.stringify({{id: {json.dumps(data_id)}}})}})
        .finally(() => {{ document.title = 'sent'; }});
    </script>""".encode()

    class Evil(http.server.BaseHTTPRequestHandler):
        # A socket chromium opened ahead (a preconnect) and never sends on must not hold the
        # server: with one thread it blocked shutdown() until chromium dropped it, a minute on.
        timeout = 5

        def do_GET(self):
            self.send_response(200)
            self.send_header("content-type", "text/html")
            self.end_headers()
            self.wfile.write(evil_page)

        def log_message(self, *args):
            pass

    evil = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Evil)
    evil.daemon_threads = True
    threading.Thread(target=evil.serve_forever, daemon=True).start()
    view_tab = driver.current_window_handle
    driver.get_log("performance")  # only what follows
    driver.switch_to.new_window("tab")
    driver.get(f"http://127.0.0.1:{evil.server_address[1]}/")
    WebDriverWait(driver, 30).until(lambda d: d.title == "sent")
    # (The view's own tab keeps its feed open meanwhile: only the evil page's two requests.)
    # Polled, not slept on: the log is read until both answers are in it.
    refused = []
    WebDriverWait(driver, 30, poll_frequency=0.05).until(
        lambda d: refused.extend(statuses("/api/snapshot", "/api/approvals/")) or len(refused) >= 2)
    check(sorted(refused) == [403, 403],
          f"another origin is refused: {refused}")
    driver.close()
    driver.switch_to.window(view_tab)
    evil.shutdown()
    check(len(driver.find_elements(By.CSS_SELECTOR, ".approval")) == 2, "both calls still wait")

    # Approve one, deny the other; the coder goes on and the calls leave the page.
    def answer(arguments, button):
        # Found afresh each time: an answer re-draws the list.
        row = next(r for r in driver.find_elements(By.CSS_SELECTOR, ".approval")
                   if r.find_element(By.CLASS_NAME, "arguments").text == arguments)
        row.find_element(By.CSS_SELECTOR, button).click()
    answer('{"command":"rm -rf build"}', "button.approve")
    wait_for("the approved call to leave the page",
             lambda: len(driver.find_elements(By.CSS_SELECTOR, ".approval")) == 1)
    answer('{"command":"rm -rf /data"}', "button.deny")
    wait_for("no waiting calls", lambda: not driver.find_elements(By.CSS_SELECTOR, ".approval"))

    def coder_done():
        card = driver.find_element(By.CSS_SELECTOR, ".card[data-agent=coder]")
        pre = card.find_elements(By.CSS_SELECTOR, "pre.said")
        return card.find_element(By.CLASS_NAME, "state").get_attribute("data-state") == "idle" \
            and pre and pre[0].text == "done"
    wait_for("the coder idle with its answer", coder_done)
    coder = seen_states["coder"]
    check(coder.index("waiting_for_approval") < len(coder) - 1 and coder[-1] == "idle",
          f"the coder changed state on the page: {coder}")
    shot("answered")

    # The writer's conversation, live: its messages, the pin, the compaction's summary where it
    # sits with what it stands for, long answers folded, the hostile answer as text.
    def open_conversation(agent):
        wait_for(f"{agent}'s conversation button, clicked", lambda: driver.find_element(
            By.CSS_SELECTOR, f".card[data-agent={agent}] button.show-conversation").click() or True)
        # textContent: the heading is upper-cased on screen.
        wait_for(f"{agent}'s conversation", lambda: f"({agent}," in
                 driver.find_element(By.ID, "conversation-agent").get_attribute("textContent")
                 and driver.find_elements(By.CSS_SELECTOR, "#conversation li"))
    open_conversation("writer")
    items = driver.find_elements(By.CSS_SELECTOR, "#conversation li")
    pinned = driver.find_elements(By.CSS_SELECTOR, "#conversation li.pinned")
    check(len(pinned) == 1 and "part 0, please" in pinned[0].text and "pinned" in pinned[0].text,
          "the pinned message is marked")
    summaries = driver.find_elements(By.CSS_SELECTOR, "#conversation li.summary")
    check(summaries and summaries[0].find_elements(By.CSS_SELECTOR, ".replaces button.original"),
          "the compaction's summary sits in the conversation with what it stands for")
    check(driver.find_elements(By.CSS_SELECTOR, "#conversation li details"), "long answers are folded")
    last_text = items[-1].find_element(By.CSS_SELECTOR, "pre.text").text
    check(last_text == HOSTILE, f"the writer's last answer reads as text: {last_text!r}")
    check(not driver.find_elements(By.CSS_SELECTOR, "#conversation script, #conversation img")
          and driver.execute_script("return window.__pwned") is None, "its markup never ran")
    shot("conversation-live")

    # An archived original, opened from the summary as recall reads it back.
    first = summaries[0].find_element(By.CSS_SELECTOR, ".replaces button.original")
    wanted = first.get_attribute("data-id")
    first.click()
    wait_for("the archived original", lambda: driver.find_elements(
        By.CSS_SELECTOR, f"#archive .archived-original[data-id='{wanted}'] .original-message[data-id='{wanted}']"))
    text = driver.find_element(By.CSS_SELECTOR, f"#archive .original-message[data-id='{wanted}'] pre.original-text").text
    check(text.startswith("part ") or text.startswith("w"), f"m{wanted} reads back verbatim: {text[:60]!r}")
    # And from the compaction: what went to the archive, each original opens.
    driver.find_element(By.CSS_SELECTOR, ".compaction[data-agent=writer] button.show-archive").click()
    wait_for("the archive listing", lambda: len(driver.find_elements(By.CSS_SELECTOR, "#archive .archive-list li")) > 1)
    entry = driver.find_elements(By.CSS_SELECTOR, "#archive .archive-list li")[-1]
    entry_id = entry.get_attribute("data-id")
    entry.find_element(By.CSS_SELECTOR, "button.original").click()
    wait_for("an original from the listing", lambda: driver.find_elements(
        By.CSS_SELECTOR, f"#archive .original-message[data-id='{entry_id}'] pre.original-text"))
    check(not driver.find_elements(By.CSS_SELECTOR, "#archive script, #archive img"), "the archive renders as text")
    shot("archive")

    # The coder's conversation: its tool calls and their results.
    open_conversation("coder")
    calls = [e.text for e in driver.find_elements(By.CSS_SELECTOR, "#conversation .tool-call")]
    check('run({"command": "rm -rf build"})' in calls and 'run({"command": "rm -rf /data"})' in calls,
          f"the coder's tool calls are shown: {calls}")
    results = [e.text for e in driver.find_elements(By.CSS_SELECTOR, "#conversation pre.tool-result")]
    check(any("ran rm -rf build" in r for r in results) and any("denied" in r for r in results),
          f"and their results: {results}")

    # A request's waterfall: the coder's, from its request to its model and tool calls.
    def coder_trace():
        rows = driver.find_elements(By.CSS_SELECTOR, "#requests li")
        return next((r for r in rows if r.find_element(By.CSS_SELECTOR, "button.show-trace").text == "coder"), None)
    def open_coder_trace():
        row = coder_trace()
        if row is None:
            return False
        row.find_element(By.CSS_SELECTOR, "button.show-trace").click()
        return True
    wait_for("the coder's request in the list, opened", open_coder_trace)
    wait_for("the coder's waterfall", lambda: driver.find_elements(By.CSS_SELECTOR, "#waterfall .bar-row.model_call"))
    bars = driver.execute_script(
        "return [...document.querySelectorAll('#waterfall .bar-row')].map(r => "
        "[r.dataset.kind, r.dataset.agent, Number(r.dataset.ms), r.querySelector('.bar-info').textContent, "
        "parseFloat(r.querySelector('.bar-label').style.paddingLeft) || 0]);")
    kinds = [b[0] for b in bars]
    check(kinds[0] == "request" and kinds.count("model_call") == 2 and "tool_call" in kinds,
          f"the waterfall reads request → model calls and tool calls: {kinds}")
    check(all(b[1] == "coder" for b in bars) and all(b[2] >= 0 for b in bars), "each bar has its agent and duration")
    model_info = [b[3] for b in bars if b[0] == "model_call"]
    check(all(" in / " in i and " ms" in i for i in model_info), f"model calls show tokens and time: {model_info}")
    check(all(b[4] > 0 for b in bars[1:]), "calls nest under their request")
    shot("waterfall")

    # The /compact button: the writer is compacted again from the page (token and origin
    # checked like an approval), and the new compaction appears.
    before = len(driver.find_elements(By.CSS_SELECTOR, ".compaction[data-agent=writer]"))
    wait_for("the /compact button, clicked", lambda: driver.find_element(
        By.CSS_SELECTOR, ".card[data-agent=writer] button.compact-now").click() or True)

    def compact_note():
        # Read in one script: the card is re-drawn by every patch, an element found first may be
        # gone when its text is asked for.
        text = driver.execute_script(
            "const n = document.querySelector('.card[data-agent=writer] .note'); return n && n.textContent;")
        return text and text.startswith(("compacted:", "not compacted:")) and text
    note = wait_for("the /compact answer", compact_note)
    check(note.startswith("compacted:"), f"the page compacted the writer: {note}")
    wait_for("the new compaction on the page", lambda: len(
        driver.find_elements(By.CSS_SELECTOR, ".compaction[data-agent=writer]")) == before + 1)
    # Every view open at once (cards, compactions, conversation, archive, waterfall, log): the
    # hostile answer made no element anywhere and ran nothing.
    check(driver.execute_script("return document.querySelectorAll('body script, body img, body iframe').length") == 0
          and driver.execute_script("return window.__pwned") is None,
          "no view made an element of model text")

    # Load: 10,000 events while the page stays live.
    loaded = f"return state.events.filter(r => r.event.agent.startsWith('load')).length"
    driver.execute_script("window.__long = []; troupeStats.maxRenderMs = 0;"
                          "troupeStats.renders = 0; troupeStats.renderMs = 0;")
    start = time.monotonic()
    say("LOAD")
    last = f"return state.events.some(r => r.event.call_id === 'c{LOAD - 1}')"
    WebDriverWait(driver, 120, poll_frequency=0.1).until(lambda d: d.execute_script(last))
    took = time.monotonic() - start
    shown = driver.execute_script(loaded)
    stats = driver.execute_script("return troupeStats")
    long_tasks = driver.execute_script("return window.__long")
    full = driver.execute_script(
        "const t = performance.now(); dirty.all = true; render(); return performance.now() - t;")
    click = driver.execute_script(
        "const t = performance.now(); document.querySelector('.card').click(); "
        "return performance.now() - t;")
    rows = len(driver.find_elements(By.CSS_SELECTOR, "#log li"))
    say("MEASURE " + json.dumps({
        "events": LOAD, "seconds_until_the_last_shown": round(took, 2),
        "events_kept_on_the_page": shown,
        "missed_by_the_view": driver.execute_script("return state.missed"),
        "re_syncs": driver.execute_script("return state.lagged"),
        "renders": stats["renders"], "max_render_ms": round(stats["maxRenderMs"], 1),
        "mean_render_ms": round(stats["renderMs"] / max(1, stats["renders"]), 2),
        "long_tasks_over_50ms": len(long_tasks),
        "longest_task_ms": round(max(long_tasks, default=0), 1),
        "full_rerender_ms_after": round(full, 1), "log_rows_in_dom": rows,
    }))
    check(rows <= 200, "the log keeps its DOM bounded")
    shot("load")

    # A finished run of 1,000 messages, read-only.
    start = time.monotonic()
    driver.get(SESSION_URL)
    driver.execute_script(
        "window.__long = []; new PerformanceObserver(l => window.__long.push("
        "...l.getEntries().map(e => e.duration))).observe({type: 'longtask', buffered: true});")
    drawn = "return document.querySelectorAll('#conversation li').length"
    wait_for("the conversation", lambda: driver.execute_script(drawn) > 0)
    took = time.monotonic() - start
    check(driver.find_element(By.ID, "mode").text == "finished run (read-only)", "the page says read-only")
    check("1,000 messages" in driver.find_element(By.ID, "conversation-agent").get_attribute("textContent"),
          "all 1,000 messages are counted")
    first_draw = {"li": driver.execute_script(drawn),
                  "ms": driver.execute_script("return troupeStats.conversationMs"),
                  "nodes": driver.execute_script("return troupeStats.conversationNodes")}
    check(first_draw["li"] == 200, f"the newest 200 are drawn, the rest on demand: {first_draw}")
    last = driver.find_elements(By.CSS_SELECTOR, "#conversation li")[-1]
    check(last.find_element(By.CSS_SELECTOR, "pre.text").text == HOSTILE, "the last answer reads as text")
    # Every message is reachable: the older ones are drawn a page at a time.
    older = driver.find_element(By.ID, "conversation-older")
    steps = []
    while older.is_displayed():
        t = driver.execute_script("const t = performance.now(); showOlder(); return performance.now() - t;")
        steps.append(round(t, 1))
    check(driver.execute_script(drawn) == 1000, "all 1,000 messages drawn once asked for")
    check(not driver.find_elements(By.CSS_SELECTOR, "#conversation script, #conversation img")
          and driver.execute_script("return window.__pwned") is None, "its markup never ran")
    check(len(driver.find_elements(By.CSS_SELECTOR, "#conversation details")) > 0, "long messages are folded")
    nav = driver.execute_script(
        "const n = performance.getEntriesByType('navigation')[0]; return n.loadEventEnd - n.startTime;")
    say("MEASURE " + json.dumps({
        "messages": 1000, "seconds_until_shown": round(took, 2),
        "first_render_ms": round(first_draw["ms"], 1), "first_render_dom_nodes": first_draw["nodes"],
        "show_older_render_ms": steps,
        "all_drawn_dom_nodes": driver.execute_script("return troupeStats.conversationNodes"),
        "page_load_ms": round(nav, 1),
        "longest_task_ms": round(max(driver.execute_script("return window.__long || []"), default=0), 1),
    }))
    shot("conversation")
    say("DONE")
finally:
    driver.quit()
