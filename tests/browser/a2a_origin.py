"""Drive `troupe a2a serve` from web pages in headless chromium (selenium), for
tests/suite/a2a_browser.rs, which talks to this script over its stdin and stdout:

  PAGES ALLOWED_PORT OTHER_PORT   printed: two pages are served on 127.0.0.1, one on each port
  AGENT URL KEY                   read: the served agent's URL, its key (the server allows
                                  http://127.0.0.1:ALLOWED_PORT only)

Then, in the browser: the allowed origin's page calls the agent with fetch (a real CORS
preflight: the request carries Authorization, A2A-Version and a JSON body) and gets the
answer; the other origin's page is refused by the same fetch, and its form post
(`enctype=text/plain`, the classic cross-site JSON forgery) and its no-cors fetch run nothing
(the Rust side counts the model's requests). Prints `ok: …` per check; exits non-zero on the
first failure.
"""

import http.server
import sys
import threading

from selenium import webdriver
from selenium.webdriver.chrome.service import Service

PAGE = b"""<!doctype html><html><head><title>app</title></head><body>
<iframe name="sink" id="sink"></iframe>
<script>
window.callAgent = async (url, key, text) => {
  try {
    const response = await fetch(url, {
      method: "POST",
      headers: {"Authorization": "Bearer " + key, "Content-Type": "application/json",
                "A2A-Version": "1.0"},
      body: JSON.stringify({jsonrpc: "2.0", id: 1, method: "SendMessage",
        params: {message: {messageId: "m-" + text, role: "ROLE_USER", parts: [{text}]}}}),
    });
    return "HTTP " + response.status + " " + await response.text();
  } catch (e) {
    return "ERROR " + e;
  }
};
window.blindPost = async (url, text) => {
  try {
    await fetch(url, {method: "POST", mode: "no-cors", headers: {"Content-Type": "text/plain"},
      body: JSON.stringify({jsonrpc: "2.0", id: 1, method: "SendMessage",
        params: {message: {messageId: "m-" + text, role: "ROLE_USER", parts: [{text}]}}})});
    return "sent";
  } catch (e) {
    return "ERROR " + e;
  }
};
window.formPost = (url, text) => new Promise((resolve) => {
  const sink = document.getElementById("sink");
  sink.onload = () => resolve("loaded");
  const form = document.createElement("form");
  form.method = "POST";
  form.action = url;
  form.enctype = "text/plain";
  form.target = "sink";
  const field = document.createElement("input");
  field.name = '{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": '
    + '{"messageId": "m-form", "role": "ROLE_USER", "parts": [{"text": "' + text + '"}]}}, "x": "';
  field.value = '"}';
  form.appendChild(field);
  document.body.appendChild(form);
  form.submit();
  setTimeout(() => resolve("timed out"), 20000);
});
</script></body></html>"""


class Page(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(PAGE)))
        self.end_headers()
        self.wfile.write(PAGE)

    def log_message(self, *args):
        pass


def serve_page():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server.server_address[1]


def check(cond, what):
    if not cond:
        raise AssertionError(what)
    print(f"ok: {what}", flush=True)


allowed, other = serve_page(), serve_page()
print(f"PAGES {allowed} {other}", flush=True)
words = sys.stdin.readline().split()
assert words[0] == "AGENT", words
url, key = words[1], words[2]

opts = webdriver.ChromeOptions()
opts.binary_location = "/usr/bin/chromium"
for arg in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"]:
    opts.add_argument(arg)
driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)
driver.set_script_timeout(60)
try:
    driver.get(f"http://127.0.0.1:{allowed}/")
    answer = driver.execute_async_script(
        "window.callAgent(arguments[0], arguments[1], 'from the app').then(arguments[2]);",
        url, key)
    check(answer.startswith("HTTP 200") and "TASK_STATE_COMPLETED" in answer,
          f"the allowed origin's page is answered through CORS: {answer[:160]}")

    driver.get(f"http://127.0.0.1:{other}/")
    refused = driver.execute_async_script(
        "window.callAgent(arguments[0], arguments[1], 'from elsewhere').then(arguments[2]);",
        url, key)
    check(refused.startswith("ERROR"), f"another origin's fetch is refused: {refused[:160]}")
    blind = driver.execute_async_script(
        "window.blindPost(arguments[0], 'blind').then(arguments[1]);", url)
    check(blind == "sent", f"another origin's no-cors post is sent, blind: {blind}")
    form = driver.execute_async_script(
        "window.formPost(arguments[0], 'forged').then(arguments[1]);", url)
    check(form == "loaded", f"another origin's text/plain form is posted: {form}")
finally:
    driver.quit()
