"""End-to-end: the web console (docs/console.md) in headless Chromium,
against `agentloop serve` with the fake model server and a temporary store.
Each case saves screenshots of its states (console_util.BrowserCase.shot)."""

import json
import os
import re
import unittest

import serve_util
from console_util import BrowserCase
from e2e_util import TIMEOUT

WRITE_THEN_DONE = {"responses": [
    {"tool_calls": [{"id": "c1", "name": "write",
                     "input": {"file_path": "notes.txt", "content": "first draft\n"}}]},
    {"text": "wrote notes.txt"},
]}

XSS = '<img src=x onerror="window.__xss=1"><script>window.__xss=2</script>'


class ConsoleBrowserTest(BrowserCase):

    def start(self, script, **browser):
        self.agent(script)
        self.serve()
        d = self.browser(**browser)
        self.open(d)
        self.wait_app(d)
        return d

    def pending_state(self, aid):
        status, _, item = self.call("GET", "/v1/approvals/" + aid)
        self.assertEqual(status, 200, item)
        return item["state"]

    def test_a_prompt_streams_the_answer(self):
        answer = "Streaming **works**: the answer arrives in pieces."
        d = self.start({"responses": [{"text": answer, "latency_ms": 200}]})
        self.new_session(d)
        self.send(d, "say something")
        self.wait(d, lambda d: any("arrives" in t for t in self.assistant_texts(d)), "the answer")
        self.wait_turn_done(d)
        self.assertEqual(self.assistant_texts(d), ["Streaming works: the answer arrives in pieces."])
        # Markdown is rendered as elements, not as text with asterisks.
        self.assertEqual(d.find_element("css selector", "#timeline .item.assistant strong").text,
                         "works")
        users = d.find_elements("css selector", "#timeline .item.user .text")
        self.assertEqual([u.text for u in users], ["say something"])
        self.shot(d, "chat-streamed-answer")
        self.assert_no_script_errors(d)

    def test_edited_arguments_are_approved_and_the_turn_completes(self):
        d = self.start(WRITE_THEN_DONE)
        sid = self.new_session(d)
        self.send(d, "write the notes")
        card = self.approval_card(d)
        # The server's diff of the file the call would create.
        self.wait(d, lambda d: card.find_elements("css selector", "table.diff tr.add"), "the diff")
        self.assertIn("first draft", card.find_element("css selector", "table.diff").text)
        self.assertIn("(writer)", card.find_element("css selector", "p.meta").text)
        self.assertNotIn("undefined", card.text)
        # Its copy in the inbox is a separate radio group: once stays chosen here.
        self.assertTrue(card.find_element("css selector", "input[value=once]").is_selected())
        self.shot(d, "approval-card")
        args = card.find_element("css selector", "textarea.args-editor")
        args.clear()
        args.send_keys(json.dumps({"file_path": "notes.txt", "content": "edited in the console\n"}))
        card.find_element("css selector", "button.approve").click()
        self.wait(d, lambda d: any(t == "wrote notes.txt" for t in self.assistant_texts(d)),
                  "the continued turn's answer")
        self.wait_turn_done(d)
        self.assertEqual(self.read_ws("notes.txt"), "edited in the console\n")
        self.assertIn("decided", card.get_attribute("class"))
        self.assertIn("arguments edited", card.find_element("css selector", "p.result").text)
        # The server ran the edited call: its decision and the call it began.
        status, _, events = self.call("GET", "/v1/sessions/%s/events?limit=200" % sid)
        self.assertEqual(status, 200, events)
        began = [e for e in events["items"] if e["type"] == "tool_call_begin"]
        self.assertEqual([e["input"]["content"] for e in began], ["edited in the console\n"])
        decided = [e for e in events["items"] if e["type"] == "decision" and
                   e.get("pending_id") and e["decision"] != "ask"]
        self.assertEqual([(e["decision"], e["edited"]) for e in decided], [("allow", True)])
        self.shot(d, "approval-approved")
        self.assert_no_script_errors(d)

    def test_deny_with_a_reason_the_model_sees(self):
        d = self.start(WRITE_THEN_DONE)
        sid = self.new_session(d)
        self.send(d, "write the notes")
        card = self.approval_card(d)
        card.find_element("css selector", "input.deny-reason").send_keys("not in this repo")
        card.find_element("css selector", "button.deny").click()
        self.wait(d, lambda d: "decided" in card.get_attribute("class"), "the card to be decided")
        self.wait(d, lambda d: d.find_elements("css selector", "#timeline .item.end.denied"),
                  "the turn's end")
        self.assertFalse(os.path.exists(os.path.join(self.ws, "notes.txt")))
        status, _, msgs = self.call("GET", "/v1/sessions/%s/messages" % sid)
        self.assertEqual(status, 200, msgs)
        self.assertIn("not in this repo", json.dumps(msgs))
        self.shot(d, "approval-denied")
        self.assert_no_script_errors(d)

    def test_a_bad_edit_shows_the_400_and_the_item_stays_pending(self):
        d = self.start(WRITE_THEN_DONE)
        self.new_session(d)
        self.send(d, "write the notes")
        card = self.approval_card(d)
        aid = card.get_attribute("data-pending")
        args = card.find_element("css selector", "textarea.args-editor")
        # Not JSON: the page refuses it before sending anything.
        args.clear()
        args.send_keys("{not json")
        self.wait(d, lambda d: not card.find_element("css selector", "button.approve").is_enabled(),
                  "approve to be disabled")
        self.assertIn("not JSON", card.find_element("css selector", "p.error").text)
        # JSON the tool refuses (file_path must be a string): the server's 400.
        args.clear()
        args.send_keys(json.dumps({"file_path": 5, "content": "x"}))
        card.find_element("css selector", "button.approve").click()
        result = card.find_element("css selector", "p.result")
        self.wait(d, lambda d: "invalid_edited_args" in result.text, "the 400 on the card")
        self.assertIn("still pending", result.text)
        self.assertNotIn("decided", card.get_attribute("class"))
        self.assertEqual(self.pending_state(aid), "pending")
        self.assertTrue(card.find_element("css selector", "button.deny").is_enabled())
        self.shot(d, "approval-bad-edit")

    def test_a_reload_mid_stream_replays_without_duplicates(self):
        answer = "alpha beta gamma delta epsilon zeta eta theta"
        d = self.start({"responses": [{"text": answer, "latency_ms": 1500}]})
        self.new_session(d)
        self.send(d, "count slowly")
        self.wait(d, lambda d: any(t for t in self.assistant_texts(d)), "the first piece")
        self.assertNotEqual(self.assistant_texts(d), [answer])
        d.refresh()
        self.wait_app(d)
        seen = []

        def done(drv):
            texts = self.assistant_texts(drv)
            seen.append(texts)
            return texts == [answer] and drv.find_element("id", "send").is_enabled()
        self.wait(d, done, "the whole answer after the reload")
        # At no time was there a second copy or text that is not a prefix.
        for texts in seen:
            self.assertLessEqual(len(texts), 1, texts)
            if texts:
                self.assertTrue(answer.startswith(texts[0].rstrip("▍")), texts)
        users = d.find_elements("css selector", "#timeline .item.user")
        self.assertEqual(len(users), 1)
        self.shot(d, "reloaded-mid-stream")

    def test_a_restarted_server_is_rejoined_from_the_last_seq(self):
        import signal
        import socket
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        self.agent({"responses": [{"text": "first answer"}, {"text": "second answer"}]})
        first = self.serve(port)
        d = self.browser()
        self.open(d)
        self.wait_app(d)
        self.new_session(d)
        self.send(d, "one")
        self.wait(d, lambda d: self.assistant_texts(d) == ["first answer"], "the first answer")
        self.wait_turn_done(d)
        # The server stops: its streams get `shutdown`, and the page waits.
        first.send_signal(signal.SIGTERM)
        first.communicate(timeout=TIMEOUT)
        self.wait(d, lambda d: "reconnecting" in d.find_element("id", "conn").text,
                  "the page to notice")
        self.serve(port)
        self.wait(d, lambda d: d.find_element("id", "conn").text == "live", "the page to rejoin")
        self.send(d, "two")
        self.wait(d, lambda d: self.assistant_texts(d) == ["first answer", "second answer"],
                  "the second answer, once")
        users = d.execute_script(
            "return [...document.querySelectorAll('#timeline .item.user .text')]"
            ".map(e => e.textContent)")
        self.assertEqual(users, ["one", "two"])

    def test_two_tabs_stay_in_step(self):
        a = self.start(WRITE_THEN_DONE)
        sid = self.new_session(a)
        self.send(a, "write the notes")
        self.approval_card(a)
        b = self.browser()
        self.open(b, "#" + sid)
        self.wait_app(b)
        card_b = self.approval_card(b)
        # The inbox of the second tab lists it too.
        b.find_element("id", "open-inbox").click()
        self.approval_card(b, root="#inbox")
        b.find_element("id", "open-inbox").click()
        self.approval_card(a).find_element("css selector", "button.approve").click()
        # The same card element, not reloaded: the decision reaches the
        # second tab through its event stream.
        self.wait(b, lambda d: "decided" in card_b.get_attribute("class"),
                  "the second tab to see the decision")
        self.assertIn("approved", card_b.find_element("css selector", "p.result").text)
        self.wait(b, lambda d: "wrote notes.txt" in self.assistant_texts(d),
                  "the second tab to see the answer")
        self.shot(b, "second-tab-in-step")

    def test_the_subagent_tree_shows_each_child_with_its_cost(self):
        # The served agent `writer` has a read-only child `scout`.
        folder = os.path.join(self.home, ".config", "agentloop", "agents", "writer", "subagents",
                              "scout")
        os.makedirs(folder)
        with open(os.path.join(folder, "agent.md"), "w", encoding="utf-8") as f:
            f.write("---\ndescription: looks around\ntools: [read, ls]\n---\n"
                    "You are SCOUT-AGENT.\n")
        root = "You are agentloop, a careful"
        d = self.start({"responses": [
            {"match": root, "usage": {"input_tokens": 100, "output_tokens": 10},
             "tool_calls": [{"id": "c1", "name": "agent__scout",
                             "input": {"task": "look at the layout"}}]},
            {"match": "SCOUT-AGENT", "usage": {"input_tokens": 1200, "output_tokens": 34},
             "text": "three folders"},
            {"match": root, "usage": {"input_tokens": 200, "output_tokens": 20},
             "text": "the scout saw three folders"},
        ]})
        self.new_session(d)
        self.assertEqual(d.find_element("css selector", "#subagents li.empty").text,
                         "No subagents")
        self.send(d, "send the scout")
        self.wait(d, lambda d: "the scout saw three folders" in self.assistant_texts(d),
                  "the answer")
        # The tree is drawn again as the child's events arrive: read it whole.
        def tree(d):
            return d.execute_script(
                "return [...document.querySelectorAll('#subagents li.subagent')].map(li => ["
                "li.querySelector('.subagent-title').textContent, "
                "li.querySelector('.badge').textContent, "
                "(li.querySelector('.subagent-cost') || {}).textContent])")
        self.wait(d, lambda d: tree(d) and tree(d)[0][1] == "completed", "the child, completed")
        self.assertEqual(tree(d), [["look at the layout", "completed",
                                    "1,234 tokens · 0 tool calls"]])
        # The child is listed under its parent, and its node opens its log.
        # (Both lists are drawn again as events arrive: read and click each
        # in one script, never through a node found earlier.)
        self.wait(d, lambda d: d.execute_script(
            "const li = document.querySelector('#session-list li.session.child');"
            "return li && li.textContent.includes('look at the layout') &&"
            " li.textContent.includes('writer')"), "the child listed under its parent")
        d.execute_script("document.querySelector('#subagents .subagent-title').click()")
        self.wait(d, lambda d: "three folders" in " ".join(self.assistant_texts(d)) and
                  "the scout saw" not in " ".join(self.assistant_texts(d)), "the child's log")
        self.shot(d, "subagent-tree")
        self.assert_no_script_errors(d)

    def test_xss_in_model_output_and_a_file_name_is_inert(self):
        name = '<img src=x onerror="window.__xss=3">.txt'
        script = {"responses": [
            {"text": "look: " + XSS + " and [click](javascript:window.__xss=4)",
             "tool_calls": [{"id": "c1", "name": "write",
                             "input": {"file_path": name, "content": XSS + "\n"}}]},
            {"text": "done " + XSS},
        ]}
        d = self.start(script)
        self.new_session(d)
        self.send(d, "be nasty")
        card = self.approval_card(d)
        self.wait(d, lambda d: card.find_elements("css selector", "table.diff"), "the diff")
        self.assertIn(XSS, card.find_element("css selector", "table.diff").text)
        card.find_element("css selector", "button.approve").click()
        self.wait(d, lambda d: any(t.startswith("done") for t in self.assistant_texts(d)),
                  "the answer")
        # Open every tool call so its arguments and diff are rendered.
        for det in d.find_elements("css selector", "#timeline details"):
            d.execute_script("arguments[0].open = true", det)
        self.assertIsNone(d.execute_script("return window.__xss"))
        self.assertEqual(d.find_elements("css selector", "#timeline img, #timeline script"), [])
        hrefs = [a.get_attribute("href") for a in d.find_elements("css selector", "#timeline a")]
        self.assertFalse([h for h in hrefs if h and h.startswith("javascript")], hrefs)
        self.assertIn(XSS, " ".join(self.assistant_texts(d)))
        self.assertTrue(os.path.exists(os.path.join(self.ws, name)))
        self.shot(d, "xss-inert")
        self.assert_no_script_errors(d)

    def test_keyboard_only_approval(self):
        from selenium.webdriver.common.action_chains import ActionChains
        from selenium.webdriver.common.keys import Keys
        script = {"responses": [
            {"tool_calls": [{"id": "c1", "name": "write",
                             "input": {"file_path": "k1.txt", "content": "one\n"}}]},
            {"tool_calls": [{"id": "c2", "name": "write",
                             "input": {"file_path": "k2.txt", "content": "two\n"}}]},
            {"text": "both handled"},
        ]}
        d = self.start(script)
        self.new_session(d)
        self.send(d, "write two files")
        first = self.approval_card(d)
        d.find_element("id", "prompt").send_keys(Keys.ESCAPE)
        # `a` approves the waiting approval.
        ActionChains(d).send_keys("a").perform()
        self.wait(d, lambda d: "decided" in first.get_attribute("class"), "the first decision")
        second = self.wait(d, lambda d: [c for c in d.find_elements(
            "css selector", "#timeline article.card.approval:not(.decided)")] or None,
            "the second card")[0]
        # `d` goes to the reason; Enter denies with it.
        ActionChains(d).send_keys("d").perform()
        self.wait(d, lambda d: d.switch_to.active_element.get_attribute("class") == "deny-reason",
                  "the reason box to have focus")
        ActionChains(d).send_keys("keyboard says no", Keys.ENTER).perform()
        self.wait(d, lambda d: "decided" in second.get_attribute("class"), "the second decision")
        self.assertEqual(self.read_ws("k1.txt"), "one\n")
        self.assertFalse(os.path.exists(os.path.join(self.ws, "k2.txt")))
        self.assertIn("denied", second.find_element("css selector", "p.result").text)
        self.shot(d, "keyboard-approval")
        self.assert_no_script_errors(d)

    def test_cancel_ends_the_running_turn(self):
        d = self.start({"responses": [{"text": "one two three four five six", "latency_ms": 3000}]})
        self.new_session(d)
        self.send(d, "take your time")
        cancel = d.find_element("id", "cancel")
        self.wait(d, lambda d: cancel.is_displayed(), "the cancel button")
        self.assertFalse(d.find_element("id", "send").is_enabled())
        cancel.click()
        self.wait(d, lambda d: d.find_elements("css selector", "#timeline .item.end.aborted"),
                  "the turn to end aborted")
        self.wait_turn_done(d)

    def test_a_question_card_is_answered_with_an_option(self):
        d = self.start({"responses": [
            {"tool_calls": [{"id": "q1", "name": "ask_user", "input": {
                "question": "Which <b>colour</b>?", "options": ["red", "blue"]}}]},
            {"text": "blue it is"},
        ]})
        sid = self.new_session(d)
        self.send(d, "pick a colour")
        card = self.wait(d, lambda d: (d.find_elements(
            "css selector", "#timeline article.card.question:not(.decided)") or [None])[0],
            "a question card")
        self.assertEqual(card.find_element("css selector", ".question-text").text,
                         "Which <b>colour</b>?")
        options = card.find_elements("css selector", "button.option")
        self.assertEqual([o.text for o in options], ["red", "blue"])
        self.shot(d, "question-card")
        options[1].click()
        self.wait(d, lambda d: "blue it is" in self.assistant_texts(d), "the continued turn")
        self.assertIn("decided", card.get_attribute("class"))
        status, _, msgs = self.call("GET", "/v1/sessions/%s/messages" % sid)
        results = [b for m in msgs["items"] for b in m["content"] if b["type"] == "tool_result"]
        self.assertIn("blue", json.dumps(results))
        self.assert_no_script_errors(d)

    def test_a_phone_width_in_dark_mode_can_approve(self):
        d = self.start(WRITE_THEN_DONE, width=360, height=740, dark=True)
        self.new_session(d)
        self.send(d, "write the notes")
        card = self.approval_card(d)
        bg = d.execute_script("return getComputedStyle(document.body).backgroundColor")
        self.assertEqual(bg, "rgb(15, 19, 24)")
        approve = card.find_element("css selector", "button.approve")
        d.execute_script("arguments[0].scrollIntoView({block: 'center'})", approve)
        width = d.execute_script("return document.documentElement.clientWidth")
        rect = approve.rect
        self.assertLessEqual(rect["x"] + rect["width"], width)
        scroll = d.execute_script("return document.documentElement.scrollWidth")
        self.assertLessEqual(scroll, width)  # no sideways scrolling
        self.shot(d, "phone-dark-approval")
        approve.click()
        self.wait(d, lambda d: "wrote notes.txt" in self.assistant_texts(d), "the answer")


class ConsoleSignInTest(BrowserCase):
    TOKEN = "console-e2e-token"

    def test_sign_in_exchanges_the_token_for_an_httponly_cookie(self):
        self.agent({"responses": [{"text": "signed in and answered"}]})
        self.serve()
        d = self.browser()
        self.open(d)
        self.wait(d, lambda d: d.find_element("id", "signin").is_displayed(), "the sign-in form")
        d.find_element("id", "token").send_keys("wrong")
        d.find_element("css selector", "#signin-form button").click()
        self.wait(d, lambda d: "unknown token" in d.find_element("id", "signin-error").text,
                  "the refusal")
        self.shot(d, "sign-in")
        d.find_element("id", "token").send_keys(self.TOKEN)
        d.find_element("css selector", "#signin-form button").click()
        self.wait_app(d)
        cookie = d.get_cookie("agentloop_console")
        self.assertTrue(cookie["httpOnly"])
        self.assertEqual(cookie["sameSite"], "Strict")
        self.assertEqual(d.execute_script("return document.cookie"), "")
        self.assertNotIn(self.TOKEN, json.dumps(d.execute_script(
            "return [Object.entries(localStorage), Object.entries(sessionStorage)]")))
        self.new_session(d)
        self.send(d, "hello")
        self.wait(d, lambda d: "signed in and answered" in self.assistant_texts(d), "the answer")
        # A reload keeps the sign-in; signing out ends it.
        d.refresh()
        self.wait_app(d)
        d.find_element("id", "sign-out").click()
        self.wait(d, lambda d: d.find_element("id", "signin").is_displayed(), "the sign-in form")
        self.assertIsNone(d.get_cookie("agentloop_console"))


class ConsoleGeneratedTokenTest(BrowserCase):
    """No server.tokens: the address `agentloop serve` prints signs the page in."""

    def test_the_printed_address_signs_in_and_leaves_the_address_bar(self):
        self.agent({"responses": [{"text": "answered"}]})
        self.serve_tokens = True  # neither tokens nor --no-auth: a generated token
        proc = self.serve()
        line = serve_util.next_stderr_line(proc)
        m = re.search(r"console: (\S+/\?token=[0-9a-f]{64})", line)
        self.assertTrue(m, line)
        d = self.browser()
        d.get(m.group(1))
        self.wait_app(d)
        self.assertEqual(d.execute_script("return location.search"), "")
        self.assertTrue(d.get_cookie("agentloop_console")["httpOnly"])
        d.refresh()
        self.wait_app(d)
        # Without the token the page asks for one.
        d.delete_all_cookies()
        self.open(d)
        self.wait(d, lambda d: d.find_element("id", "signin").is_displayed(), "the sign-in form")


if __name__ == "__main__":
    unittest.main()
